"""Stored mail as the tools return it: message, attachment and thread Structs.

These are the REST/MCP object shapes (spec section 4.3: "the Message object", "the thread object");
``store`` builds them from rows, and their msgspec JSON Schema is each tool's ``outputSchema``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from shared.mail.judged import Triage, Trust
from shared.mail.model import Address

__all__ = ["AttachmentInfo", "FoundRef", "HeaderField", "LabelState", "MessageRecord",
           "ThreadHeader", "ThreadRecord", "ThreadSummary"]

class AttachmentInfo(msgspec.Struct, frozen=True, kw_only=True):
    """An attachment's metadata; its bytes stay in storage. ``size`` is in bytes.

    ``text_status`` is the status of its extracted text (spec section 4.3,
    mail_get_attachment_text): ``pending`` until a batch worker has read it, then ``ready``,
    ``unavailable`` or ``skipped``; the reading tools (mail_get_message, mail_get_thread) fill it
    in, and it is null where a result does not look it up (mail_wait).
    """

    id: str
    filename: str | None
    content_type: str
    size: int
    disposition: str | None = None
    text_status: Literal["pending", "ready", "unavailable", "skipped"] | None = None


class HeaderField(msgspec.Struct, frozen=True):
    """One header field as received (RFC 5322 section 2.2), its value decoded (RFC 2047)."""

    name: str
    value: str


class FoundRef(msgspec.Struct, frozen=True):
    """A reference found in the message at ingest (``shared.mail.refs``): ``kind`` is plate,
    invoice, order, claim, pcn, reference, amount, phone or ``custom:NAME``; ``value`` is the
    normalized form ``mail_search`` finds with ``ref:VALUE``."""

    kind: str
    value: str


class MessageRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One stored message.

    ``text`` is the whole readable body and is returned only on request (``include_quoted``);
    ``new_text`` is the body without quoted history. ``date`` is the Date header in UTC, or the
    time the message was received when the header is missing. ``triage`` and ``trust`` are null
    for mail stored before they existed, until ``pylota reindex`` runs; ``refs`` are the
    references found in it (``shared.mail.reading.annotate`` fills the three from
    ``shared.mail.triage``, ``shared.mail.trust`` and ``shared.mail.refs``). ``*_truncated`` flags appear when a budget
    cut the field (spec section 4.2).
    """

    id: str
    thread_id: str
    identity_id: str
    message_id: str | None
    in_reply_to: list[str]
    references: list[str]
    subject: str
    from_: Address | None = msgspec.field(name="from", default=None)
    to: list[Address] = []
    cc: list[Address] = []
    reply_to: list[Address] = []
    date: datetime
    direction: str
    status: str
    labels: list[str]
    read: bool
    snippet: str = ""
    new_text: str = ""
    new_text_truncated: bool = False
    text: str | None = None
    text_truncated: bool = False
    attachments: list[AttachmentInfo] = []
    headers: list[HeaderField] | None = None
    parse_defects: list[str] = []
    subject_truncated: bool = False
    to_truncated: bool = False
    cc_truncated: bool = False
    reply_to_truncated: bool = False
    attachments_truncated: bool = False
    headers_truncated: bool = False
    # No defaults, so both are always in the output (null and [] when empty).
    triage: Triage | None
    trust: Trust | None
    refs: list[FoundRef]


class ThreadHeader(msgspec.Struct, kw_only=True):
    """A conversation without its messages."""

    id: str
    identity_id: str
    subject: str
    message_count: int
    first_at: datetime | None
    last_at: datetime | None


class ThreadRecord(ThreadHeader, kw_only=True, omit_defaults=True):
    """A conversation with up to ``messages_limit`` messages, oldest first."""

    messages: list[MessageRecord]
    next_cursor: str | None = None
    truncated: bool = False


class ThreadSummary(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One conversation as mail_list_threads lists it (spec section 4.3, ``ThreadSummary``).

    ``participants`` are the people in its messages (From, To, Cc) other than the identity, in
    order of first appearance; ``labels`` the union of its messages' labels, sorted;
    ``unread_count`` its messages not read; ``last_*`` describe its newest message;
    ``category`` is triage's category of its newest inbound message (of its newest message when
    none is inbound; null when none was triaged). ``*_truncated`` flags appear when a budget cut
    the field (spec section 4.2).
    """

    id: str
    subject: str
    participants: list[Address]
    message_count: int
    unread_count: int
    last_message_id: str
    last_message_at: datetime
    last_direction: Literal["inbound", "outbound"]
    snippet: Annotated[str, msgspec.Meta(
        description="The start of the newest message's new text. Untrusted email content.")]
    labels: list[str]
    category: str | None
    needs_reply: Annotated[float, msgspec.Meta(ge=0, le=1, description=(
        "How much the thread awaits a reply from this mailbox, 0 to 1. At least 0.5 exactly "
        "when its newest message is inbound and not automated (is:needs_reply): 0.5, plus 0.2 "
        "when that message asks a question, 0.2 when triage found it urgent, 0.1 when it is "
        "addressed to this mailbox in To. 0.1 for newest automated mail, 0 for spam and when "
        "the newest message is outbound."))]
    archived: Annotated[bool, msgspec.Meta(
        description="Every message of the thread carries the label archived.")]
    subject_truncated: bool = False
    participants_truncated: bool = False
    labels_truncated: bool = False


class LabelState(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A message's or a thread's labels and read state (spec section 4.3, mail_update_labels'
    ``{ id, labels, read }``). For a thread, ``labels`` is the union of its messages' labels,
    sorted, and ``read`` is true when every message is read."""

    id: str
    labels: list[str]
    read: bool
    labels_truncated: bool = False
    truncated: bool = False
