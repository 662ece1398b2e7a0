"""Raw RFC 5322 bytes to a :class:`~shared.mail.model.ParsedMessage`.

First ``budget.apply_budget`` fits the bytes to the parse budget (header bytes and fields,
parameters per MIME field, recipients per address field, MIME parts, nesting depth) and drops
header lines that are not fields, so that hostile mail parses in bounded time and one broken line
costs that line only. The standard library's ``email`` package then reads the MIME structure with
``policy.compat32``, whose part headers are plain strings read by the simple parameter parser
(RFC 2231 continuations and charsets included). The fields a message is read for (From, To, Cc,
Reply-To, Subject, Date, the msg-id fields) are each read on their own with ``policy.default``,
guarded: when its header parser raises or gives text with undecodable bytes in it, the value is
decoded the compat32 way (``email.header.decode_header``, RFC 2047 section 6) with our charset
table, and a defect is recorded. Raw 8-bit header bytes (RFC 6532 or just broken) are read as
UTF-8, else windows-1252. A Date before :data:`EARLIEST_DATE` or more than :data:`MAX_DATE_LEAD`
after receipt is dropped with a defect, so the received time stands for it.

Body text is the first inline text/plain part, else (or when that part is only a
:data:`PLACEHOLDER` such as "View this email in your browser") the first inline text/html part
rendered to plain text by ``htmltext`` (no Markdown; quoted blocks marked with ``>``). Parts are
decoded per their ``charset`` parameter (RFC 2045 section 5.1, RFC 2046 section 4.1.2) through
``CHARSET_ALIASES``, which follows the WHATWG Encoding Standard in reading ISO-8859-1 and US-ASCII
labels as windows-1252, because that is what senders meant.

Attachments are the leaf parts with a filename or ``Content-Disposition: attachment`` (RFC 2183),
plus attached messages (``message/rfc822``); their bytes are the decoded payload, exactly
(base64, quoted-printable and uuencode). The filename is the Content-Disposition ``filename``, else
the Content-Type ``name`` (RFC 2231 decoded by ``email``, RFC 2047 words by us).

``parse_message`` never raises: problems become ``defects`` strings. What it cannot represent
survives in the raw copy the store keeps; NUL characters, which PostgreSQL text cannot hold, become
U+FFFD in decoded text. Pure: no I/O. Called by ``ingest``.
"""

from __future__ import annotations

import binascii
import codecs
import email
import email.errors
import email.header
import email.utils
import functools
import itertools
import quopri
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email import policy
from email.message import Message
from email.parser import BytesParser
from typing import NamedTuple

from shared.mail.budget import MAX_HTML_CHARS, apply_budget
from shared.mail.htmltext import html_to_text
from shared.mail.model import Address, ParsedAttachment, ParsedMessage

__all__ = ["ATTACHED_MESSAGE_TYPES", "CHARSET_ALIASES", "EARLIEST_DATE", "MAX_ADDRESS_CHARS",
           "MAX_DATE_LEAD", "MAX_HEADERS", "MAX_HEADER_CHARS", "MAX_MSG_IDS", "MAX_MSG_ID_CHARS",
           "MAX_NAME_CHARS", "MAX_SUBJECT_CHARS", "PLACEHOLDER", "BARE_CR_DEFECT",
           "bare_cr_in_header", "header_block", "parse_message", "unparsed"]

MAX_HEADERS = 200
MAX_HEADER_CHARS = 2000
#: Longest subject kept; a longer one is cut (with ``…``) and a defect says so. Real subjects are
#: short; a megabyte of "Re: " would only slow every screen and index that shows it.
MAX_SUBJECT_CHARS = 1000
#: Longest display name kept, cut the same way.
MAX_NAME_CHARS = 256
#: Longest addr-spec kept (RFC 5321 section 4.5.3.1: 64 for the local part, 255 for the domain);
#: a longer one is not an address and is dropped with a defect.
MAX_ADDRESS_CHARS = 320
#: Longest msg-id kept; real ones are well under 100 characters, and an index entry must fit a
#: PostgreSQL page.
MAX_MSG_ID_CHARS = 500

