"""Deep search: ``mail_deep_search``'s cited-answer agent (spec sections 2.6, 4.3 and 7; DESIGN.md
section 4, "Deep search").

Where things happen:

- ``records``: the request the job runner builds and the agentic response (its JSON Schema is
  the tool's ``outputSchema``).
- ``question``: what the question asks (its parts and their kinds) and what it names.
- ``planning``: the searches for it, in the query language of ``mail_search``.
- ``agent``: the loop: searches through ``shared.search.engine.run_search``, reading through
  ``shared.mail.store`` (``reading``), ranking (``evidence``), the backend's draft, and the
  citation check (``citations``), with progress, checkpoints and budgets.
- ``evidence``: sentences scored against each part of the question; ``instructions`` keeps
  mail that speaks to the model out of the evidence.
- ``composing``: the built-in extractive answer; ``backends``: it, and an OpenAI-compatible chat
  endpoint held to the same check.

Nothing here imports ``front``, ``workers``, Litestar or arq: the worker job calls
:func:`deep_search` and publishes its progress.
"""

from shared.deepsearch.agent import deep_search
from shared.deepsearch.backends import Backend, BuiltinBackend, ChatBackend, backend_for
from shared.deepsearch.records import (DeepSearchRequest, DeepSearchResult, Evidence, TraceStep,
                                       Usage)

__all__ = ["Backend", "BuiltinBackend", "ChatBackend", "DeepSearchRequest", "DeepSearchResult",
           "Evidence", "TraceStep", "Usage", "backend_for", "deep_search"]
