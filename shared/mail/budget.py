"""The parse budget of one message, applied to its raw bytes before the ``email`` package sees them.

Hostile mail makes the standard library's parser slow in the size of one construct: the default
policy's header parser is superlinear in the number of parameters of a MIME field (a message with
20,000 RFC 2231 continuations took 80 s), costs about a millisecond per address of an address field
and per MIME part, and the feed parser recurses once per nesting level. :func:`apply_budget` finds
these constructs with a few linear regular-expression passes over the bytes and, when one is over
its limit, hands the parser a shortened copy: the header block cut to its first fields (keeping the
fields ``parse`` reads), a field cut after its first parameters or recipients, the body cut before
the first delimiter line past the part or depth limit, or before the part that ends past
:data:`MAX_PARSED_BYTES` (with the open multiparts closed, so what precedes still parses as
written). Each cut adds a ``budget:`` defect naming its limit.
:data:`MAX_HTML_CHARS` is applied by ``parse`` when it renders an HTML body.

One repair happens here too: a line of the top-level header block that is not a header line (no
colon, a NUL in the name) would end the feed parser's header block there and turn every field
after it into body text; it is dropped from the copy with a ``header:`` defect.

The stored raw copy is always the message as received; only the parse sees the shortened copy, so
nothing is lost and a later parser with a larger budget can read the rest. Pure: no I/O. Called by
``parse.parse_message``.
"""

from __future__ import annotations

import re

import msgspec

__all__ = ["Budgeted", "MAX_DEPTH", "MAX_HEADER_BYTES", "MAX_HEADER_FIELDS", "MAX_HTML_CHARS",
           "MAX_MIME_FIELD_BYTES", "MAX_PARAMS", "MAX_PARSED_BYTES", "MAX_PARTS", "MAX_RECIPIENTS",
           "apply_budget"]

#: Bytes of the top-level header block the parser reads. Real header blocks are 2 to 50 KB (long
#: Received and ARC chains included); past this, fields are dropped from the parse except the first
#: of each field ``parse`` reads (:data:`_KEPT_FIELDS`), whose readers are linear.
MAX_HEADER_BYTES = 256 * 1024
#: Fields of the top-level header block the parser reads (``parse`` stores 200 of them); each field
#: costs the parser and the header readers a constant, so 100,000 junk fields cost seconds.
MAX_HEADER_FIELDS = 1_000
#: Parameters of one Content-Type or Content-Disposition field, anywhere in the message. The default
#: policy's parameter parser is superlinear in their number; a real field has two to four, and an
#: RFC 2231 filename of 255 characters split into 78-character continuations about thirty.
MAX_PARAMS = 64
#: Bytes of one Content-Type or Content-Disposition field (the same superlinear parser): enough for
#: a 255-character non-ASCII filename percent-encoded twice over (as filename* and name*).
MAX_MIME_FIELD_BYTES = 16 * 1024
#: Addresses of one top-level address field (From, To, Cc, Bcc, Reply-To, Sender). The default
#: policy spends about a millisecond per address; the large mail services refuse more than 500
#: recipients per message.
MAX_RECIPIENTS = 500
#: MIME parts (delimiter lines, RFC 2046 section 5.1.1) the parser reads. The feed parser and our
#: part readers spend about two milliseconds per part; real mail rarely has fifty.
MAX_PARTS = 500
#: Multiparts nested in one another, and attached messages (``message/*``) parsed as messages.
#: The feed parser recurses per level (Python's recursion limit ends it near 300) and takes time
#: quadratic in the depth; real mail nests fewer than ten deep (a forward of a forward of a
#: signed reply).
MAX_DEPTH = 32
#: Bytes of one message the parser reads. The ``email`` package holds a message several times
#: over while it parses (a 108 MB message with a 75 MB attachment took 13 s and 840 MB); past this,
#: parts are parsed up to the one that would end beyond it, and a body that is no multipart is cut
#: here. The SMTP listener takes 25 MiB at most (``PM_SMTP_MAX_MESSAGE_BYTES``), so only an
#: import meets it.
MAX_PARSED_BYTES = 32 * 1024 * 1024