# Charset labels seen in real mail mapped to the Python codec that decodes what senders actually
# wrote. None means "label carries no information": try UTF-8, then windows-1252.
CHARSET_ALIASES: dict[str, str | None] = {
    # WHATWG Encoding Standard: these labels are windows-1252.
    "iso-8859-1": "windows-1252",
    "iso8859-1": "windows-1252",
    "iso_8859-1": "windows-1252",
    "latin-1": "windows-1252",
    "latin1": "windows-1252",
    "l1": "windows-1252",
    "us-ascii": "windows-1252",
    "ascii": "windows-1252",
    "ansi_x3.4-1968": "windows-1252",
    # Microsoft's names and supersets.
    "ks_c_5601-1987": "cp949",
    "ks_c_5601": "cp949",
    "euc-kr": "cp949",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "iso-8859-11": "cp874",
    "tis-620": "cp874",
    "windows-874": "cp874",
    "shift_jis": "cp932",
    "x-sjis": "cp932",
    "big5": "big5hkscs",
    # RFC 1556: "-i" (implicit bidi) only says how to display; the bytes are ISO-8859-8.
    "iso-8859-8-i": "iso-8859-8",
    "iso-8859-6-i": "iso-8859-6",
    "x-mac-cyrillic": "mac_cyrillic",
    "x-mac-roman": "mac_roman",
    "macintosh": "mac_roman",
    "x-euc-jp": "euc_jp",
    "unicode-1-1-utf-7": "utf-7",
    "utf8": "utf-8",
    # Placeholders that name no charset.
    "x-unknown": None,
    "unknown": None,
    "unknown-8bit": None,
    "x-unknown-8bit": None,
    "default": None,
    "x-user-defined": None,
    "charset": None,
}

# RFC 5322 section 3.6.4 msg-id: "<" id-left "@" id-right ">".
_MSG_ID = re.compile(r"<\s*([^<>\s@]+@[^<>\s]+?)\s*>")
_ANGLE_TOKEN = re.compile(r"<([^<>]*)>")
_BARE_MSG_ID = re.compile(r"[^<>\s@]+@[^<>\s@]+")
_FOLD = re.compile(r"\r?\n[ \t]*")
_ADDRESS_HEADERS = ("from", "to", "cc", "reply-to")

#: Most msg-ids kept from one In-Reply-To or References field.
MAX_MSG_IDS = 500
#: A Date before this is absurd (issue 11: a Date of year "0102" was stored as the year 102); no
#: mail system older than this wrote the messages we import, and the received time stands for it.
EARLIEST_DATE = datetime(1990, 1, 1, tzinfo=UTC)
#: A Date further than this after receipt is absurd too: clocks drift by minutes, time zones
#: written wrongly by hours, never by more than a day.
MAX_DATE_LEAD = timedelta(days=1)
#: A text/plain part that only points at the HTML part ("View this email in your browser", "See
#: HTML version for full formatting"): short and saying so. The HTML part is read instead.
PLACEHOLDER = re.compile(
    r"(?:view|read|see|open|display)\b.{0,40}\b(?:browser|online|web\s*(?:version|page)|html)"
    r"|html\s+(?:version|format|e-?mail|message)|(?:does\s+not|doesn't|cannot|can't|unable\s+to)"
    r"\s+(?:support|display|show|read|view)\b.{0,30}\bhtml|trouble\s+viewing"
    r"|(?:this|the)\s+(?:e-?mail|message)\s+(?:is|was)\s+(?:sent\s+)?in\s+html",
    re.IGNORECASE | re.DOTALL)
#: Longest text/plain part that can be a placeholder (characters, white space collapsed).
_PLACEHOLDER_CHARS = 400


def parse_message(raw: bytes, *, received_at: datetime | None = None) -> ParsedMessage:
    """Parse one message; never raises.

    ``raw`` is the message's bytes as received (CRLF or LF); ``received_at`` is when it arrived
    (default: now), against which its Date is judged. The parse reads the message as fitted to
    ``budget.apply_budget`` (its ``budget:`` defects come first), so its time and memory are
    bounded whatever the input. Returns a ParsedMessage whose ``defects`` lists the parser's
    defects (``ClassName: text``) and ours. When the ``email`` package fails on the body, the
    message is read again for its header alone (``body unreadable: …``); when it fails on that
    too, all fields are empty and ``defects`` ends with ``"unparseable: <reason>"``.
    """
    received = received_at or datetime.now(UTC)
    budgeted = apply_budget(raw)
    try:
        return _parse(budgeted.raw, budgeted.defects, received, headers_only=False)
    except Exception as exc:  # bad mail is recorded, not raised: try the header block alone
        first = f"body unreadable: {type(exc).__name__}; read the header alone"
    try:
        return _parse(budgeted.raw, [*budgeted.defects, first], received, headers_only=True)
    except Exception as exc:  # the promise of this function: bad mail is recorded, not raised
        return unparsed(f"unparseable: {type(exc).__name__}: {_storable(str(exc))[:200]}")


def unparsed(defect: str) -> ParsedMessage:
    """A ParsedMessage with every field empty and the one ``defect``: what is stored, beside the
    raw bytes, for a message nothing could be read from."""
    return ParsedMessage(
        message_id=None, in_reply_to=[], references=[], subject="", from_=None, to=[], cc=[],
        reply_to=[], sent_at=None, text="", headers=[], attachments=[], defects=[defect],
    )


