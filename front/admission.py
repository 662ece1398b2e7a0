"""Admitting a request: the bearer key and the RL_API charge, one piece for both surfaces.

Spec section 2.1 steps 5 and 6, and section 7: "Buckets are shared with REST, so a key has one
budget whichever interface it uses". Keys come from the front's memory when it holds them
(``shared.auth.cache``), else from PostgreSQL. The MCP transport calls :func:`admit` at its ladder's
authentication rung, the REST routes before anything else (``front.rest.routes``).
"""

from __future__ import annotations

from litestar.types import Scope

from front.resources import Resources
from front.shedding import claim
from shared.auth.keys import Principal
from shared.errors import ErrorCode, PylotaError, dependency_failure

__all__ = ["admit"]


async def admit(res: Resources, scope: Scope) -> Principal:
    """The principal of the request's ``Authorization`` header, with the request counted
    against its key's share of the front's requests in progress (``front.shedding.claim``) and
    one RL_API unit charged.

    Raises:
        PylotaError: ``unauthenticated`` (also for two Authorization headers: a proxy might
            read the other one), ``key_expired``, ``key_revoked`` (401), ``partner_suspended``
            (403), ``rate_limited`` (429, ``details.retry_after``: RL_API, or the key's share in
            progress), ``unavailable`` (PostgreSQL or Redis down).
    """
    given = [value for name, value in scope["headers"] if name.lower() == b"authorization"]
    if len(given) > 1:  # the first won, where a proxy in front may read another (an attack)
        raise PylotaError(ErrorCode.UNAUTHENTICATED,
                          f"The Authorization header is given {len(given)} times.",
                          fix="Send one Authorization: Bearer <key> header.")
    authorization = given[0].decode("latin-1") if given else None
    try:
        found = await res.keys.authenticate(res.db, authorization)
    except PylotaError:
        raise
    except Exception as exc:  # noqa: BLE001 - a lost dependency, rendered by the surface
        raise dependency_failure(exc) or PylotaError(
            ErrorCode.INTERNAL, "Authentication failed unexpectedly.") from exc
    claim(scope, found.key_id)
    await res.limits.charge("RL_API", found.key_id)
    return found