#: Characters of a text/html body rendered to text (``parse`` applies it; the rest stays in the raw
#: copy). Layout costs up to six seconds per megabyte of table markup on a loaded two-core machine;
#: newsletters are under 200 KB.
MAX_HTML_CHARS = 300_000

_FIELD_START = re.compile(rb"^[^ \t\r\n]", re.MULTILINE)
#: Fields that ``parse`` reads, kept (the first of each) when the header block is cut.
_KEPT_FIELD = re.compile(
    rb"^(from|to|cc|reply-to|subject|date|message-id|in-reply-to|references|mime-version"
    rb"|content-type|content-transfer-encoding|content-disposition)[ \t]*:",
    re.MULTILINE | re.IGNORECASE)
_ADDRESS_FIELD = re.compile(rb"^(from|to|cc|bcc|reply-to|sender)[ \t]*:",
                            re.MULTILINE | re.IGNORECASE)
_MIME_FIELD = re.compile(rb"^content-(?:type|disposition)[ \t]*:", re.MULTILINE | re.IGNORECASE)
# A field ends at the first line break not followed by white space (RFC 5322 section 2.2.3).
_FIELD_END = re.compile(rb"\n(?![ \t])")
# RFC 5322 section 3.4: commas inside quoted strings, comments and angle brackets separate nothing.
_ADDRESS_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"?|\((?:[^()\\]|\\.)*\)?|<[^<>]*>?|,|[^",(<]+')
# RFC 2046 section 5.1.1; a boundary is 1 to 70 characters, a longer one is no real mailer's.
_BOUNDARY = re.compile(rb'\bboundary\s*=\s*(?:"([^"\r\n]{1,200})"|([^\s;"]{1,200}))', re.IGNORECASE)
_DELIMITER = re.compile(rb"^--([^\r\n]*)", re.MULTILINE)


