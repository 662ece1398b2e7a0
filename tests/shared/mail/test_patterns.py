"""Tenant reference patterns come from tenants and are matched against text from anyone: they run
on RE2, in linear time, and bad ones are refused with the field and the fix."""

from __future__ import annotations

import time

import pytest

from shared.errors import ErrorCode, PylotaError
from shared.mail.patterns import MAX_PATTERN_CHARS, set_pattern, tenant_patterns
from shared.mail.refs import extract_refs
from shared.search.query import parse
from shared.tenancy.store import create_tenant

NESTED = "(A+)+B"  # exponential for a backtracking engine on "AAAA…C"


async def test_a_nested_quantifier_cannot_stall_a_search_or_an_ingest(conn):
    tenant = await create_tenant(conn, "acme")
    await set_pattern(conn, tenant.id, "p1", NESTED)
    patterns = await tenant_patterns(conn, tenant.id)
    hostile = "A" * 1000 + "C"
    started = time.monotonic()
    with pytest.raises(PylotaError) as raised:
        parse(f"custom:p1:{hostile}", custom_patterns=patterns)
    refs = extract_refs("Subject", f"Your ref is {hostile} and AAAB", custom_patterns=patterns)
    assert time.monotonic() - started < 2
    assert raised.value.code is ErrorCode.INVALID_REQUEST
    assert ("custom:p1", "AAAB") in refs


@pytest.mark.parametrize(("pattern", "says"), [
    ("[", "does not compile"),
    ("x?", "matches the empty string"),
    ("A" * (MAX_PATTERN_CHARS + 1), "longer than"),
])
async def test_bad_patterns_are_refused_naming_the_field(conn, pattern, says):
    tenant = await create_tenant(conn, "acme")
    with pytest.raises(PylotaError) as raised:
        await set_pattern(conn, tenant.id, "p1", pattern)
    assert raised.value.details == {"path": "pattern"}
    assert says in raised.value.message


async def test_a_huge_repeat_count_is_a_literal_and_a_large_one_is_refused(conn):
    tenant = await create_tenant(conn, "acme")
    # RE2 reads a count too large to be one as the literal text (and never allocates it)...
    await set_pattern(conn, tenant.id, "p1", "A{99999999999}")
    patterns = await tenant_patterns(conn, tenant.id)
    assert patterns == {"p1": "A{99999999999}"}
    assert not [r for r in extract_refs("s", "A" * 5000, custom_patterns=patterns)
                if r[0] == "custom:p1"]
    # ...and refuses a real count over its limit of 1,000, naming the field.
    with pytest.raises(PylotaError) as raised:
        await set_pattern(conn, tenant.id, "p2", "A{1001}")
    assert raised.value.details == {"path": "pattern"}
    assert "does not compile" in raised.value.message
