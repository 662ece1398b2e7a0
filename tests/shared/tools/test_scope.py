"""What each key level reaches (spec section 3, L4): tenants, tenant arguments, identities."""

from __future__ import annotations

import msgspec
import pytest

from shared.auth.keys import authenticate, create_key, create_partner_key, create_platform_key
from shared.auth.permissions import Permission
from shared.errors import ErrorCode, PylotaError
from shared.ids import Prefix, new_id
from shared.tenancy.store import create_identity, create_partner, create_tenant
from shared.tools.scope import identity_for, reachable_tenant, search_scope, tenant_scope

READ = [Permission.MESSAGES_READ]


@pytest.fixture
async def world(conn):
    ours, theirs = await create_partner(conn, "ours"), await create_partner(conn, "theirs")
    tenants = {
        "ours": await create_tenant(conn, "ours-live", partner_id=ours.id),
        "ours_test": await create_tenant(conn, "ours-test", partner_id=ours.id, mode="test"),
        "theirs": await create_tenant(conn, "theirs-live", partner_id=theirs.id),
        "orphan": await create_tenant(conn, "orphan"),
    }
    identities = {name: await create_identity(conn, t.id, f"desk@{name}.example")
                  for name, t in tenants.items()}
    sibling = await create_identity(conn, tenants["ours"].id, "sales@ours.example")

    async def principal(token: str):
        return await authenticate(conn, f"Bearer {token}")

    keys = {
        "platform": await principal((await create_platform_key(conn, permissions=READ))[1]),
        "platform_test": await principal(
            (await create_platform_key(conn, permissions=READ, mode="test"))[1]),
        "partner": await principal(
            (await create_partner_key(conn, partner_id=ours.id, permissions=READ))[1]),
        "tenant": await principal((await create_key(conn, tenant_id=tenants["ours"].id,
                                                    identity_id=None, permissions=READ))[1]),
        "identity": await principal((await create_key(
            conn, tenant_id=tenants["ours"].id, identity_id=identities["ours"].id,
            permissions=READ))[1]),
    }
    return {"tenants": tenants, "identities": identities, "sibling": sibling, "keys": keys}


async def test_tenant_scope_of_each_level(conn, world):
    t = {name: tenant.id for name, tenant in world["tenants"].items()}
    reach = {level: set(await tenant_scope(conn, key)) for level, key in world["keys"].items()}
    assert reach == {
        "platform": {t["ours"], t["theirs"], t["orphan"]},
        "platform_test": {t["ours_test"]},
        "partner": {t["ours"]},  # not the orphan, not the other partner's, not its test tenant
        "tenant": {t["ours"]},
        "identity": {t["ours"]},
    }


async def test_a_tenant_argument_out_of_reach_is_scope_denied(conn, world):
    t = {name: tenant.id for name, tenant in world["tenants"].items()}
    keys = world["keys"]
    assert await reachable_tenant(conn, keys["partner"], t["ours"]) == t["ours"]
    for level, tenant in [("partner", "theirs"), ("partner", "orphan"), ("partner", "ours_test"),
                          ("platform", "ours_test"), ("platform_test", "ours"),
                          ("tenant", "theirs"), ("identity", "orphan")]:
        with pytest.raises(PylotaError) as raised:
            await reachable_tenant(conn, keys[level], t[tenant])
        assert raised.value.code is ErrorCode.SCOPE_DENIED, (level, tenant)
    with pytest.raises(PylotaError) as raised:  # an unknown tenant looks the same
        await reachable_tenant(conn, keys["platform"], new_id(Prefix.TENANT))
    assert raised.value.code is ErrorCode.SCOPE_DENIED


async def test_identities_out_of_reach_are_not_found(conn, world):
    ids, keys = world["identities"], world["keys"]
    out_of_reach = {
        "platform": [ids["ours_test"]],
        "platform_test": [ids["ours"], ids["orphan"]],
        "partner": [ids["theirs"], ids["orphan"], ids["ours_test"]],
        "tenant": [ids["theirs"], ids["orphan"]],
        "identity": [world["sibling"], ids["theirs"]],
    }
    for level, identities in out_of_reach.items():
        for identity in identities:
            for ref in (identity.id, identity.addresses[0].upper()):
                with pytest.raises(PylotaError) as raised:
                    await identity_for(conn, keys[level], ref)
                assert raised.value.code is ErrorCode.IDENTITY_NOT_FOUND, (level, ref)
    assert (await identity_for(conn, keys["partner"], "desk@ours.example")).id == ids["ours"].id
    assert (await identity_for(conn, keys["identity"], None)).id == ids["ours"].id


@pytest.mark.parametrize("status", ["deleting", "deleted"])
@pytest.mark.parametrize("level", ["identity", "tenant"])
async def test_an_identity_being_deleted_or_deleted_cannot_act(conn, world, status, level):
    """Not for sending or signing only: no tool reads, labels, waits on or searches such an
    identity either, whichever key asks (before, its own key still read and labelled its mail:
    found by an attack). Paused again, it acts."""
    identity = world["identities"]["ours"]
    key = world["keys"][level]
    ref = None if level == "identity" else identity.id
    await conn.execute("UPDATE identities SET status = $2 WHERE id = $1", identity.id, status)
    # an identity key read its identity when it authenticated
    if key.identity is not None:
        key = msgspec.structs.replace(key, identity=msgspec.structs.replace(key.identity,
                                                                            status=status))
    for resolve in (lambda: identity_for(conn, key, ref),
                    lambda: search_scope(conn, key, scope="identity", identity=ref,
                                         tenant_id=None, identity_ids=None)):
        with pytest.raises(PylotaError) as raised:
            await resolve()
        assert raised.value.code is ErrorCode.IDENTITY_NOT_FOUND
    await conn.execute("UPDATE identities SET status = 'paused' WHERE id = $1", identity.id)
    if key.identity is not None:
        key = msgspec.structs.replace(key, identity=msgspec.structs.replace(key.identity,
                                                                            status="paused"))
    assert (await identity_for(conn, key, ref)).id == identity.id
