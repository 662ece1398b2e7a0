"""The workers: arq processes that run the jobs of ``shared.jobs``.

``runner`` turns the job registry into arq functions and is the one place a job's progress,
result or error is published; ``process`` is a worker process (its resources, its liveness beat,
and an arq worker that comes back after Redis restarts). Job functions are thin: they decode
their payload and call a domain service of ``shared``; workers never import ``shared.tools`` or
``front``.
"""

__all__: list[str] = []
