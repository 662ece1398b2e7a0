"""mail_get_usage (spec section 4.3): the key's own workspace's plan and allowances.

Only tenant and identity keys see the tool (DESIGN.md section 5.2: platform and partner keys can
never hold ``usage:read``), so the workspace is always the key's tenant and the tool takes no
``tenant_id``. The counting is ``shared.plans.usage``.
"""

from __future__ import annotations

import msgspec

from shared.plans import Usage, usage
from shared.tools.context import ToolContext

__all__ = ["DESCRIPTION", "GetUsageArgs", "Usage", "run"]

DESCRIPTION = (
    "Show this workspace's plan and, for each allowance (inboxes, sends, triage, custom_domains, "
    "storage_gb, seats), how much is granted, used and remaining, and when it resets. Call it "
    "before a send or a batch of sends to see what is left. A billing_limit error (HTTP 402) from "
    "another tool means an allowance is spent: nothing was stored, so tell a person, and after an "
    "upgrade or top-up retry with the same idempotency_key. unlimited true means no limit applies."
)


class GetUsageArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """mail_get_usage takes no arguments (spec section 4.3)."""


async def run(ctx: ToolContext, args: GetUsageArgs) -> Usage:
    """The plan and allowances of the key's tenant, counted now."""
    assert ctx.principal.tenant_id is not None, "the registry admits tenant and identity keys only"
    async with ctx.db.acquire() as conn:
        return await usage(conn, ctx.principal.tenant_id)
