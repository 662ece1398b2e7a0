"""The extra header fields a send may carry (spec section 4.3, ``mail_send`` ``headers``).

Allowed: ``X-`` fields whose name matches ``^X-[A-Za-z0-9_-]+$``, and Importance, Priority,
Sensitivity (each with its enum of values, RFC 2156 section 5.3), Keywords, Comments and
Organization (RFC 5322 section 3.6.5, RFC 2076 section 3.6). Names match case-insensitively;
anything else, including every field the composer writes itself (From, To, Message-ID, …), is
``header_not_allowed``. A value can never hold a line break, raw or encoded
(``shared.header_text``), so it can never start another field.

Pure: no I/O. Called by ``shared.outbound.send``.
"""

from __future__ import annotations

import re

from shared.errors import ErrorCode, PylotaError, invalid
from shared.header_text import plain_text
from shared.outbound.model import HEADER_VALUES

__all__ = ["NAMED", "MAX_HEADERS", "MAX_HEADER_VALUE_CHARS", "extra_headers"]

_X_NAME = re.compile(r"^X-[A-Za-z0-9_-]+$", re.IGNORECASE)

#: Headers one send may add, and characters of one value (RFC 5322's line limit): 100,000
#: X- headers took 10-12 s of the front's CPU per call (found by an attack).
MAX_HEADERS = 50
MAX_HEADER_VALUE_CHARS = 998
#: Characters of an X- header's name: a name is never folded, and one of 10,000 made a line
#: ten times RFC 5322's 998 (found by an attack).
MAX_HEADER_NAME_CHARS = 76

#: The allowed fields besides X-: lower-case name -> (written name, allowed values or None).
NAMED: dict[str, tuple[str, frozenset[str] | None]] = {
    **{name.lower(): (name, frozenset(values)) for name, values in HEADER_VALUES.items()},
    "keywords": ("Keywords", None),
    "comments": ("Comments", None),
    "organization": ("Organization", None),
}


def extra_headers(headers: dict[str, str]) -> list[tuple[str, str]]:
    """The ``(name, value)`` fields to add, in the order given.

    Raises:
        PylotaError: ``header_not_allowed`` (``details.header``, and ``details.path``
            ``headers.NAME`` as for every argument error) for a name off the allowlist or
            given twice in different cases; ``invalid_request`` at ``headers.NAME`` for a value
            outside its enum or holding a control character.
    """
    if len(headers) > MAX_HEADERS:
        raise invalid("headers", f"headers has {len(headers)} fields; at most {MAX_HEADERS}.",
                      f"Send at most {MAX_HEADERS} headers; put data of your own in metadata.")
    fields: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, value in headers.items():
        if len(value) > MAX_HEADER_VALUE_CHARS:
            raise invalid(f"headers.{name[:80]}", f"The value has {len(value)} characters.",
                          f"Keep a header's value to {MAX_HEADER_VALUE_CHARS} characters.")
        key = name.lower()
        if key in NAMED:
            written, allowed = NAMED[key]
        elif _X_NAME.fullmatch(name) and len(name) <= MAX_HEADER_NAME_CHARS:
            written, allowed = name, None
        else:
            raise PylotaError(
                ErrorCode.HEADER_NOT_ALLOWED, f"The header {name[:80]!r} cannot be set.",
                fix="Use X- headers (X-Name, letters, digits, _ and -, at most 76 characters) or "
                    "Importance, Priority, "
                    "Sensitivity, Keywords, Comments, Organization.",
                details={"header": name[:80], "path": f"headers.{name[:80]}"})
        if key in seen:
            raise PylotaError(ErrorCode.HEADER_NOT_ALLOWED,
                              f"The header {name[:80]!r} is given twice.",
                              fix="Give each header once (names are case-insensitive).",
                              details={"header": name[:80], "path": f"headers.{name[:80]}"})
        seen.add(key)
        plain_text(f"headers.{name}", value)
        if allowed is not None and value not in allowed:
            raise invalid(f"headers.{name}", f"{written} must be one of {', '.join(sorted(allowed))}.",
                          f"Set {written} to one of: {', '.join(sorted(allowed))}.")
        fields.append((written, value))
    return fields
