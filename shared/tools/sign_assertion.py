"""mail_sign_assertion (spec section 4.3): a signed agent assertion for one identity.

The token itself is ``shared.signing.assertions``' (its claims, the key, ``ext``'s rules); this
module resolves the identity, reads the workspace's ``accountable_human`` policy and passes both
on. The token goes back to the caller only: it is never stored, and the call's ``tool_call`` log
line (``shared.tools.call``) holds neither arguments nor result (spec section 7).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from shared.signing.assertions import (EXPIRES_IN_DEFAULT, EXPIRES_IN_MAX, EXPIRES_IN_MIN,
                                       AssertionResult, sign_assertion)
from shared.tenancy.store import get_tenant
from shared.tools.arguments import SigningIdentityRef
from shared.tools.context import ToolContext
from shared.tools.scope import identity_for

__all__ = ["DESCRIPTION", "SignAssertionArgs", "AssertionResult", "run"]

DESCRIPTION = (
    "Get a short-lived signed token (a JWT) that proves to a third-party service that you are "
    "this mailbox's agent. It names the identity's address, display name and workspace, says "
    "that it is an AI agent, and says whether an accountable human stands behind it. Use it "
    "when a service asks you to prove who you are and checks tokens against this deployment's "
    "published keys (the JWKS at jwks_uri). Set audience to the value the service expects, and "
    "pass its challenge as nonce if it gave you one. Send the token only to that service. It "
    "expires within minutes, and each call makes a new one. Anything in ext is visible to the "
    "service, so put nothing secret in it."
)


class SignAssertionArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Arguments of mail_sign_assertion (spec section 4.3)."""

    identity: SigningIdentityRef | None = None
    audience: Annotated[str, msgspec.Meta(
        min_length=1, max_length=256, pattern=r"^[\x20-\x7E]{1,256}$",
        description="The service's URL or the identifier it expects in aud.")]
    expires_in: Annotated[int, msgspec.Meta(
        ge=EXPIRES_IN_MIN, le=EXPIRES_IN_MAX,
        description="Seconds until the token expires.")] = EXPIRES_IN_DEFAULT
    nonce: Annotated[str, msgspec.Meta(
        min_length=1, max_length=128, pattern=r"^[\x20-\x7E]{1,128}$",
        description="The service's challenge, copied into the token.")] | None = None
    ext: Annotated[dict[str, Any], msgspec.Meta(
        description="Extra claims for the service, at most 2 KB as JSON, placed under the ext "
                    "claim. Registered and Pylota claim names are refused.")] | None = None


async def run(ctx: ToolContext, args: SignAssertionArgs) -> AssertionResult:
    """A new assertion naming the identity's active address, display name and workspace, with
    the workspace's ``accountable_human`` policy.

    Raises:
        PylotaError: ``identity_not_found`` (out of scope, unknown, or deleting);
            ``invalid_request`` (path ``ext``) for an ``ext`` over 2 KB or using a reserved
            claim name; ``unavailable`` when PM_SIGNING_SECRET is unset or wrong.
    """
    settings = ctx.settings
    async with ctx.db.acquire() as conn:
        identity = await identity_for(conn, ctx.principal, args.identity)
        tenant = await get_tenant(conn, identity.tenant_id)
        assert tenant is not None  # an identity's tenant exists (foreign key)
        return await sign_assertion(
            conn, secret=settings.pm_signing_secret, api_host=settings.pm_api_host,
            identity_id=identity.id, address=identity.addresses[0],
            display_name=identity.display_name, tenant_id=tenant.id, tenant_name=tenant.name,
            accountable_human=tenant.accountable_human, audience=args.audience,
            expires_in=args.expires_in, nonce=args.nonce, ext=args.ext)
