"""Opaque cursors: a small JSON object, base64url-encoded, so clients never build them."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, UnsetType

from shared.errors import invalid

__all__ = ["encode_cursor", "decode_cursor"]


def encode_cursor(state: dict[str, Any]) -> str:
    """Encode ``state`` as an opaque cursor string."""
    return base64.urlsafe_b64encode(msgspec.json.encode(state)).decode().rstrip("=")


#: Largest offset a cursor may carry; far past any real paging, small enough for SQL.
MAX_OFFSET = 1_000_000
_EARLIEST = datetime(1970, 1, 1, tzinfo=timezone.utc)
_SKEW = timedelta(days=1)


class _State(msgspec.Struct, forbid_unknown_fields=True):
    """Every field a cursor of ours may hold, with its type: a cursor a client edited fails here
    rather than deep in a query. ``k`` is the listing, ``o`` an offset, ``a`` the ``as_of``
    instant, ``after`` the last id of a page, ``f`` a query fingerprint, ``q`` the query text."""

    k: str
    o: Annotated[int, msgspec.Meta(ge=0, le=MAX_OFFSET)] | UnsetType = UNSET
    a: datetime | UnsetType = UNSET
    after: Annotated[str, msgspec.Meta(max_length=64)] | UnsetType = UNSET
    f: Annotated[str, msgspec.Meta(max_length=64)] | UnsetType = UNSET
    q: str | UnsetType = UNSET

    def __post_init__(self) -> None:
        # What the types cannot say and PostgreSQL would refuse mid-query: an instant outside
        # years 1-9999 once in UTC (0001-01-01T00:00:00+14:00), and a NUL in a text.
        if self.a is not UNSET:
            if self.a.tzinfo is None:
                raise ValueError("as_of without a zone")  # ours always carry one
            try:
                instant = self.a.astimezone(timezone.utc)
            except OverflowError:
                raise ValueError("as_of out of range") from None
            # The instant a listing's first page was read: never in the future (a day of clock
            # skew between fronts aside). 9999-12-31 overflowed PostgreSQL's arithmetic on it,
            # an internal error on every retry (found by an attack).
            if not _EARLIEST <= instant <= datetime.now(timezone.utc) + _SKEW:
                raise ValueError("as_of out of range")
        if any(isinstance(text, str) and "\x00" in text for text in (self.k, self.after, self.f,
                                                                       self.q)):
            raise ValueError("NUL in a cursor")


#: The fields each listing's cursors always carry: one without them was not made by us.
_REQUIRED = {"thr": ("o",), "threads": ("a", "after", "f"), "search": ("o", "a", "f"),
             "idn": ("after",), "contacts": ("o", "q")}


def decode_cursor(cursor: str, kind: str) -> dict[str, Any]:
    """Decode a cursor made by :func:`encode_cursor` for the same ``kind`` of listing
    (``thr``, ``threads``, ``search``, ``idn`` or ``contacts``).

    Returns the state as it was encoded (``a`` an ISO 8601 string in ``datetime.isoformat``'s
    form), with every field of :data:`_REQUIRED` for ``kind`` present.

    Raises:
        PylotaError: ``invalid_request`` (path ``cursor``) for anything else, edited cursors
            included.
    """
    try:
        state = msgspec.json.decode(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        checked = msgspec.convert(state, _State)
    except (binascii.Error, msgspec.DecodeError, msgspec.ValidationError, ValueError):
        checked = None
    if checked is None or checked.k != kind or any(
            getattr(checked, name) is UNSET for name in _REQUIRED[kind]):
        raise invalid("cursor", "This cursor is not one this listing returned.",
                      "Pass next_cursor from the previous result unchanged, or omit cursor.")
    if checked.a is not UNSET:
        # as msgspec read it: "2020-01-01t00:00:00z" passes msgspec but not fromisoformat
        state["a"] = checked.a.isoformat()
    return state
