"""Output budgets of spec section 4.2 and DESIGN.md section 5.4.

A cut string ends with "…" and its holder gains ``<field>_truncated: true``, as does a list cut to
its first items; a result still over :data:`RESULT_BYTES` loses list items from the end. Any cut
sets ``truncated: true``.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["RESULT_BYTES", "cut", "drop_to_fit"]

#: Largest result, as compact UTF-8 JSON (96 KB).
RESULT_BYTES = 96 * 1024


def cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` characters (the last one "…"), and whether it was cut."""
    if len(text) <= limit:
        return text, False
    return text[: limit - 1] + "…", True


def drop_to_fit(result: Any, items: list[Any], limit: int = RESULT_BYTES) -> int:
    """Remove items from the end of ``items`` (a list inside ``result``) until ``result`` encodes
    within ``limit`` bytes, keeping the first: a page always moves its cursor on, and each tool
    makes one item fit by itself. Returns how many were dropped."""
    dropped = 0
    while len(items) > 1 and len(msgspec.json.encode(result)) > limit:
        items.pop()
        dropped += 1
    return dropped