def _parse(raw: bytes, found: list[str], received: datetime, *, headers_only: bool
           ) -> ParsedMessage:
    # compat32 for the MIME structure: its part headers are plain strings, read by the simple
    # parameter parser, where the default policy parses every part's Content-Type several times
    # with its registry (about a millisecond each; 23 s for 10,000 attachments). The fields a
    # message is read for are parsed with the default policy below.
    msg = BytesParser(policy=policy.compat32).parsebytes(raw, headersonly=headers_only)
    defects = _Defects()
    for text in found:
        defects.add(text)
    if bare_cr_in_header(raw):
        defects.add(BARE_CR_DEFECT)
    for part in msg.walk() if not headers_only else [msg]:
        for defect in part.defects:
            defects.add(_describe(defect))
    if not headers_only:
        leaves = list(_leaves(msg))
    else:  # the body is the payload as a whole: readable when it is text
        content_type = msg.get_content_type()
        leaves = [_Leaf(0, msg, content_type, None, None)] if content_type.startswith("text/") else []

    headers: list[tuple[str, str]] = []
    first: dict[str, str] = {}
    addresses: dict[str, list[Address]] = {name: [] for name in _ADDRESS_HEADERS}
    raw_items = list(msg.raw_items())
    for name, value in raw_items:
        key = name.lower()
        if key in _ADDRESS_HEADERS:
            text = _read_addresses(msg, name, value, addresses[key], defects)
        else:
            text = _read_header(msg, name, value, defects)
        # A field is one line: a line break decoded out of an encoded word, or one unfolding
        # leaves in place (a VT, FF or U+2028 in the raw field), would show an agent reading
        # the headers a field that was never sent (found by attacks).
        text = _one_line(name, text, defects)
        first.setdefault(key, text)
        if len(headers) < MAX_HEADERS:
            headers.append((name, text[:MAX_HEADER_CHARS]))
    if len(raw_items) > MAX_HEADERS:
        defects.add(f"headers: kept the first {MAX_HEADERS} of {len(raw_items)}")

    message_ids = _msg_ids("Message-ID", first.get("message-id", ""), defects, bare_ok=True)
    senders = addresses["from"]
    return ParsedMessage(
        message_id=message_ids[0] if message_ids else None,
        in_reply_to=_msg_ids("In-Reply-To", first.get("in-reply-to", ""), defects),
        references=_msg_ids("References", first.get("references", ""), defects),
        subject=_capped("Subject", _one_line("Subject", first.get("subject", ""), defects).strip(),
                        MAX_SUBJECT_CHARS, defects),
        from_=senders[0] if senders else None,
        to=addresses["to"],
        cc=addresses["cc"],
        reply_to=addresses["reply-to"],
        sent_at=_sent_at(first.get("date"), received, defects)
        or _first_received(headers, received, defects),
        text=_body_text(leaves, defects),
        headers=headers,
        attachments=_attachments(leaves, defects),
        defects=defects.items,
    )


