"""Opaque cursors: a small JSON object, base64url-encoded, so clients never build them."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from shared.errors import invalid

__all__ = ["encode_cursor", "decode_cursor"]


def encode_cursor(state: dict[str, Any]) -> str:
    """Encode ``state`` as an opaque cursor string."""
    return base64.urlsafe_b64encode(msgspec.json.encode(state)).decode().rstrip("=")


def decode_cursor(cursor: str, kind: str) -> dict[str, Any]:
    """Decode a cursor made by :func:`encode_cursor` for the same ``kind`` of listing.

    Raises:
        PylotaError: ``invalid_request`` (path ``cursor``) for anything else.
    """
    try:
        state = msgspec.json.decode(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, msgspec.DecodeError, ValueError):
        state = None
    if not isinstance(state, dict) or state.get("k") != kind:
        raise invalid("cursor", "This cursor is not one this listing returned.",
                      "Pass next_cursor from the previous result unchanged, or omit cursor.")
    return state
