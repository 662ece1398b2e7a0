"""Prefixed ULID identifiers (DESIGN.md section 4).

An id is ``prefix_`` plus a ULID's 26 upper-case Crockford base32 characters, the shape every
tool schema matches with ``^<prefix>_[0-9A-HJKMNP-TV-Z]{26}$``.
"""

from __future__ import annotations

import re
from enum import StrEnum

from ulid import ULID

__all__ = ["Prefix", "new_id", "is_id"]


class Prefix(StrEnum):
    """The id prefixes of DESIGN.md section 4."""

    TENANT = "ten"
    PARTNER = "par"
    IDENTITY = "idn"
    THREAD = "thr"
    MESSAGE = "msg"
    ATTACHMENT = "att"
    KEY = "key"
    REQUEST = "req"


_ULID_BODY = "[0-9A-HJKMNP-TV-Z]{26}"


def new_id(prefix: Prefix) -> str:
    """Return a new time-ordered id such as ``msg_01J9Z3…``."""
    return f"{prefix.value}_{ULID()}"


def is_id(value: str, prefix: Prefix) -> bool:
    """True when ``value`` has the shape of an id with ``prefix``."""
    return re.fullmatch(f"{prefix.value}_{_ULID_BODY}", value) is not None