class _Defects:
    """Defect strings in first-seen order, without repeats."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, text: str) -> None:
        if text not in self.items:
            self.items.append(text)


def _describe(defect: Exception) -> str:
    text = str(defect).strip()
    return f"{type(defect).__name__}: {text}" if text else type(defect).__name__


# Headers ---------------------------------------------------------------------------------------

#: The defect of a header holding a CR not followed by LF: the email package ends a line there,
#: a DKIM verifier does not, so fields behind it are read by one and not the other
#: (``shared.mail.trust`` never authenticates such a message).
BARE_CR_DEFECT = "header: a bare CR (a line break only some readers see)"
_BARE_CR = re.compile(rb"\r(?!\n)")


def header_block(raw: bytes) -> bytes:
    """The header block of ``raw``: everything before its first empty line (all of it when
    there is none)."""
    ends = [i for i in (raw.find(b"\r\n\r\n"), raw.find(b"\n\n")) if i >= 0]
    return raw[:min(ends)] if ends else raw


def bare_cr_in_header(raw: bytes) -> bool:
    """Whether the header block of ``raw`` holds a CR not followed by LF (:data:`BARE_CR_DEFECT`);
    the SMTP listener refuses such mail."""
    return _BARE_CR.search(header_block(raw)) is not None



#: Fields read as compat32 whatever their length: msg-ids hold no encoded-words (RFC 2047
#: section 5), and the default policy's unstructured parse takes time quadratic in a field's length.
_MSG_ID_HEADERS = frozenset({"message-id", "in-reply-to", "references"})
#: Longer fields are read as compat32 too, for the same quadratic parse.
_LONG_HEADER = 16_000
#: Fields kept as written, never RFC 2047 decoded: an encoded word is no authserv-id (RFC 8601
#: section 2.2), and a decoded ``=?us-ascii?q?mx.ours?=`` passed for ours (found by an attack).
_AS_WRITTEN = frozenset({"authentication-results"})


def _read_header(msg: Message, name: str, value: str, defects: _Defects) -> str:
    """The header's text as received, unfolded (RFC 5322 section 2.2.3): with encoded-words
    decoded by the default policy's reading, else the compat32 one (RFC 2047). Without
    encoded-words the value is kept as written, since the default policy re-renders structured
    fields (a Date with a wrong weekday comes back "corrected", parameters re-quoted)."""
    if name.lower() in _AS_WRITTEN:
        return _without_nul(_unfolded(value))
    if ("=?" not in value or name.lower() in _MSG_ID_HEADERS
            or len(value) > _LONG_HEADER):
        return _without_nul(_compat_text(value))
    try:
        header = policy.default.header_fetch_parse(name, value)
        text = str(header)
        for defect in header.defects:
            defects.add(f"{name}: {_describe(defect)}")
    except Exception as exc:  # any header-parser bug: fall back rather than lose the message
        defects.add(f"{name}: default policy failed ({type(exc).__name__}); read as compat32")
        return _compat_text(value)
    if _garbled(text):
        defects.add(f"{name}: undecodable text; read as compat32")
        return _compat_text(value)
    if any(_ENCODED_WORD.fullmatch(token) for token in text.split() if "=?" in token):
        # The default policy leaves a word whose bytes its codec refuses as written: an
        # iso-2022-jp subject with a byte the codec does not know was shown as the encoded word
        # (found by a new user); the compat32 reading decodes it with replacement characters.
        defects.add(f"{name}: an encoded word the default policy left undecoded; read as "
                    "compat32")
        return _compat_text(value)
    return _without_nul(text)


def _read_addresses(
    msg: Message, name: str, value: str, into: list[Address], defects: _Defects
) -> str:
    """Append the header's mailboxes (RFC 5322 section 3.4) to ``into``; return its text."""
    text, parsed, header_defects, failure = (
        _address_field(name, value) if len(value) <= _REMEMBERED_CHARS
        else _address_field.__wrapped__(name, value))
    if failure is not None:  # any header-parser bug: fall back rather than lose the message
        defects.add(f"{name}: default policy failed ({failure}); read as compat32")
    for defect in header_defects:
        defects.add(f"{name}: {defect}")
    if not text or any(_garbled(part) for part in (text, *(n + a for n, a in parsed))):
        defects.add(f"{name}: undecodable text; read as compat32")
        text = _compat_text(value)
        # Split the field as written, then decode each display name: an encoded word belongs in
        # a display name only (RFC 2047 section 5), and one that decodes to a line break and an
        # address must not become the sender (found by an attack).
        # Its 8-bit bytes are read first (SMTPUTF8 mail, RFC 6532, has UTF-8 addr-specs).
        # An encoded word is one token (RFC 2047 section 2), so a ":" or "@" in its encoded text
        # is neither a group's colon nor an address (found by an attack: "=?utf-8?q?Evil=0D=0A
        # Bcc:_x@evil.example?= <boss@…>" gave the sender "_x@evil.example?=").
        parsed = [(_compat_text(display_name), addr_spec) for display_name, addr_spec
                  in email.utils.getaddresses([_words_quoted(_unfolded(value))])]
    kept: list[str] = []
    written = ""  # the field unfolded, in lower case: read only for an addr-spec with a space
    misread = False
    for display_name, addr_spec in parsed:
        addr_spec = addr_spec.strip().lower()
        if (not _has_domain(addr_spec) or _garbled(addr_spec)
                or len(addr_spec) > MAX_ADDRESS_CHARS):
            if addr_spec:
                defects.add(f"{name}: dropped {addr_spec[:100]!r}, not an address")
            continue
        if any(ch.isspace() for ch in addr_spec):
            written = written or _unfolded(value).lower()
            if not _as_written(addr_spec, written) and _angle_addrs(written):
                defects.add(f"{name}: dropped {addr_spec[:100]!r}, a display name read as an "
                            "address")
                misread = True
                continue
        kept.append(addr_spec)
        shown = _capped(f"{name} display name",
                        _one_line(f"{name} display name", _storable(display_name),
                                  defects).strip(),
                        MAX_NAME_CHARS, defects)
        into.append(Address(address=_storable(addr_spec), name=shown or None))
    if misread:
        # A parser that read a display name holding "@" as the address ("Bank
        # security@bank.example <attacker@evil.example>") lost the address between the angle
        # brackets, which is the mailbox's (RFC 5322 section 3.4; found by an attack).
        for addr_spec in _angle_addrs(written):
            if addr_spec not in kept and len(addr_spec) <= MAX_ADDRESS_CHARS:
                defects.add(f"{name}: took {addr_spec[:100]!r} from between angle brackets")
                kept.append(addr_spec)
                into.append(Address(address=_storable(addr_spec), name=None))
    return _storable(text)  # the field as kept with the headers: PostgreSQL text too


