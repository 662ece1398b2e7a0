"""Tenant reference patterns come from tenants and are matched against text from anyone: they run
on RE2, in linear time, and bad ones are refused with the field and the fix."""

from __future__ import annotations

import time

import pytest

from shared.errors import ErrorCode, PylotaError
from shared.search.patterns import MAX_PATTERN_CHARS, set_pattern, tenant_patterns
from shared.search.query import parse
from shared.search.refs import extract_refs
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


async def test_a_huge_repeat_count_never_escapes_as_a_crash(conn):
    tenant = await create_tenant(conn, "acme")
    try:
        await set_pattern(conn, tenant.id, "p1", "A{99999999999}")
    except PylotaError as exc:
        assert exc.details == {"path": "pattern"}
