"""Outgoing messages as MIME, built with the standard library (``email.message.EmailMessage``).

Structure (RFC 2046): the text and HTML bodies are ``multipart/alternative``; inline parts with a
``content_id`` go with the HTML body in ``multipart/related`` (RFC 2387) so ``cid:`` URLs resolve
(RFC 2392); attachments make the whole ``multipart/mixed``. The generator is ``policy.SMTP``:
CRLF line ends, folded headers, RFC 2047 words for non-ASCII text, RFC 2231 filenames. Every text
that goes into a header passes ``shared.header_text.inert`` first: the subject, names
and filenames of a reply or forward come from a stranger's mail.

Threading (RFC 5322 section 3.6.4): a reply or forward carries ``In-Reply-To: <parent>`` and
``References:`` the parent's References (or its In-Reply-To when it has none) followed by the
parent's Message-ID, trimmed to :data:`MAX_REFERENCES` ids, keeping the first (the thread's root)
and the latest. These are RFC msg-ids read from the stored message, never our own ``msg_`` ids.
Subjects gain ``Re:`` or ``Fwd:`` once: not when they already start with one (in the languages
``shared.mail.threading`` knows).

The Message-ID is a new ULID at the sender's domain (A-label), so it is unique, carries nothing
internal, and stays the same for every delivery attempt (the relay's dedupe key).

Pure: no I/O. Called by ``shared.outbound.send``.
"""

from __future__ import annotations

import base64
import binascii
import email
import html
import re
from datetime import UTC, datetime
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Literal

import msgspec
from ulid import ULID

from shared.errors import invalid
from shared.mail.records import MessageRecord
from shared.outbound.addresses import Mailbox, domain_of
from shared.header_text import inert, plain_text
from shared.outbound.model import Attachment

__all__ = ["MAX_REFERENCES", "QUOTE_CHARS", "MAX_LINE_OCTETS", "MAX_ATTACHED_DEPTH", "MAX_ATTACHED_CONTAINERS", "OutgoingPart", "Draft", "Composed",
           "parts_of", "compose", "reply_subject", "forward_subject", "references_for",
           "quoted_reply", "forwarded_text"]

#: Most msg-ids written in References: the root and the newest ones (RFC 5322 section 3.6.4
#: allows trimming; long chains only cost every later message bytes).
MAX_REFERENCES = 20
#: Characters of the parent's text quoted under a reply; a longer text is cut with ``…``.
QUOTE_CHARS = 20_000

# RFC 6838 section 4.2 type and subtype names.
_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,63}"
_MIME_TYPE = re.compile(rf"^{_NAME}/{_NAME}$")
_REPLY_PREFIX = re.compile(r"^\s*(?:\[[^\[\]]*\]\s*)*(?:re|aw|sv)(?:\s*(?:\[\d+\]|\^\d+))?\s*:",
                           re.IGNORECASE)
_FORWARD_PREFIX = re.compile(r"^\s*(?:\[[^\[\]]*\]\s*)*(?:fwd?|wg|vs)(?:\s*(?:\[\d+\]|\^\d+))?\s*:",
                             re.IGNORECASE)


class OutgoingPart(msgspec.Struct, frozen=True, kw_only=True):
    """A decoded attachment or inline part; ``content_id`` without angle brackets."""

    filename: str | None
    content_type: str
    content: bytes
    disposition: Literal["attachment", "inline"] = "attachment"
    content_id: str | None = None