#: A domain (RFC 5322 section 3.4.1): no quote, white space or bracket of another part.
_DOMAIN = re.compile(r'[^\s"<>@()\\,;:]+')


def _has_domain(addr_spec: str) -> bool:
    """Whether ``addr_spec`` is a local part, "@" and a domain: an encoded word between angle
    brackets (``<=?utf-8?q?boss@x.example?=>``) reads as the quoted local part
    ``"boss@x.example"`` with no domain, which an agent would take for that address."""
    local, at, domain = addr_spec.rpartition("@")
    return bool(local and at and _DOMAIN.fullmatch(domain))


#: An encoded word (RFC 2047 section 2).
_ENCODED_WORD = re.compile(r"=\?[^?\s]+\?[bBqQ]\?[^?\s]*\?=")


def _words_quoted(value: str) -> str:
    """``value`` with each encoded word outside a quoted string made a quoted string of its own,
    which an address parser reads as display-name text, whatever the word's encoded text holds."""
    out, at = [], 0
    for quoted in _QUOTED_STRING.finditer(value):
        out += [_ENCODED_WORD.sub(_quoted, value[at:quoted.start()]), quoted[0]]
        at = quoted.end()
    out.append(_ENCODED_WORD.sub(_quoted, value[at:]))
    return "".join(out)


def _quoted(word: re.Match[str]) -> str:
    return '"' + word[0].replace("\\", "\\\\").replace('"', '\\"') + '"'


#: A quoted local part (RFC 5322 section 3.4.1), the only place an addr-spec holds a space.
_QUOTED_LOCAL = re.compile(r'"(?:[^"\\]|\\.)*"@[^\s"@]+')
#: A quoted string of a field (RFC 5322 section 3.2.4), where "<" and "@" are only text.
_QUOTED_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
#: An angle-addr (RFC 5322 section 3.4) outside quoted strings.
_ANGLE_ADDR = re.compile(r'<([^\s<>"@(),:;\[\]\\]+@[^\s<>"@(),:;\[\]\\]+)>')


def _as_written(addr_spec: str, written: str) -> bool:
    """Whether ``addr_spec`` (lower case, holding white space) can be what the field ``written``
    (unfolded, lower case) says: a quoted local part the field holds as it is. A parser
    that gives more, in a field that has an angle-addr, read a display name or an undecoded
    encoded word as the address: the default policy quotes ``Bank security@bank.example`` into
    ``"bank security"@bank.example``, compat32 keeps ``=?utf-8?q?bank=0d=0a?=
    security@bank.example`` whole (found by an attack). Without an angle-addr such an address
    is kept: it is all the sender wrote (``big bug bb@bug.com``)."""
    return _QUOTED_LOCAL.fullmatch(addr_spec) is not None and addr_spec in written


def _angle_addrs(written: str) -> list[str]:
    """The addr-specs between angle brackets in ``written``, outside its quoted strings."""
    return list(dict.fromkeys(_ANGLE_ADDR.findall(_QUOTED_STRING.sub('""', written))))


#: Address fields up to this many characters are remembered (:func:`_address_field`); longer ones
#: are parsed each time, so hostile mail cannot fill the memory with them.
_REMEMBERED_CHARS = 1000


@functools.lru_cache(maxsize=4096)
def _address_field(name: str, value: str
                   ) -> tuple[str, tuple[tuple[str, str], ...], tuple[str, ...], str | None]:
    """The default policy's reading of one address field: its text, its (display name,
    addr-spec) pairs, its defects, and the name of the exception its parser raised (None).
    Remembered by value: a mailbox's To and From repeat (three in four fields of the first
    1,000 SpamAssassin messages), and this parse was a third of a message's (issue 14)."""
    try:
        header = policy.default.header_fetch_parse(name, value)
        return (str(header), tuple((a.display_name, a.addr_spec) for a in header.addresses),
                tuple(_describe(d) for d in header.defects), None)
    except Exception as exc:  # the caller records it and reads the field as compat32
        return "", (), (), type(exc).__name__


def _garbled(text: str) -> bool:
    return "\ufffd" in text or any("\udc80" <= ch <= "\udcff" for ch in text)


def _compat_text(value: str) -> str:
    """Decode a raw header value as compat32 would, with our charset table for the words."""
    text = _unfolded(value)
    try:
        chunks = email.header.decode_header(text)
    except email.errors.HeaderParseError:
        return text
    return "".join(
        _decode_bytes(chunk, charset) if isinstance(chunk, bytes) else chunk
        for chunk, charset in chunks
    )