class Budgeted(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`apply_budget` gives the parser: ``raw`` (the message itself when every construct
    is within its limit, else the shortened copy) and one ``budget:`` defect per limit reached."""

    raw: bytes
    defects: list[str]


def apply_budget(raw: bytes) -> Budgeted:
    """Fit ``raw`` (one RFC 5322 message) to the limits of this module; never raises.

    Time and memory are linear in ``len(raw)``: a few regular-expression passes and at most one
    copy. See the module docstring for what is cut.
    """
    defects: list[str] = []
    data = _cut_structure(raw, defects)
    data = _flatten_attached_messages(data, defects)
    data = _drop_stray_header_lines(data, defects)
    data = _cut_header_block(data, defects)
    data = _cut_mime_fields(data, _declared(data), defects)
    return Budgeted(raw=data, defects=defects)


# Attached messages -------------------------------------------------------------------------

_MESSAGE_TYPE = re.compile(rb"^(content-type:[ \t]*)message/[\w.+-]+", re.IGNORECASE | re.MULTILINE)


def _flatten_attached_messages(data: bytes, defects: list[str]) -> bytes:
    """``data`` with the ``message/*`` parts past the first :data:`MAX_DEPTH` made
    ``application/octet-stream``: the feed parser recurses into each attached message as into a
    multipart, and 300 of them nested, in 10 KB, ran it out of stack and lost the whole body, its
    text and risk flags with it (found by an attack). Those parts stay attachments, their bytes
    whole. Counted over the whole message, nested or not: real mail attaches a few."""
    found = list(_MESSAGE_TYPE.finditer(data))
    if len(found) <= MAX_DEPTH:
        return data
    defects.append(f"budget: more than MAX_DEPTH ({MAX_DEPTH}) attached messages (message/*);"
                   f" the rest are read as application/octet-stream")
    cut = found[MAX_DEPTH].start()
    return data[:cut] + _MESSAGE_TYPE.sub(rb"\1application/octet-stream", data[cut:])


# The header block ----------------------------------------------------------------------------

# A line the feed parser does not take for a header line (``email.feedparser.headerRE``: a field
# name and a colon, a continuation, or an mbox "From " line); the first one ends its header block.
_OBSOLETE_FIELD = re.compile(rb"^([\041-\071\073-\176]+)[ \t]+:", re.MULTILINE)
_STRAY_LINE = re.compile(rb"^(?!From |[\041-\071\073-\176]*:|[\t ])[^\n]*(?:\n|$)", re.MULTILINE)


def _drop_stray_header_lines(data: bytes, defects: list[str]) -> bytes:
    """``data`` with its header block readable by the feed parser: obsolete fields written with
    white space before the colon (RFC 5322 section 4.5, ``Subject  : hi``) rewritten without it,
    and lines that are not header lines dropped when fields follow them, so that one broken line
    costs that line, not every field after it (the feed parser would read those fields as body
    text). A block without the blank line that ends it is left alone: there the first such line
    is where the body starts."""
    block, rest = _split_header(data)
    if not rest or not block:
        return data
    rewritten = _OBSOLETE_FIELD.sub(rb"\1:", block)
    stray = [m.span() for m in _STRAY_LINE.finditer(rewritten) if m.end() > m.start()]
    # Stray lines running to the end of the block have no field after them: they stay.
    end = len(rewritten)
    while stray and stray[-1][1] == end:
        end = stray.pop()[0]
    if not stray:
        return data if rewritten == block else rewritten + rest
    first = rewritten[stray[0][0]:stray[0][1]][:60].decode("utf-8", "replace").strip()
    defects.append(f"header: dropped {len(stray)} line(s) that are not header fields"
                   f" (the first: {first!r})")
    pieces = []
    done = 0
    for start, stop in stray:
        pieces.append(rewritten[done:start])
        done = stop
    return b"".join([*pieces, rewritten[done:], rest])


def _split_header(data: bytes) -> tuple[bytes, bytes]:
    """``(header block, rest)``; the block ends with its last field's line break."""
    if data.startswith((b"\n", b"\r\n")):
        return b"", data
    # The first empty line: "\n\n" or "\n\r\n" (bytes.find is many times faster than a regex).
    ends = [at for at in (data.find(b"\n\n"), data.find(b"\n\r\n")) if at >= 0]
    if not ends:
        return data, b""
    cut = min(ends) + 1
    return data[:cut], data[cut:]


def _field_end(block: bytes, start: int) -> int:
    end = _FIELD_END.search(block, start)
    return end.start() + 1 if end else len(block)


def _header_cut(block: bytes) -> int | None:
    """Where the header block stops being parsed: the start of the first field past
    :data:`MAX_HEADER_FIELDS` or ending past :data:`MAX_HEADER_BYTES`; None when all fit."""
    previous = 0
    for count, start in enumerate(m.start() for m in _FIELD_START.finditer(block)):
        if start > MAX_HEADER_BYTES:
            return previous
        if count >= MAX_HEADER_FIELDS:
            return start
        previous = start
    return previous if len(block) > MAX_HEADER_BYTES else None


def _cut_header_block(data: bytes, defects: list[str]) -> bytes:
    block, rest = _split_header(data)
    cut = _header_cut(block)
    if cut is not None:
        kept = block[:cut]
        have = {m.group(1).lower() for m in _KEPT_FIELD.finditer(kept)}
        rescued: dict[bytes, bytes] = {}
        for match in _KEPT_FIELD.finditer(block, cut):
            name = match.group(1).lower()
            if name not in have and name not in rescued:
                rescued[name] = block[match.start():_field_end(block, match.end())]
        defects.append(
            f"budget: the header block ({len(block)} bytes) is over MAX_HEADER_BYTES"
            f" ({MAX_HEADER_BYTES}) or MAX_HEADER_FIELDS ({MAX_HEADER_FIELDS}); parsed its first"
            f" {cut} bytes" + (f" and {b', '.join(sorted(rescued)).decode('ascii')}" if rescued
                               else "") + "; the rest is only in the raw copy")
        block = kept + b"".join(rescued.values())
    shortened = _cut_address_fields(block, defects)
    if cut is None and shortened is block:
        return data
    return shortened + rest


def _cut_address_fields(block: bytes, defects: list[str]) -> bytes:
    """``block`` with each address field cut to :data:`MAX_RECIPIENTS` addresses (the same object
    when none is over)."""
    pieces: list[bytes] = []
    done = 0
    for match in _ADDRESS_FIELD.finditer(block):
        end = _field_end(block, match.end())
        field = block[match.start():end]
        if field.count(b",") < MAX_RECIPIENTS:
            continue
        cut = _cut_recipients(field)
        if cut is None:
            continue
        shortened, count = cut
        name = match.group(1).decode("ascii").lower()
        defects.append(f"budget: {name} has {count} addresses, over MAX_RECIPIENTS"
                       f" ({MAX_RECIPIENTS}); parsed the first {MAX_RECIPIENTS}")
        pieces += [block[done:match.start()], shortened]
        done = end
    if not pieces:
        return block
    return b"".join([*pieces, block[done:]])


def _cut_recipients(field: bytes) -> tuple[bytes, int] | None:
    """The field cut before its :data:`MAX_RECIPIENTS`-th separating comma, with the number of
    addresses it holds; None when it holds no more than that."""
    commas = 0
    cut = None
    for token in _ADDRESS_TOKEN.finditer(field):
        if token.group() == b",":
            commas += 1
            if commas == MAX_RECIPIENTS:
                cut = token.start()
    if cut is None:
        return None
    return field[:cut] + (b"\r\n" if field.endswith(b"\r\n") else b"\n"), commas + 1


# MIME fields anywhere ------------------------------------------------------------------------


def _declared(data: bytes) -> set[bytes]:
    """The boundaries that Content-Type fields of ``data`` declare (RFC 2046 section 5.1.1)."""
    return {m.group(1) or m.group(2) for m in _BOUNDARY.finditer(data)}


def _in_header_block(data: bytes, at: int, declared: set[bytes]) -> bool:
    """Whether the line starting at ``at`` belongs to a header block: no empty line lies between
    it and the start of ``data`` or a delimiter line, looking back at most
    :data:`MAX_MIME_FIELD_BYTES` * 4 bytes (a longer part header is no real mailer's)."""
    floor = max(at - MAX_MIME_FIELD_BYTES * 4, 0)
    end = at
    while end > 0:
        start = data.rfind(b"\n", floor, end - 1) + 1
        if start == 0 and floor > 0:
            return False
        line = data[start:end].rstrip(b"\r\n")
        if not line:
            return False
        if line.startswith(b"--") and _delimited(line[2:].rstrip(b" \t"), declared):
            return True
        end = start
    return True


def _delimited(boundary: bytes, declared: set[bytes]) -> bool:
    return boundary in declared or boundary.endswith(b"--") and boundary[:-2] in declared


def _cut_mime_fields(data: bytes, declared: set[bytes], defects: list[str]) -> bytes:
    """``data`` with every Content-Type and Content-Disposition field of a header block that is
    over :data:`MAX_PARAMS` or :data:`MAX_MIME_FIELD_BYTES` cut to its first parameters (a body
    line that only looks like such a field is body text and stays)."""
    pieces: list[bytes] = []
    done = 0
    worst = 0
    for match in _MIME_FIELD.finditer(data):
        if match.start() < done:
            continue
        end = _FIELD_END.search(data, match.end())
        stop = end.start() + 1 if end else len(data)
        field = data[match.start():stop]
        params = field.count(b";")
        if params <= MAX_PARAMS and len(field) <= MAX_MIME_FIELD_BYTES \
                or not _in_header_block(data, match.start(), declared):
            continue
        worst = max(worst, params)
        pieces += [data[done:match.start()], _first_params(field)]
        done = stop
    if not pieces:
        return data
    defects.append(f"budget: a MIME field has {worst} parameters or more than"
                   f" {MAX_MIME_FIELD_BYTES} bytes, over MAX_PARAMS ({MAX_PARAMS}) or"
                   f" MAX_MIME_FIELD_BYTES; parsed its first {MAX_PARAMS} parameters")
    pieces.append(data[done:])
    return b"".join(pieces)


def _first_params(field: bytes) -> bytes:
    """``field`` cut before its (:data:`MAX_PARAMS` + 1)-th semicolon and within
    :data:`MAX_MIME_FIELD_BYTES`, ending with a line break."""
    head = field[:MAX_MIME_FIELD_BYTES]
    at = -1
    for _ in range(MAX_PARAMS + 1):
        at = head.find(b";", at + 1)
        if at < 0:
            break
    if at >= 0:
        head = head[:at]
    elif len(field) > MAX_MIME_FIELD_BYTES and b";" in head:
        head = head[:head.rfind(b";")]
    return head.rstrip(b"\r\n") + b"\r\n"


# MIME structure --------------------------------------------------------------------------------


def _cut_structure(raw: bytes, defects: list[str]) -> bytes:
    """``raw`` cut before the delimiter line that opens the (:data:`MAX_PARTS` + 1)-th part, a
    multipart deeper than :data:`MAX_DEPTH`, or the part that ends past
    :data:`MAX_PARSED_BYTES`, with close delimiters for the multiparts still open; a body that
    is no multipart is cut at :data:`MAX_PARSED_BYTES`."""
    declared = _declared(raw)
    if not declared:
        if len(raw) <= MAX_PARSED_BYTES:
            return raw
        defects.append(_too_large(raw))
        return raw[:MAX_PARSED_BYTES]
    stack: list[bytes] = []
    parts = 0
    # Where the part being read began, and the multiparts open before it: where to cut if it
    # ends past MAX_PARSED_BYTES.
    opened: tuple[int, list[bytes], bytes] | None = None
    for line in _DELIMITER.finditer(raw):
        if line.start() > MAX_PARSED_BYTES and opened is not None:
            start, before, newline = opened
            defects.append(_too_large(raw))
            return raw[:start] + b"".join(b"--" + b + b"--" + newline for b in reversed(before))
        # A delimiter line is "--" boundary, "--" too when it closes, and transport padding.
        boundary = line.group(1).rstrip(b" \t\r")
        closing = False
        if boundary not in declared:
            if boundary.endswith(b"--") and boundary[:-2] in declared:
                boundary, closing = boundary[:-2], True
            else:
                continue
        before = list(stack)
        if boundary in stack:
            del stack[stack.index(boundary) + 1:]
            if closing:
                stack.pop()
                continue
        elif closing:
            continue
        else:
            stack.append(boundary)
        parts += 1
        opened = (line.start(), before,
                  b"\r\n" if raw[line.end():line.end() + 1] == b"\r" else b"\n")
        if parts > MAX_PARTS:
            defects.append(f"budget: more than MAX_PARTS ({MAX_PARTS}) MIME parts; parsed the first"
                           f" {MAX_PARTS}, the rest is only in the raw copy")
        elif len(stack) > MAX_DEPTH:
            defects.append(f"budget: multiparts nested deeper than MAX_DEPTH ({MAX_DEPTH}); parsed"
                           f" the outer {MAX_DEPTH}, the rest is only in the raw copy")
        else:
            continue
        newline = opened[2]
        return raw[:line.start()] + b"".join(b"--" + b + b"--" + newline for b in reversed(before))
    if len(raw) > MAX_PARSED_BYTES and opened is not None:
        defects.append(_too_large(raw))
        if not stack:  # every multipart closed before the limit: only the epilogue runs past it
            return raw[:MAX_PARSED_BYTES]
        start, before, newline = opened  # the last part runs past the limit
        return raw[:start] + b"".join(b"--" + b + b"--" + newline for b in reversed(before))
    return raw


def _too_large(raw: bytes) -> str:
    return (f"budget: the message ({len(raw)} bytes) is over MAX_PARSED_BYTES ({MAX_PARSED_BYTES});"
            " parsed up to the part that ends past it, the rest is only in the raw copy")
