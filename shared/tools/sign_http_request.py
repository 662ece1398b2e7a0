"""mail_sign_http_request (spec section 4.3): Web Bot Auth headers for one HTTP request.

The signature is ``shared.signing.web_bot_auth``'s (components, IDN hosts, the key directory);
this module decides whether the call may sign at all, in the spec's order: the deployment first
(``PM_WEB_BOT_AUTH=off`` is ``web_bot_auth_disabled`` for every caller, so it says nothing about
any tenant), then the identity, then its workspace's policy (``policy_denied`` unless the
workspace allows signed requests). The request is never made here, nothing is stored, and the
headers are never logged (spec section 7).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from shared.errors import ErrorCode, PylotaError
from shared.signing.web_bot_auth import (EXPIRES_IN_DEFAULT, EXPIRES_IN_MAX, EXPIRES_IN_MIN,
                                         SignedRequest, sign_http_request)
from shared.tenancy.store import get_tenant
from shared.tools.arguments import SigningIdentityRef
from shared.tools.context import ToolContext
from shared.tools.scope import identity_for

__all__ = ["DESCRIPTION", "SignHttpRequestArgs", "SignedRequest", "run"]

DESCRIPTION = (
    "Get Web Bot Auth headers that let a website verify that your HTTP request comes from this "
    "mailbox's agent, through this deployment. Pass the exact https URL your HTTP client will "
    "request (and the method, if you add @method to components). Attach every returned header "
    "(Signature-Agent, From, Signature-Input, Signature) to that request unchanged, and send it "
    "before expires_at. This tool does not make the request: your own HTTP client does. Fails "
    "with web_bot_auth_disabled when this deployment has signed requests turned off, and with "
    "policy_denied when the workspace has not allowed them; then make the request unsigned or "
    "ask a person."
)

ComponentName = Literal["@authority", "signature-agent", "from", "@method", "@path", "@query"]


class SignHttpRequestArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Arguments of mail_sign_http_request (spec section 4.3)."""

    identity: SigningIdentityRef | None = None
    url: Annotated[str, msgspec.Meta(max_length=2048, pattern="^https://",
                                     description="The https URL the request will go to.")]
    method: Annotated[str, msgspec.Meta(
        pattern="^[!#$%&'*+.^_`|~0-9A-Z-]+$",
        description="The request method, an upper-case token. Signed only when components "
                    "includes @method, and then required.")] | None = None
    expires_in: Annotated[int, msgspec.Meta(
        ge=EXPIRES_IN_MIN, le=EXPIRES_IN_MAX,
        description="Seconds until the signature expires.")] = EXPIRES_IN_DEFAULT
    components: Annotated[frozenset[ComponentName], msgspec.Meta(
        max_length=6, description="Parts of the request to sign. @authority, signature-agent "
                                  "and from are always signed.")] | None = None


async def run(ctx: ToolContext, args: SignHttpRequestArgs) -> SignedRequest:
    """Sign a request to ``args.url`` as the identity, with its active address as ``From``.

    Raises:
        PylotaError: ``web_bot_auth_disabled`` when PM_WEB_BOT_AUTH is off;
            ``identity_not_found`` (out of scope, unknown, or deleting); ``policy_denied``
            when the workspace has not allowed signed requests; ``invalid_request`` (paths
            ``url``, ``method``, ``identity``) from
            :func:`~shared.signing.web_bot_auth.sign_http_request`; ``unavailable`` when
            PM_SIGNING_SECRET is unset or wrong.
    """
    settings = ctx.settings
    if settings.pm_web_bot_auth != "on":
        raise PylotaError(
            ErrorCode.WEB_BOT_AUTH_DISABLED, "This deployment has signed HTTP requests turned off.",
            fix="Make the request unsigned, or ask a person (the operator sets "
                "PM_WEB_BOT_AUTH=on).")
    async with ctx.db.acquire() as conn:
        identity = await identity_for(conn, ctx.principal, args.identity)
        tenant = await get_tenant(conn, identity.tenant_id)
        assert tenant is not None  # an identity's tenant exists (foreign key)
        if not tenant.allow_signed_requests:
            raise PylotaError(
                ErrorCode.POLICY_DENIED, "This workspace has not allowed signed HTTP requests.",
                fix="Make the request unsigned, or ask a person to allow signed requests for the "
                    "workspace (`pylota tenants set-policy --signed-requests`).")
        return await sign_http_request(
            conn, secret=settings.pm_signing_secret, api_host=settings.pm_api_host,
            address=identity.addresses[0], url=args.url, method=args.method,
            components=sorted(args.components or ()), expires_in=args.expires_in)