def _unfolded(value: str) -> str:
    """A raw header value unfolded, its 8-bit bytes decoded, encoded words left as written."""
    # message_from_bytes keeps 8-bit header bytes as surrogate escapes; get the bytes back.
    unfolded = _FOLD.sub(" ", value).strip()
    return _decode_bytes(unfolded.encode("utf-8", "surrogateescape"), None)


def _msg_ids(name: str, text: str, defects: _Defects, *, bare_ok: bool = False) -> list[str]:
    """The msg-ids in a Message-ID, In-Reply-To or References value (RFC 5322 section 3.6.4).

    At most :data:`MAX_MSG_IDS` are kept: the first (the thread's root) and the latest ones,
    which are what threading needs (RFC 5322 section 3.6.4 lets a References field be trimmed).
    """
    ids = list(dict.fromkeys(m.group(1) for m in _MSG_ID.finditer(text)))
    if any(len(i) > MAX_MSG_ID_CHARS for i in ids):
        defects.add(f"{name}: dropped msg-ids longer than {MAX_MSG_ID_CHARS} characters")
        ids = [i for i in ids if len(i) <= MAX_MSG_ID_CHARS]
    if len(ids) > MAX_MSG_IDS:
        defects.add(f"{name}: kept {MAX_MSG_IDS} of {len(ids)} msg-ids")
        ids = ids[:1] + ids[-(MAX_MSG_IDS - 1):]
    for token in _ANGLE_TOKEN.findall(text):
        if "@" not in token:
            defects.add(f"{name}: '<{token}>' is not a msg-id")
    # Some mailers write a Message-ID without the angle brackets; the id is still usable.
    if not ids and bare_ok and (bare := _BARE_MSG_ID.fullmatch(text.strip())) \
            and len(bare.group(0)) <= MAX_MSG_ID_CHARS:
        ids.append(bare.group(0))
    return ids


def _capped(name: str, text: str, chars: int, defects: _Defects) -> str:
    """``text``, or its first ``chars`` characters ending with ``…`` and a defect saying so."""
    if len(text) <= chars:
        return text
    defects.add(f"{name}: kept the first {chars} of {len(text)} characters")
    return text[:chars - 1] + "…"


def _sent_at(text: str | None, received: datetime, defects: _Defects) -> datetime | None:
    """The Date header (RFC 5322 section 3.3) in UTC; a date without a zone is taken as UTC.

    None (the store then uses the received time) when the Date is absent, unparseable, or absurd:
    before :data:`EARLIEST_DATE` or more than :data:`MAX_DATE_LEAD` after ``received``.
    """
    if text is None:
        return None
    try:
        sent_at = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        defects.add(f"Date: unparseable {text[:100]!r}")
        return None
    if sent_at.tzinfo is None:
        sent_at = sent_at.replace(tzinfo=UTC)
    try:
        sent_at = sent_at.astimezone(UTC)
    except OverflowError:  # year 1 with a positive offset, as seen in spam
        defects.add(f"Date: out of range {text[:100]!r}")
        return None
    if sent_at < EARLIEST_DATE or sent_at > received + MAX_DATE_LEAD:
        defects.add(f"Date: absurd {text[:100]!r} (before {EARLIEST_DATE.year} or more than a day"
                    " after receipt); the received time stands for it")
        return None
    return sent_at


def _first_received(headers: list[tuple[str, str]], received: datetime, defects: _Defects
                    ) -> datetime | None:
    """The date of the earliest Received field that has a sensible one (RFC 5321 section 4.4:
    each hop adds one on top, its date after the ";"), for a message whose Date is missing or
    unusable: an archive's messages without Date were all dated at their import and listed as
    the newest mail (found by a new user). None when no field gives one."""
    for name, value in reversed(headers):
        if name.lower() != "received" or ";" not in value:
            continue
        try:
            at = email.utils.parsedate_to_datetime(value.rpartition(";")[2].strip())
            at = (at if at.tzinfo else at.replace(tzinfo=UTC)).astimezone(UTC)
        except (TypeError, ValueError, IndexError, OverflowError):
            continue
        if EARLIEST_DATE <= at <= received + MAX_DATE_LEAD:
            defects.add("Date: none usable; the earliest Received field's date stands for it")
            return at
    return None


# Body and attachments ----------------------------------------------------------------------------


#: Parts that are a whole message attached: RFC 2046's, and its internationalised form (RFC
#: 6532 section 3.7), which EAI mailers forward with and which vanished, neither body nor
#: attachment (found by an attack).
ATTACHED_MESSAGE_TYPES = frozenset({"message/rfc822", "message/global"})


