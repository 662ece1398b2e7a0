"""Authentication-Results header fields (RFC 8601): parse them, and pick the ones to believe.

A receiving server records what it checked (SPF, DKIM, DMARC, ...) in a field such as::

    Authentication-Results: mx.pylota.test; spf=pass smtp.mailfrom=acme.example;
        dkim=pass (2048-bit key) header.d=acme.example header.s=sel1;
        dmarc=pass header.from=acme.example

Anyone can write such a field into a message before sending it, so only fields added by a server
the operator trusts count, named by their authserv-id (RFC 8601 section 2.5: "the authserv-id
... identifies the ADMD"). :func:`trusted_results` applies the rule of section 5 (a border MTA
adds its field on top; what is below it came from outside): reading the header from the top, the
first field with a trusted authserv-id opens the trusted block, which takes every further field
with a trusted authserv-id until the next ``Received`` field. Fields below that ``Received`` (the
hop before ours) were written before the message reached the trusted server, by the sender or a
relay, and are ignored even when they name a trusted authserv-id; so are fields with any other
authserv-id. The trusted server should also delete fields claiming its id from incoming mail
(section 5); when it does not, and the message never passed through it, a forged field is the
topmost and would be believed, so configure only authserv-ids of servers every message passes.

Pure: no I/O. Used by ``shared.mail.trust``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence

import msgspec

__all__ = ["AuthResult", "AuthResults", "parse_auth_results", "trusted_results"]

FIELD = "authentication-results"
#: Results read per field and fields read per message: a real field has a handful.
_MAX_RESULTS = 20
_MAX_FIELDS = 50


class AuthResult(msgspec.Struct, frozen=True, kw_only=True):
    """One ``resinfo`` (RFC 8601 section 2.2): ``method`` (``spf``, ``dkim``, ``dmarc``, ...) and
    ``result`` lower-cased, the optional ``reason``, and ``properties`` keyed ``ptype.property``
    (``header.d``, ``smtp.mailfrom``, ...), values as written."""

    method: str
    result: str
    reason: str | None = None
    properties: dict[str, str] = {}


class AuthResults(msgspec.Struct, frozen=True, kw_only=True):
    """One Authentication-Results field: who wrote it and what it found (empty for ``none``)."""

    authserv_id: str
    results: list[AuthResult]


_TOKEN = re.compile(r'[^\s;=()"]+')


def _without_comments(value: str) -> str:
    # Comments nest (RFC 5322 section 3.2.2) and may hold anything; quoted strings keep theirs.
    out, depth, quoted, escaped = [], 0, False, False
    for ch in value:
        if escaped:
            escaped = False
            if depth == 0:
                out.append(ch)
            continue
        if ch == "\\":
            escaped = True
            if depth == 0:
                out.append(ch)
            continue
        if quoted:
            quoted = ch != '"'
            out.append(ch)
        elif ch == "(":
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
            out.append(" ")
        elif depth == 0:
            quoted = ch == '"'
            out.append(ch)
    return "".join(out)


def _split(value: str) -> list[str]:
    """Split on ``;`` outside quoted strings."""
    parts, start, quoted, escaped = [], 0, False, False
    for i, ch in enumerate(value):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == ";" and not quoted:
            parts.append(value[start:i])
            start = i + 1
    parts.append(value[start:])
    return [p.strip() for p in parts]


_PAIR = re.compile(r'\s*([^\s=;]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]*))')


def _pairs(text: str) -> list[tuple[str, str]]:
    """``name = value`` pairs of one resinfo; a value is a token or a quoted string."""
    pairs = []
    pos = 0
    while (m := _PAIR.match(text, pos)) is not None:
        value = m.group(2) if m.group(2) is not None else m.group(3)
        pairs.append((m.group(1), re.sub(r"\\(.)", r"\1", value)))
        pos = m.end()
    return pairs


def parse_auth_results(value: str) -> AuthResults | None:
    """Parse one field's value (RFC 8601 section 2.2), leniently: a resinfo that is not
    ``method=result`` is skipped. Returns None when there is no authserv-id."""
    bare = _without_comments(value)
    parts = _split(bare)
    head = parts[0].split()
    # An authserv-id is ASCII, and so is what surrounds it: a no-break space before it is not
    # white space to every reader (found by an attack).
    if not head or not bare.split(";", 1)[0].isascii() or not _TOKEN.fullmatch(head[0]):
        return None
    results = []
    for part in parts[1:]:
        pairs = _pairs(part)
        if not pairs:  # "none", or not a resinfo
            continue
        method, result = pairs[0]
        reason = None
        properties: dict[str, str] = {}
        for name, val in pairs[1:]:
            if name.lower() == "reason":
                reason = val
            elif "." in name:
                properties[name.lower()] = val
        results.append(AuthResult(method=method.split("/")[0].lower(), result=result.lower(),
                                  reason=reason, properties=properties))
        if len(results) >= _MAX_RESULTS:
            break
    return AuthResults(authserv_id=head[0].lower(), results=results)


def trusted_results(headers: Sequence[tuple[str, str]], trusted_ids: Collection[str], *,
                    own_id: str | None = None) -> list[AuthResults]:
    """The Authentication-Results fields of the trusted block (module docstring), top first.

    ``headers`` are the message's fields in order, top first; ``trusted_ids`` the authserv-ids
    of servers the operator trusts (compared case-insensitively). ``own_id`` is our own SMTP
    listener's, which writes its field at the top under its one Received field: a field with
    that id counts only there, never below a second Received (mail that never passed through
    the listener, such as an import, carried a sender's forged one: found by an attack). Empty
    when none is trusted.
    """
    trusted = {t.lower() for t in trusted_ids}
    own = own_id.lower() if own_id else None
    if not trusted and own is None:
        return []
    block: list[AuthResults] = []
    seen = received = 0
    for name, value in headers:
        lowered = name.lower()
        if lowered == "received":
            if block:
                break
            received += 1
            continue
        if lowered != FIELD:
            continue
        seen += 1
        if seen > _MAX_FIELDS:
            break
        parsed = parse_auth_results(value)
        if parsed is not None and (parsed.authserv_id in trusted
                                   or (parsed.authserv_id == own and received <= 1)):
            block.append(parsed)
    return block
