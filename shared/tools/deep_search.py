"""mail_deep_search (spec sections 2.6, 4.3 and 7): the front half of a worker tool.

:func:`run` does in the front what can be done at once, so that a bad call fails before any job
is queued: it resolves the scope exactly as mail_search does (``shared.tools.scope.search_scope``:
one identity, or with ``scope: "tenant"`` the tenant's identities or the ``identity_ids`` given;
``scope_denied``, ``scope_too_large``), reads the tenant's time zone and ``custom:`` patterns,
and applies the tenant's agentic policy: ``max_steps`` and ``max_seconds`` default to
``tenants.agentic_max_steps`` and ``agentic_max_seconds`` (6 and 8 unless changed, ``pylota
tenants set-policy``), and a larger value is lowered to them, not refused (a value outside 2–10
or 3–30 never gets here: the argument types refuse it as ``invalid_request``). An
``identity_ids`` entry that is being deleted is left out of the search.

It returns the :class:`~shared.jobs.JobRequest` of the deep-search job, whose seconds are the
call's ``max_seconds``; the agent itself (``shared.deepsearch``) runs on a worker, reporting one
``notifications/progress`` per step.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from shared.deepsearch import DeepSearchRequest, DeepSearchResult
from shared.events import JOB_DEEP_SEARCH
from shared.jobs import JOBS_BY_NAME, JobRequest
from shared.mail.patterns import tenant_patterns
from shared.tenancy.store import AGENTIC_SECONDS, AGENTIC_STEPS
from shared.tools.arguments import IdentityId, IdentityRef, TenantId
from shared.tools.context import ToolContext
from shared.tools.scope import MAX_SCOPE_IDENTITIES, search_scope

__all__ = ["DESCRIPTION", "DeepSearchArgs", "DeepSearchResult", "run"]

DESCRIPTION = (
    "Answer a question about the mailbox with cited evidence. The service plans and runs several "
    "searches, reads the most relevant threads, and returns an answer in which every sentence "
    "cites message IDs that were checked against the evidence. Status is answered, "
    "insufficient_evidence (the mail does not answer it; the trace shows what was searched), "
    "budget_exhausted or degraded (plain search results only). Prefer this over many mail_search "
    "calls when the answer needs several steps. It takes a few seconds."
)


class DeepSearchArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Arguments of mail_deep_search (spec section 4.3). ``max_steps`` and ``max_seconds`` have
    no default in the schema: leaving them out means the tenant's limits."""

    question: Annotated[str, msgspec.Meta(min_length=1, max_length=1024)]
    identity: IdentityRef | None = None
    scope: Literal["identity", "tenant"] = "identity"
    tenant_id: TenantId | None = None
    identity_ids: Annotated[frozenset[IdentityId], msgspec.Meta(
        min_length=1, max_length=MAX_SCOPE_IDENTITIES,
        description="Scope tenant only: search only these identities.")] | None = None
    max_steps: Annotated[int, msgspec.Meta(
        ge=AGENTIC_STEPS[0], le=AGENTIC_STEPS[-1],
        description="Defaults to, and is capped by, the tenant's agentic step limit (6 unless "
                    "changed).")] | None = None
    max_seconds: Annotated[int, msgspec.Meta(
        ge=AGENTIC_SECONDS[0], le=AGENTIC_SECONDS[-1],
        description="Defaults to, and is capped by, the tenant's agentic time limit (8 unless "
                    "changed).")] | None = None
    # Nothing is quarantined yet (no message carries that state), so every message is searched
    # either way; accepted so that callers written to the spec work.
    include_quarantined: bool = False


def _within(asked: int | None, limit: int) -> int:
    """The tenant's ``limit`` when nothing was asked, else the smaller of the two."""
    return limit if asked is None else min(asked, limit)


async def run(ctx: ToolContext, args: DeepSearchArgs) -> JobRequest:
    """Resolve scope and budgets and describe the deep search for a worker.

    Returns:
        The job request: a :class:`~shared.deepsearch.DeepSearchRequest` with the identities to
        search, the tenant's time zone and patterns, and the budgets after the tenant's policy;
        its seconds are ``max_seconds``.

    Raises:
        PylotaError: the scope errors of :func:`~shared.tools.scope.search_scope`
            (``invalid_request``, ``identity_not_found``, ``scope_denied``, ``scope_too_large``).
    """
    async with ctx.db.acquire() as conn:
        resolved = await search_scope(conn, ctx.principal, scope=args.scope,
                                      identity=args.identity, tenant_id=args.tenant_id,
                                      identity_ids=args.identity_ids)
        patterns = await tenant_patterns(conn, resolved.tenant.id)
    tenant = resolved.tenant
    max_seconds = _within(args.max_seconds, tenant.agentic_max_seconds)
    request = DeepSearchRequest(
        question=args.question, identity_ids=resolved.identity_ids, time_zone=tenant.time_zone,
        patterns=patterns, max_steps=_within(args.max_steps, tenant.agentic_max_steps),
        max_seconds=max_seconds)
    return JobRequest(job=JOBS_BY_NAME[JOB_DEEP_SEARCH], payload=request,
                      seconds=float(max_seconds))
