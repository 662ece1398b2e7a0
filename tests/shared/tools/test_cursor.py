"""Opaque cursors: what we encode decodes; anything edited is invalid_request on ``cursor``."""

from __future__ import annotations

import base64

import msgspec
import pytest

from shared.errors import ErrorCode, PylotaError
from shared.tools.cursor import MAX_OFFSET, decode_cursor, encode_cursor


def forged(state: object) -> str:
    return base64.urlsafe_b64encode(msgspec.json.encode(state)).decode()


def test_round_trip():
    state = {"k": "search", "o": 10, "a": "2026-11-30T12:00:00+00:00", "f": "abc"}
    assert decode_cursor(encode_cursor(state), "search") == state


@pytest.mark.parametrize("cursor", [
    "not base64 at all!", forged([1, 2]), forged({"k": "thr", "o": 1}),
    forged({"k": "search", "o": -5}), forged({"k": "search", "o": MAX_OFFSET + 1}),
    forged({"k": "search", "o": 2 ** 63}), forged({"k": "search", "o": "x"}),
    forged({"k": "search", "a": "garbage"}), forged({"k": "search", "a": None}),
    forged({"k": "search", "extra": 1}),
    # instants outside years 1-9999 once in UTC, and NULs, which PostgreSQL refuses mid-query
    forged({"k": "search", "a": "0001-01-01T00:00:00+14:00"}),
    forged({"k": "search", "a": "9999-12-31T23:59:59-14:00"}),
    forged({"k": "search", "after": "\u0000"}), forged({"k": "search", "f": "a\u0000"}),
])
def test_anything_else_is_invalid_request_on_cursor(cursor):
    with pytest.raises(PylotaError) as raised:
        decode_cursor(cursor, "search")
    assert raised.value.code is ErrorCode.INVALID_REQUEST
    assert raised.value.details == {"path": "cursor"}


#: A cursor of each listing as the tools encode it.
MADE = {"thr": {"k": "thr", "o": 5},
        "threads": {"k": "threads", "a": "2026-11-30T12:00:00+00:00", "after": "thr_1", "f": "x"},
        "search": {"k": "search", "o": 10, "a": "2026-11-30T12:00:00+00:00", "f": "abc"},
        "idn": {"k": "idn", "after": "idn_1"},
        "contacts": {"k": "contacts", "q": "jo", "o": 20}}


@pytest.mark.parametrize("kind,field", [(kind, field) for kind, state in MADE.items()
                                        for field in state if field != "k"])
def test_a_cursor_without_a_field_of_its_listing_is_invalid_request(kind, field):
    # these reached the tools and failed there as internal (KeyError) until the attack report
    assert decode_cursor(encode_cursor(MADE[kind]), kind) == MADE[kind]
    state = {name: value for name, value in MADE[kind].items() if name != field}
    with pytest.raises(PylotaError) as raised:
        decode_cursor(forged(state), kind)
    assert raised.value.code is ErrorCode.INVALID_REQUEST
    assert raised.value.details == {"path": "cursor"}


def test_an_instant_without_a_zone_is_invalid_request():
    state = {**MADE["search"], "a": "2026-12-03T10:16:40"}
    with pytest.raises(PylotaError) as raised:
        decode_cursor(forged(state), "search")
    assert raised.value.details == {"path": "cursor"}


@pytest.mark.parametrize("written", ["2020-01-01t00:00:00z", "2020-01-01T00:00:00z",
                                     "2020-01-01T00:00:00.123456789+00:00"])
def test_an_instant_msgspec_reads_comes_back_in_a_form_the_tools_read(written):
    # the tools parse it with datetime.fromisoformat, which refused these: a 500 over REST
    # (found by a second attack)
    from datetime import datetime

    state = decode_cursor(forged({**MADE["search"], "a": written}), "search")
    assert datetime.fromisoformat(state["a"]).year == 2020


@pytest.mark.parametrize("instant", ["9999-12-31T23:59:59.999999+00:00",
                                     "1969-12-31T23:59:59+00:00", "2999-01-01T00:00:00+00:00"])
def test_an_instant_no_first_page_was_read_at_is_invalid_request(instant):
    """A cursor's instant is when its first page was read: year 9999 overflowed PostgreSQL's
    arithmetic, a 500 marked retryable on every retry (found by an attack)."""
    for kind in ("search", "threads"):
        with pytest.raises(PylotaError) as raised:
            decode_cursor(forged({**MADE[kind], "a": instant}), kind)
        assert raised.value.details == {"path": "cursor"}
