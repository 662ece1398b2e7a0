"""mail_wait (spec section 4.3): the front half of a worker tool.

:func:`run` checks what the front can check at once (the arguments, the identity), so a bad call
fails immediately, and hands back the job to run: the wait itself is domain work,
:func:`shared.mail.waiting.wait_for_message`, run on a worker by the job runner.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

import msgspec

from shared.errors import invalid
from shared.events import JOB_MAIL_WAIT
from shared.jobs import JOBS_BY_NAME, JobRequest
from shared.mail.waiting import WaitRequest, WaitResult, filter_for
from shared.tools.arguments import IdentityRef, Instant, ThreadId
from shared.tools.context import ToolContext
from shared.tools.scope import identity_for, thread_of

__all__ = ["DESCRIPTION", "WaitArgs", "WaitResult", "run"]

#: What ``from`` may be: an addr-spec or an @domain, each without spaces (``@`` alone, ``x`` or
#: ``a@b@c`` waited out their timeout matching nothing).
_SENDER = re.compile(r"[^\s@]*@[^\s@.]+(?:\.[^\s@.]+)*")

DESCRIPTION = (
    "Wait up to timeout_seconds for a new matching message, for example a reply in a thread or a "
    "verification code after a sign-up. A code or link is returned only when \"from\" names the "
    "expected sender domain and the message passed authentication. Returns timed_out true if "
    "nothing arrived."
)


class WaitArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Arguments of mail_wait (spec section 4.3)."""

    identity: IdentityRef | None = None
    from_: Annotated[str, msgspec.Meta(
        max_length=254, description="An address or @domain.")] | None = msgspec.field(
        name="from", default=None)
    subject_contains: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    thread_id: ThreadId | None = None
    kind: Literal["any", "reply", "verification"] = "any"
    since: Instant | None = None
    timeout_seconds: Annotated[int, msgspec.Meta(ge=1, le=60)] = 30


async def run(ctx: ToolContext, args: WaitArgs) -> JobRequest:
    """Resolve the identity and describe the wait for a worker.

    Raises:
        PylotaError: ``invalid_request`` on ``from`` when it is neither an address nor an
            @domain; ``thread_not_found`` for a ``thread_id`` not of the identity; identity
            errors from :func:`~shared.tools.scope.identity_for`.
    """
    if args.from_ is not None and _SENDER.fullmatch(args.from_.strip()) is None:
        raise invalid("from", f"{args.from_[:80]!r} is neither an address nor an @domain.",
                      "Give the sender's address (from: \"billing@example.com\") or its domain "
                      "(from: \"@example.com\"), or omit from.")
    thread_id = args.thread_id
    async with ctx.db.acquire() as conn:
        identity = await identity_for(conn, ctx.principal, args.identity)
        if thread_id is not None:
            # A thread of another identity (or none) can never receive this identity's mail:
            # the wait sat out its timeout where every other tool says thread_not_found (found
            # by an attack). A merged thread's old id waits on the thread it was merged into.
            thread_id = (await thread_of(conn, identity.id, thread_id)).id
    request = WaitRequest(
        identity_id=identity.id, since=args.since, timeout_seconds=float(args.timeout_seconds),
        wanted=filter_for(args.kind, from_=args.from_, subject_contains=args.subject_contains,
                          thread_id=thread_id))
    return JobRequest(job=JOBS_BY_NAME[JOB_MAIL_WAIT], payload=request,
                      seconds=float(args.timeout_seconds))
