"""Parsed mail, as ``parse`` produces it and ``store`` consumes it."""

from __future__ import annotations

from datetime import datetime

import msgspec

__all__ = ["Address", "ParsedAttachment", "ParsedMessage"]


class Address(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One RFC 5322 mailbox: ``address`` is the addr-spec (lower-cased), ``name`` the display name."""

    address: str
    name: str | None = None


class ParsedAttachment(msgspec.Struct, frozen=True, kw_only=True):
    """A MIME leaf part that is an attachment (has a filename or ``Content-Disposition: attachment``).

    ``content`` is the decoded payload, byte-exact (RFC 2045 section 6).
    """

    part_index: int
    filename: str | None
    content_type: str
    disposition: str | None
    content_id: str | None
    content: bytes


class ParsedMessage(msgspec.Struct, frozen=True, kw_only=True):
    """What ``parse.parse_message`` extracts from one raw message.

    Ids (``message_id``, ``in_reply_to``, ``references``) are msg-ids without angle brackets
    (RFC 5322 section 3.6.4); values that are not msg-ids are dropped and recorded in ``defects``.
    ``sent_at`` is the Date header in UTC, or None when absent, unparseable or absurd (before 1990,
    or more than a day after receipt; the received time stands for it). ``text`` is the readable
    body: the text/plain part, else (or when that part only points at the HTML) the text/html part
    rendered to plain text.
    """

    message_id: str | None
    in_reply_to: list[str]
    references: list[str]
    subject: str
    from_: Address | None
    to: list[Address]
    cc: list[Address]
    reply_to: list[Address]
    sent_at: datetime | None
    text: str
    headers: list[tuple[str, str]]
    attachments: list[ParsedAttachment]
    defects: list[str]
