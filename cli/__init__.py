"""The ``pylota`` command: operators' administration, mail import, and the processes.

Not domain code: it sits above ``front``, ``workers`` and ``shared`` (nothing imports it) and
only parses options, calls their functions and prints. ``main`` is the command group;
``admin`` holds migrations, tenants, identities, keys and reindex; ``mail`` the import and
embedding commands (progress bars live here, never in ``shared``); ``processes`` serves the front
and runs workers. Every command reads settings with :meth:`~shared.config.Settings.from_env`;
errors print the message and the fix on stderr and exit with status 2. Logs go to stderr, so
``--json`` output on stdout is JSON only.
"""

__all__: list[str] = []