class _Leaf(NamedTuple):
    """A leaf part with what every reader needs, each header read once (the default policy parses
    a header again on every access)."""

    index: int
    part: Message
    content_type: str
    disposition: str | None
    filename: str | None

    @property
    def attachment(self) -> bool:
        return (self.disposition == "attachment" or self.filename is not None
                or self.content_type in ATTACHED_MESSAGE_TYPES)


def _leaves(msg: Message) -> Iterator[_Leaf]:
    """Depth-first leaf parts; an attached message is one leaf.

    ``index`` counts every part in that walk, containers too, from 0 for ``msg`` itself. The
    budget bounds the depth (``budget.MAX_DEPTH``), so the recursion is bounded.
    """
    counter = itertools.count()

    def walk(part: Message) -> Iterator[_Leaf]:
        index = next(counter)
        content_type = part.get_content_type()
        if content_type.startswith("multipart/") and part.is_multipart():
            for child in part.get_payload():
                yield from walk(child)
        else:
            yield _Leaf(index, part, content_type, part.get_content_disposition(),
                        part.get_filename())

    return walk(msg)


def _body_text(leaves: list[_Leaf], defects: _Defects) -> str:
    """The first inline text/plain part, else (or when that part is only a :data:`PLACEHOLDER`
    for the HTML) the first inline text/html part rendered to text."""
    inline = [leaf for leaf in leaves if not leaf.attachment]
    plain = next((leaf for leaf in inline if leaf.content_type == "text/plain"), None)
    html = next((leaf for leaf in inline if leaf.content_type == "text/html"), None)
    text = _part_text(plain.part, defects, plain.index) if plain is not None else None
    if plain is not None and text is not None and plain.part.get("content-type") is None \
            and text.lstrip()[:20].lower().startswith(_HTML_STARTS):
        # RFC 2045 reads a part without Content-Type as text/plain, but spam and old scripts
        # send bare HTML so: it showed as markup, tags in the snippet (found by a new user).
        defects.add("Content-Type: missing on a body that is HTML; read as text/html")
        return _html_to_text(text, defects)
    if text is not None and (html is None or not _is_placeholder(text)):
        return text
    if html is None:
        return ""
    rendered = _html_to_text(_part_text(html.part, defects, html.index), defects)
    if text is not None and len(rendered.strip()) <= len(text.strip()):
        return text
    return rendered


_HTML_STARTS = ("<html", "<!doctype html")


def _is_placeholder(text: str) -> bool:
    flat = " ".join(text.split())
    return not flat or (len(flat) <= _PLACEHOLDER_CHARS and PLACEHOLDER.search(flat) is not None)


def _part_text(part: Message, defects: _Defects, index: int) -> str:
    payload = _decoded(part, defects, index)
    text = _decode_bytes(payload, part.get_content_charset())
    return text.replace("\r\n", "\n")


def _decoded(part: Message, defects: _Defects, index: int) -> bytes:
    """The part's payload decoded (RFC 2045 section 6), with the defects decoding found, which
    ``email`` records on the part only now, after the parse's defects were read. Base64 cut
    short by one character (a message truncated mid-file) is decoded as far as its whole
    quanta go: ``email`` gave the undecoded base64 text back as the file, with no defect
    reported (found by an attack)."""
    seen = len(part.defects)
    payload = part.get_payload(decode=True)
    found = part.defects[seen:]
    if any(isinstance(d, email.errors.InvalidBase64LengthDefect) for d in found):
        encoded = b"".join(str(part.get_payload()).encode("ascii", "ignore").split())
        try:
            payload = binascii.a2b_base64(encoded[:len(encoded) - len(encoded) % 4])
        except binascii.Error:
            payload = b""
        defects.add(f"part {index}: base64 cut short; kept the {len(payload)} bytes it decodes to")
    else:
        for defect in found:
            defects.add(f"part {index}: {_describe(defect)}")
    return payload if isinstance(payload, bytes) else b""


def _html_to_text(html: str, defects: _Defects) -> str:
    if len(html) > MAX_HTML_CHARS:
        defects.add(f"budget: text/html of {len(html)} characters is over MAX_HTML_CHARS"
                    f" ({MAX_HTML_CHARS}); rendered the first {MAX_HTML_CHARS}")
        html = html[:MAX_HTML_CHARS]
    try:
        return html_to_text(html) + "\n"
    except Exception as exc:  # lxml and inscriptis are third-party; keep the HTML, not lose it
        defects.add(f"text/html: could not render ({type(exc).__name__}); kept as HTML")
        return html


def _attachments(leaves: list[_Leaf], defects: _Defects) -> list[ParsedAttachment]:
    return [
        ParsedAttachment(
            part_index=leaf.index,
            filename=_filename(leaf.filename, defects),
            content_type=_storable(leaf.content_type.lower()),
            disposition=leaf.disposition,
            content_id=_content_id(leaf.part),
            content=_part_bytes(leaf, defects),
        )
        for leaf in leaves if leaf.attachment
    ]


