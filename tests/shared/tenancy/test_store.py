"""Partners, tenants and their reach (spec section 3, L4), on the real PostgreSQL database."""

from __future__ import annotations

import pytest

from shared.errors import ErrorCode, PylotaError
from shared.ids import Prefix, new_id
from shared.tenancy.store import (create_partner, create_tenant, list_partners,
                                  partner_tenant_ids, platform_tenant_ids, resolve_partner,
                                  set_partner_status, set_tenant_policy)


async def refused_path(make) -> str:
    with pytest.raises(PylotaError) as raised:
        await make
    assert raised.value.code is ErrorCode.INVALID_REQUEST
    return raised.value.details["path"]


async def test_partners_by_id_or_name_and_their_status(conn):
    partner = await create_partner(conn, "Reseller")
    assert partner.id.startswith("par_") and partner.status == "active"
    assert (await resolve_partner(conn, "Reseller")).id == partner.id
    assert (await resolve_partner(conn, partner.id)).name == "Reseller"
    assert (await set_partner_status(conn, partner.id, "suspended")).status == "suspended"
    assert [p.status for p in await list_partners(conn)] == ["suspended"]
    assert await refused_path(create_partner(conn, "Reseller")) == "name"
    assert await refused_path(create_partner(conn, "  ")) == "name"
    assert await refused_path(resolve_partner(conn, "nobody")) == "partner"
    assert await refused_path(set_partner_status(conn, partner.id, "gone")) == "status"
    assert await refused_path(set_partner_status(conn, new_id(Prefix.PARTNER), "active")) \
        == "partner"


async def test_a_partner_reaches_its_own_tenants_of_one_mode(conn):
    ours, theirs = await create_partner(conn, "ours"), await create_partner(conn, "theirs")
    live = await create_tenant(conn, "live shop", partner_id=ours.id)
    sandbox = await create_tenant(conn, "sandbox", partner_id=ours.id, mode="test")
    other = await create_tenant(conn, "other", partner_id=theirs.id)
    orphan = await create_tenant(conn, "orphan")
    assert live.partner_id == ours.id and orphan.partner_id is None
    assert await partner_tenant_ids(conn, ours.id, mode="live") == [live.id]
    assert await partner_tenant_ids(conn, ours.id, mode="test") == [sandbox.id]
    assert await partner_tenant_ids(conn, None, mode="live") == []  # no partner matches nobody
    assert set(await platform_tenant_ids(conn, mode="live")) == {live.id, other.id, orphan.id}
    assert await platform_tenant_ids(conn, mode="test") == [sandbox.id]
    assert await refused_path(create_tenant(conn, "x", partner_id=new_id(Prefix.PARTNER))) \
        == "partner"


async def test_the_signing_policy_is_off_until_set(conn):
    tenant = await create_tenant(conn, "acme")
    assert (tenant.accountable_human, tenant.allow_signed_requests) == (False, False)
    human = await set_tenant_policy(conn, tenant.id, accountable_human=True)
    assert (human.accountable_human, human.allow_signed_requests) == (True, False)
    both = await set_tenant_policy(conn, tenant.id, allow_signed_requests=True)
    assert (both.accountable_human, both.allow_signed_requests) == (True, True)
    assert await refused_path(set_tenant_policy(conn, new_id(Prefix.TENANT),
                                                accountable_human=True)) == "tenant"