class Draft(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a message is made of, checked. ``references`` and ``in_reply_to`` are msg-ids
    without angle brackets; ``headers`` come from ``shared.outbound.headers``;
    ``auto_submitted`` is the RFC 3834 section 5 keyword (``auto-replied``) or None."""

    sender: Mailbox
    to: list[Mailbox]
    cc: list[Mailbox] = []
    subject: str
    text: str | None = None
    html: str | None = None
    parts: list[OutgoingPart] = []
    headers: list[tuple[str, str]] = []
    in_reply_to: str | None = None
    references: list[str] = []
    auto_submitted: str | None = None


class Composed(msgspec.Struct, frozen=True, kw_only=True):
    """The message's bytes (CRLF) and its Message-ID without angle brackets."""

    raw: bytes
    message_id: str


def parts_of(attachments: list[Attachment]) -> list[OutgoingPart]:
    """Decode the send tools' ``attachments``.

    Raises:
        PylotaError: ``invalid_request`` at ``attachments[i].…`` for content that is not
            base64, a content type that is not ``type/subtype``, or a name or content id with
            control characters.
    """
    parts = []
    for i, item in enumerate(attachments):
        path = f"attachments[{i}]"
        try:
            content = base64.b64decode(item.content_base64, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise invalid(f"{path}.content_base64", "The content is not base64.",
                          "Encode the file's bytes as standard base64 (RFC 4648 section 4)."
                          ) from exc
        if not _MIME_TYPE.fullmatch(item.content_type):
            raise invalid(f"{path}.content_type", f"{item.content_type!r} is not a MIME type.",
                          "Pass type/subtype, such as application/pdf or image/png.")
        _check_kind(path, item.content_type.lower(), content)
        cid = item.content_id
        if cid is not None:
            cid = plain_text(f"{path}.content_id", cid).strip().strip("<>").strip() or None
            if cid is not None and any(ch.isspace() or ch in "<>" for ch in cid):
                raise invalid(f"{path}.content_id", "A content id cannot hold spaces or <>.",
                              "Use a content id such as logo@example.com (RFC 2392).")
        parts.append(OutgoingPart(filename=plain_text(f"{path}.filename", item.filename) or None,
                                  content_type=item.content_type.lower(), content=content,
                                  disposition=item.disposition, content_id=cid))
    return parts


#: Longest line of an attached message, CRLF excluded (RFC 5322 section 2.1.1): it is sent as
#: it is, never base64 (RFC 2046 section 5.2.1), and a relay refuses longer ones.
MAX_LINE_OCTETS = 998
#: Levels of parts an attached email may nest. Composing one 400 levels deep ran Python's email
#: generator out of stack: a 500, marked retryable (found by an attack). Ingest reads at most 32
#: attached messages of a message too (``shared.mail.budget``).
MAX_ATTACHED_DEPTH = 32
#: Multipart and message parts an attached email may declare in all (a digest of forwarded
#: mail has one a message).
MAX_ATTACHED_CONTAINERS = 256
_CONTAINER = re.compile(rb"(?im)^content-type:[ \t]*(?:multipart|message)/")
#: A header field's name and colon (RFC 5322 section 3.6.8), which a message starts with.
_FIELD_START = re.compile(rb"[\x21-\x39\x3b-\x7e]+[ \t]*:")


def _check_kind(path: str, content_type: str, content: bytes) -> None:
    """Refuse an attachment that cannot be sent as its type says (found by an attack: a
    ``message/delivery-status`` part failed the composer, a ``multipart/mixed`` one went out
    without a boundary, a ``message/rfc822`` one of PDF bytes went out raw).

    Raises:
        PylotaError: ``invalid_request`` at ``{path}.content_type`` or ``{path}.content_base64``.
    """
    maintype = content_type.split("/", 1)[0]
    if maintype == "multipart":
        raise invalid(f"{path}.content_type",
                      f"{content_type} is a container of parts, not one attachment.",
                      "Send each file as an attachment of its own, with its own type such as "
                      "application/pdf.")
    if maintype == "message" and content_type != "message/rfc822":
        raise invalid(f"{path}.content_type", f"{content_type} cannot be attached here.",
                      "Attach an email as message/rfc822, and anything else as text/plain or "
                      "application/octet-stream.")
    if content_type != "message/rfc822":
        return
    problem = _not_an_email(content)
    if problem is not None:
        raise invalid(f"{path}.content_base64", problem,
                      "Attach the email's RFC 5322 bytes, or send the file as "
                      "application/octet-stream.")


def _not_an_email(content: bytes) -> str | None:
    """Why ``content`` cannot go out as a ``message/rfc822`` part (which is attached as it is,
    never encoded: RFC 2046 section 5.2.1), or None when it can."""
    if not _FIELD_START.match(content):
        return ("The message/rfc822 content does not start with a header field, so it is not an "
                "email.")
    if b"\0" in content:
        return "The message/rfc822 content holds NUL bytes, which mail cannot carry."
    for number, line in enumerate(content.split(b"\n"), 1):
        if len(line.removesuffix(b"\r")) > MAX_LINE_OCTETS:
            return (f"Line {number} of the attached email is longer than {MAX_LINE_OCTETS} "
                    "octets (RFC 5322 section 2.1.1); an email is attached as it is, so no "
                    "relay would take it.")
    if len(_CONTAINER.findall(content)) > MAX_ATTACHED_CONTAINERS:
        # counted on the bytes, before parsing: 10,000 unclosed multiparts (0.5 MB) took the
        # parser 6 s, and 1,000 nested ones ran it out of stack (found by an attack)
        return (f"The attached email declares more than {MAX_ATTACHED_CONTAINERS} multipart or "
                "message parts.")
    try:
        deep = _depth(email.message_from_bytes(content, policy=policy.default))
    except RecursionError:
        deep = MAX_ATTACHED_DEPTH + 1
    if deep > MAX_ATTACHED_DEPTH:
        return (f"The attached email nests parts more than {MAX_ATTACHED_DEPTH} levels deep "
                "(multipart and message/rfc822 parts inside each other).")
    return None


def _depth(message: email.message.Message) -> int:
    """How many levels of parts ``message`` nests (1: no parts), counted without recursion,
    and no further than one level past :data:`MAX_ATTACHED_DEPTH`."""
    deepest, stack = 0, [(message, 1)]
    while stack and deepest <= MAX_ATTACHED_DEPTH:
        part, depth = stack.pop()
        deepest = max(deepest, depth)
        payload = part.get_payload()
        if isinstance(payload, list):
            stack += [(child, depth + 1) for child in payload]
    return deepest


def _address(box: Mailbox) -> Address:
    local, _, domain = box.address.rpartition("@")
    return Address(display_name=inert(box.name or ""), username=local, domain=domain)


def _attach(target: EmailMessage, part: OutgoingPart, *, related: bool = False) -> None:
    maintype, subtype = part.content_type.split("/", 1)
    options: dict[str, object] = {"disposition": part.disposition}
    if part.filename:
        options["filename"] = inert(part.filename)
    if part.content_id:
        options["cid"] = f"<{inert(part.content_id)}>"
    if part.content_type == "message/rfc822" and _not_an_email(part.content) is None:
        # An attached message is a message, not bytes (RFC 2046 section 5.2.1 forbids base64).
        inner = email.message_from_bytes(part.content, policy=policy.default)
        target.add_attachment(inner, **options)  # type: ignore[arg-type]
    elif maintype in ("message", "multipart"):
        # A forwarded part of another message type (a bounce's message/delivery-status, which
        # the composer cannot carry as bytes), or a forwarded message/rfc822 part that is no
        # email as it stands, goes as the bytes it is (parts_of refuses these from a caller).
        target.add_attachment(part.content, "application", "octet-stream",
                              **options)  # type: ignore[arg-type]
    elif related:
        target.add_related(part.content, maintype, subtype, **options)  # type: ignore[arg-type]
    else:
        target.add_attachment(part.content, maintype, subtype, **options)  # type: ignore[arg-type]


def compose(draft: Draft, *, now: datetime | None = None) -> Composed:
    """Build the message: headers, bodies, parts.

    ``now`` is the Date (default: the current time, UTC). At least one of ``draft.text`` and
    ``draft.html`` must be set (the caller checked it).
    """
    message_id = f"{ULID()}@{domain_of(draft.sender.address)}"
    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = _address(draft.sender)
    msg["To"] = [_address(b) for b in draft.to]
    if draft.cc:
        msg["Cc"] = [_address(b) for b in draft.cc]
    msg["Subject"] = inert(draft.subject)
    msg["Date"] = format_datetime(now or datetime.now(UTC))
    msg["Message-ID"] = f"<{message_id}>"
    if draft.in_reply_to:
        msg["In-Reply-To"] = f"<{draft.in_reply_to}>"
    if draft.references:
        msg["References"] = " ".join(f"<{r}>" for r in draft.references)
    if draft.auto_submitted:
        msg["Auto-Submitted"] = draft.auto_submitted
    for name, value in draft.headers:
        msg[name] = inert(value)
    if draft.text is not None:
        msg.set_content(draft.text)
        if draft.html is not None:
            msg.add_alternative(draft.html, subtype="html")
    else:
        assert draft.html is not None, "the caller checks that text or html is set"
        msg.set_content(draft.html, subtype="html")
    inline = [p for p in draft.parts if p.disposition == "inline" and p.content_id
              and draft.html is not None and p.content_type != "message/rfc822"]
    if inline:
        body = msg.get_body(preferencelist=("html",))
        assert isinstance(body, EmailMessage)
        for part in inline:
            _attach(body, part, related=True)
    for part in draft.parts:
        if part not in inline:
            _attach(msg, part)
    return Composed(raw=msg.as_bytes(), message_id=message_id)


def reply_subject(subject: str) -> str:
    """``Re: subject``, unless it already starts with a reply prefix."""
    return subject if _REPLY_PREFIX.match(subject) else f"Re: {subject}".strip()


def forward_subject(subject: str) -> str:
    """``Fwd: subject``, unless it already starts with a forward prefix."""
    return subject if _FORWARD_PREFIX.match(subject) else f"Fwd: {subject}".strip()


#: A msg-id's inside that a header can carry as it is (RFC 5322 section 3.6.4: printable ASCII
#: without angle brackets). A received id outside it (a NUL, a non-ASCII byte read as U+FFFD)
#: was written as an encoded word that no reader threads by (found by an attack): it is left out.
_WRITABLE_ID = re.compile(r"[!-;=?-~]+")


def references_for(parent: MessageRecord) -> tuple[str | None, list[str]]:
    """``(In-Reply-To, References)`` of a reply to or forward of ``parent``: ids a header can
    carry only (:data:`_WRITABLE_ID`), at most :data:`MAX_REFERENCES`."""
    chain = list(parent.references) or list(parent.in_reply_to[:1])
    if parent.message_id:
        chain.append(parent.message_id)
    chain = [i for i in dict.fromkeys(chain) if _WRITABLE_ID.fullmatch(i)]
    if len(chain) > MAX_REFERENCES:
        chain = chain[:1] + chain[-(MAX_REFERENCES - 1):]
    replied = parent.message_id if parent.message_id and _WRITABLE_ID.fullmatch(
        parent.message_id) else None
    return replied, chain


def _who(parent: MessageRecord) -> str:
    if parent.from_ is None:
        return "someone"
    return f"{parent.from_.name} <{parent.from_.address}>" if parent.from_.name \
        else parent.from_.address


def _parent_text(parent: MessageRecord) -> str:
    text = (parent.text if parent.text is not None else parent.new_text).rstrip()
    return text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS - 1] + "…"


def _attribution(parent: MessageRecord) -> str:
    return f"On {parent.date.astimezone(UTC):%a, %d %b %Y at %H:%M} UTC, {_who(parent)} wrote:"


def quoted_reply(body: str | None, parent: MessageRecord, *, as_html: bool) -> str | None:
    """``body`` followed by the parent's text quoted (``>`` lines, or a ``blockquote`` in
    HTML), as mail clients write replies; None when ``body`` is None."""
    if body is None:
        return None
    quoted = _parent_text(parent)
    if as_html:
        inner = html.escape(quoted).replace("\n", "<br>\n")
        return (f"{body}\n<div>{html.escape(_attribution(parent))}</div>\n"
                f'<blockquote type="cite">{inner}</blockquote>\n')
    lines = "\n".join(f"> {line}" if line else ">" for line in quoted.split("\n"))
    return f"{body.rstrip()}\n\n{_attribution(parent)}\n{lines}\n"


def _forward_block(parent: MessageRecord) -> list[tuple[str, str]]:
    rows = [("From", _who(parent)), ("Date", format_datetime(parent.date.astimezone(UTC))),
            ("Subject", parent.subject)]
    if parent.to:
        rows.append(("To", ", ".join(a.address for a in parent.to)))
    if parent.cc:
        rows.append(("Cc", ", ".join(a.address for a in parent.cc)))
    return rows


def forwarded_text(note: str | None, parent: MessageRecord) -> str:
    """The text of a forward: the note, then the original's header block and its whole text."""
    block = "\n".join(f"{name}: {value}" for name, value in _forward_block(parent))
    original = parent.text if parent.text is not None else parent.new_text
    head = f"{note.rstrip()}\n\n" if note and note.strip() else ""
    return f"{head}---------- Forwarded message ----------\n{block}\n\n{original.rstrip()}\n"

