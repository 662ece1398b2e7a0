"""The tenant's ``custom:`` reference patterns: owner of ``tenant_ref_patterns``.

A pattern is part of the tenant's policy (spec section 4.3: "booking references work when the
organisation defines a custom: pattern for them"). ``NAME`` is lower case (``^[a-z][a-z0-9_]{0,31}$``);
the pattern is an RE2 regular expression that must match a whole normalized value (upper case,
no spaces or dashes), e.g. ``booking`` -> ``[A-Z]{3}[0-9]{3}``. RE2 (``google-re2``) matches in
time linear in the text, so a pattern such as ``(A+)+B`` cannot stall a search or an ingest the way
a backtracking engine would: patterns come from tenants and the text from anyone who sends mail.
Patterns are checked when saved, so the query parser and ingest can trust them. Ingest extracts with the patterns in force when the
mail arrives; mail stored before a pattern existed is found again after ``pylota reindex``.
"""

from __future__ import annotations

import re

import asyncpg
import re2

from shared.errors import invalid
from shared.tenancy.store import identity_tenant_id

__all__ = ["MAX_PATTERNS", "MAX_PATTERN_CHARS", "compile_pattern", "set_pattern",
           "tenant_patterns", "identity_patterns"]

#: Most custom patterns one tenant defines; each one is run over every ingested message.
MAX_PATTERNS = 20

#: Longest pattern accepted, in characters.
MAX_PATTERN_CHARS = 200

_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is our user's error, reported, not logged by RE2


def compile_pattern(pattern: str) -> re2._Regexp:
    """Compile a tenant pattern with RE2.

    Raises:
        ValueError: the pattern does not compile (the message says why).
    """
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(reason) from None


async def set_pattern(conn: asyncpg.Connection, tenant_id: str, name: str, pattern: str) -> None:
    """Create or replace the tenant's pattern ``name``.

    Raises:
        PylotaError: ``invalid_request`` naming ``name`` or ``pattern`` when the name has the
            wrong shape, the regular expression does not compile, matches the empty string, or
            the tenant already has :data:`MAX_PATTERNS` other patterns.
    """
    if _NAME.fullmatch(name) is None:
        raise invalid("name", f"{name!r} is not a pattern name.",
                      "Use a lower-case letter then up to 31 letters, digits or _, e.g. booking.")
    if not 1 <= len(pattern) <= MAX_PATTERN_CHARS:
        raise invalid("pattern", f"The pattern is empty or longer than {MAX_PATTERN_CHARS} "
                      "characters.", "Write a shorter pattern, e.g. [A-Z]{3}[0-9]{3}.")
    try:
        compiled = compile_pattern(pattern)
    except ValueError as exc:
        raise invalid("pattern", f"The pattern does not compile: {exc}.",
                      "Write an RE2 regular expression, e.g. [A-Z]{3}[0-9]{3}.") from exc
    if compiled.fullmatch(""):
        raise invalid("pattern", "The pattern matches the empty string.",
                      "Write a pattern that needs at least one character.")
    count = await conn.fetchval(
        "SELECT count(*) FROM tenant_ref_patterns WHERE tenant_id = $1 AND name <> $2",
        tenant_id, name)
    if count >= MAX_PATTERNS:
        raise invalid("name", f"The tenant already has {MAX_PATTERNS} patterns.",
                      "Replace an existing pattern instead of adding one.")
    await conn.execute(
        "INSERT INTO tenant_ref_patterns (tenant_id, name, pattern) VALUES ($1, $2, $3)"
        " ON CONFLICT (tenant_id, name) DO UPDATE SET pattern = excluded.pattern",
        tenant_id, name, pattern)


async def tenant_patterns(conn: asyncpg.Connection, tenant_id: str) -> dict[str, str]:
    """The tenant's patterns, NAME to regular expression."""
    rows = await conn.fetch(
        "SELECT name, pattern FROM tenant_ref_patterns WHERE tenant_id = $1 ORDER BY name",
        tenant_id)
    return {r["name"]: r["pattern"] for r in rows}


async def identity_patterns(conn: asyncpg.Connection, identity_id: str) -> dict[str, str]:
    """The patterns of the tenant that owns ``identity_id``."""
    tenant_id = await identity_tenant_id(conn, identity_id)
    return {} if tenant_id is None else await tenant_patterns(conn, tenant_id)
