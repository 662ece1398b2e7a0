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


async def test_an_internationalised_domain_is_stored_as_its_a_label_and_found_in_both_forms(conn):
    """A mailbox created as info@bücher.example was stored as typed, while a relay (and our own
    sent mail) writes the A-label: its mail was refused 550 (found by a new user)."""
    from shared.tenancy.store import create_identity, identity_of_address

    tenant = await create_tenant(conn, "acme")
    created = await create_identity(conn, tenant.id, " Info@Bücher.example ")
    assert created.addresses == ["info@xn--bcher-kva.example"]
    for form in ("info@xn--bcher-kva.example", "INFO@bücher.example", "info@BÜCHER.example"):
        found = await identity_of_address(conn, form)
        assert found is not None and found.id == created.id, form
    with pytest.raises(PylotaError) as taken:
        await create_identity(conn, tenant.id, "info@xn--bcher-kva.example")
    assert "belongs to an identity already" in taken.value.message
    # an identity kept in the U-label form before is still found, and still taken
    await conn.execute("UPDATE identity_addresses SET address = 'info@bücher.example'")
    assert (await identity_of_address(conn, "info@xn--bcher-kva.example")).id == created.id
    with pytest.raises(PylotaError):
        await create_identity(conn, tenant.id, "info@xn--bcher-kva.example")


@pytest.mark.parametrize(("address", "says"), [
    ("Ünï@bücher.example", "is not ASCII"),
    ("no-at-sign", "not an addr-spec"),
    ("a b@example.com", "not an addr-spec"),
    ("a@exa\u0000mple.com", "not an addr-spec"),
    ("a@bad-ü-.example", "not a domain name"),
    # ASCII domains a host could not have (a later attack): never received mail
    ("desk@pylota.example.", "not a domain name"),
    ("e@a..b", "not a domain name"),
    ("d@-bad-.example", "not a domain name"),
    ("q@xn--.example", "not a domain name"),
    ("l@" + "a" * 64 + ".example", "not a domain name"),
])
async def test_an_address_mail_could_not_come_from_is_refused(conn, address, says):
    """A non-ASCII local part was accepted, and its sent mail failed the delivery drain on every
    lease (UnicodeEncodeError; found by a new user)."""
    from shared.tenancy.store import create_identity

    tenant = await create_tenant(conn, "acme")
    with pytest.raises(PylotaError) as refused:
        await create_identity(conn, tenant.id, address)
    assert refused.value.code is ErrorCode.INVALID_REQUEST
    assert refused.value.details == {"path": "address"} and says in refused.value.message
    assert await conn.fetchval("SELECT count(*) FROM identities") == 0


async def test_names_with_line_breaks_or_control_characters_are_refused(conn):
    """A key named "evil\\n…pmk_live_x" printed a forged line in `keys list`; an identity's
    display name with CR LF came back raw in mail_list_identities and in signed assertions
    (found by an attack)."""
    from shared.auth.keys import create_key
    from shared.auth.permissions import Permission
    from shared.tenancy.store import create_identity

    tenant = await create_tenant(conn, "acme")
    refusals = [
        create_partner(conn, "Desk\udc85X"),  # a byte not UTF-8, as argv reads it (traceback)
        create_partner(conn, "evil\npartner"),
        create_tenant(conn, "evil\x1b[2Jtenant"),
        create_identity(conn, tenant.id, "desk@acme.example",
                        display_name="Evil\r\nBcc: x@y.example"),
        create_key(conn, tenant_id=tenant.id, identity_id=None,
                   permissions=[Permission.SEARCH_READ], name="evil\nkey_FAKE  pmk_live_x"),
    ]
    assert [await refused_path(make) for make in refusals] == [
        "name", "name", "name", "display_name", "name"]
    assert await conn.fetchval("SELECT count(*) FROM identities") == 0
    assert await conn.fetchval("SELECT count(*) FROM api_keys") == 0