def _content_id(part: Message) -> str | None:
    """The Content-ID (RFC 2045 section 7) without angle brackets, as ``cid:`` URLs use it."""
    value = part.get("content-id")
    return (_storable(str(value).strip().strip("<>").strip()) or None) if value is not None else None


def _filename(filename: str | None, defects: _Defects) -> str | None:
    """The part's filename as ``Message.get_filename`` read it (Content-Disposition ``filename``,
    else Content-Type ``name``; RFC 2231 continuations and charsets decoded by ``email``), with
    RFC 2047 encoded-words decoded by us, on one line: an agent shown a filename holding a line
    break reads what follows it as another field."""
    if filename is None:
        return None
    if "=?" in filename:
        # RFC 2047 section 5 forbids encoded-words in parameters, but mailers write them anyway.
        filename = _compat_text(filename)
    filename = _one_line("filename", filename, defects)
    stored = _storable(filename.strip())
    if stored != filename.strip() or _garbled(filename):
        defects.add("filename: undecodable characters replaced with U+FFFD")
    return stored or None


def _part_bytes(leaf: _Leaf, defects: _Defects) -> bytes:
    """The decoded payload (RFC 2045 section 6; ``x-uuencode`` too, by ``email``), byte-exact."""
    part = leaf.part
    if leaf.content_type in ATTACHED_MESSAGE_TYPES and part.is_multipart():
        # The parser does not keep an attached message's original bytes; regenerate them without
        # refolding so that they stay as close to the original as the model allows.
        regenerated = b"".join(
            inner.as_bytes(policy=policy.default.clone(refold_source="none"))
            for inner in part.get_payload()
        )
        # RFC 2046 section 5.2.1 allows no encoding here, but mailers base64 attached messages
        # anyway; the parser then reads the encoded text as a message without header.
        encoding = str(part.get("content-transfer-encoding", "")).strip().lower()
        if encoding == "base64":
            try:
                return binascii.a2b_base64(regenerated)
            except binascii.Error:  # not base64 after all: kept as it came (found by an attack)
                return regenerated
        if encoding == "quoted-printable":
            return quopri.decodestring(regenerated)
        return regenerated
    return _decoded(part, defects, leaf.index)


# Charsets ----------------------------------------------------------------------------------------


def _decode_bytes(data: bytes, label: str | None) -> str:
    """Decode ``data`` labelled ``label`` (any case; None = unlabelled) without raising.

    8-bit data that is valid UTF-8 is read as UTF-8 whatever an ASCII-compatible label says:
    mislabelled UTF-8 is common (a GB2312-labelled spam in the kit's corpus is UTF-8), while legacy
    text that happens to be valid UTF-8 is rare, because UTF-8 multi-byte sequences are strict.
    """
    codec = _codec(label)
    text = None
    if codec is None or (not data.isascii() and not codec.startswith(("utf-16", "utf-32"))):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
    if text is None:
        text = data.decode(codec or "windows-1252", errors="replace")
    return _without_nul(text)


def _without_nul(text: str) -> str:
    # PostgreSQL text cannot hold U+0000; the raw copy keeps the original byte.
    return text.replace("\x00", "\ufffd")


#: A line break or other control character (tab aside): the ASCII controls, DEL, and the other
#: characters ``str.splitlines`` breaks at.
_BREAK = re.compile("[\x00-\x08\x0a-\x1f\x7f\x85\u2028\u2029]")


def _one_line(field: str, text: str, defects: _Defects) -> str:
    """``text`` with each line break or other control character (tab aside) made a space, and a
    defect saying so. Unfolding removes CR LF only (RFC 5322 section 2.2.3); these came out of
    an encoded word (RFC 2047) or stood in the raw field (a VT, FF, FS or U+2028, which some
    readers break a line at), and a field, subject or display name is one line of text."""
    if _BREAK.search(text) is None:
        return text
    defects.add(f"{field}: a line break or control character in its text, made a space")
    return _BREAK.sub(" ", text)


def _storable(text: str) -> str:
    """``text`` with U+0000 and lone surrogates (undecodable bytes the parser kept as
    surrogate escapes) replaced by U+FFFD, so that PostgreSQL's UTF-8 text accepts it."""
    text = _without_nul(text)
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        text = "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    return text


def _codec(label: str | None) -> str | None:
    if label is None:
        return None
    key = label.strip().strip('"').lower()
    if key in CHARSET_ALIASES:
        return CHARSET_ALIASES[key]
    try:
        return codecs.lookup(key).name
    except LookupError:
        return None  # an unknown label tells us nothing; guess as for unlabelled data
