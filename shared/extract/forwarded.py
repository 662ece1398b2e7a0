"""The text of an attached email (``message/rfc822``, RFC 2046 section 5.2.1; a ``.eml`` file).

A message forwarded as an attachment is where the answer to "what did the supplier say?" often
is, and its text was unreadable: no reader took the type (found in the closing review of issue
14's session). It reads as a mail client shows it: the header fields a reader looks at (From, To,
Cc, Date, Subject), a blank line, the readable body (``shared.mail.parse.parse_message``: the
text part, else the HTML rendered), and the names of its own attachments, whose text is not read
(one level: an attachment of an attachment is left to the mail it came in). Parsing never
raises for bad mail, so a broken attached message still gives what parsed. Pure: no I/O; runs
inside the sandbox.
"""

from __future__ import annotations

from shared.mail.model import Address
from shared.mail.parse import parse_message

__all__ = ["eml_text"]


def _mailbox(address: Address) -> str:
    return f"{address.name} <{address.address}>" if address.name else address.address


def eml_text(content: bytes) -> str:
    """The attached message ``content`` as text (module docstring): header lines, a blank
    line, the body, and an ``Attachments:`` line when it has any."""
    parsed = parse_message(content)
    lines = []
    if parsed.from_ is not None:
        lines.append(f"From: {_mailbox(parsed.from_)}")
    for name, addresses in (("To", parsed.to), ("Cc", parsed.cc)):
        if addresses:
            lines.append(f"{name}: {', '.join(_mailbox(a) for a in addresses)}")
    if parsed.sent_at is not None:
        lines.append(f"Date: {parsed.sent_at.strftime('%Y-%m-%d %H:%M UTC')}")
    lines.append(f"Subject: {parsed.subject}")
    text = "\n".join(lines) + "\n\n" + parsed.text.strip()
    names = [a.filename or a.content_type for a in parsed.attachments]
    if names:
        text += "\n\nAttachments: " + ", ".join(names)
    return text + "\n"
