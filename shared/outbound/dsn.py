"""Delivery status notifications (RFC 3464) read from raw bytes.

A DSN is a ``multipart/report; report-type=delivery-status`` (RFC 6522) whose
``message/delivery-status`` part holds one block of per-message fields, then one block per
recipient (``Final-Recipient``, ``Action``, ``Status``, ``Diagnostic-Code``), and whose last
part returns the original message (``message/rfc822``) or its headers (``text/rfc822-headers``),
where its Message-ID is read. The standard library's parser splits the status part into blocks.

A *hard bounce* is a recipient block with ``Action: failed`` and a permanent status ``5.x.x``
(RFC 3463 section 3.1); ``delayed`` and ``4.x.x`` reports are temporary and change nothing.

Pure: no I/O. ``parse_dsn`` never raises: what is not a DSN is None.
"""

from __future__ import annotations

import email
import re
from email import policy
from email.message import Message

import msgspec

__all__ = ["DIAGNOSTIC_CHARS", "RecipientReport", "DeliveryReport", "parse_dsn"]

_MSG_ID = re.compile(r"<\s*([^<>\s@]+@[^<>\s]+?)\s*>")
#: Characters of a Diagnostic-Code kept (it is shown on the recipient's delivery state).
DIAGNOSTIC_CHARS = 500


class RecipientReport(msgspec.Struct, frozen=True, kw_only=True):
    """One recipient block: ``address`` from Final-Recipient (``rfc822`` type, lower-cased),
    ``action`` lower-cased (failed, delayed, delivered, relayed, expanded), ``status`` the
    RFC 3463 code, ``diagnostic`` the remote server's words."""

    address: str
    action: str
    status: str
    diagnostic: str | None = None

    @property
    def hard_bounce(self) -> bool:
        """A permanent failure: ``Action: failed`` with a ``5.x.x`` status."""
        return self.action == "failed" and self.status.startswith("5.")


class DeliveryReport(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed DSN: the reporting MTA, the original's Message-ID (without angle brackets, or
    None when the report does not return it), and the recipient blocks."""

    reporting_mta: str | None
    original_message_id: str | None
    recipients: list[RecipientReport]


def _field(block: Message, name: str) -> str | None:
    """A field of a status block as text. compat32 gives a field holding 8-bit bytes as an
    ``email.header.Header``, not a str: ``";" in`` it raised TypeError and the SMTP listener
    answered 500 for the whole message (found by an attack)."""
    value = block.get(name)
    return None if value is None else str(value)


def _typed_value(value: str | None) -> str | None:
    # "rfc822; jo@example.com" and "dns; mx.example.com": RFC 3464 section 2.1.2 address-type.
    if value is None:
        return None
    return value.split(";", 1)[1].strip() if ";" in value else value.strip()


def _original_id(part: Message) -> str | None:
    if part.get_content_type() == "message/rfc822":
        inner = part.get_payload()
        headers = inner[0] if isinstance(inner, list) and inner else None
        value = headers.get("Message-ID") if isinstance(headers, Message) else None
    else:
        text = part.get_payload(decode=True) or b""
        value = email.message_from_bytes(text, policy=policy.compat32).get("Message-ID")
    found = _MSG_ID.search(str(value)) if value is not None else None
    return found.group(1) if found else None


def parse_dsn(raw: bytes) -> DeliveryReport | None:
    """The report in ``raw``, or None when ``raw`` is not a delivery status notification, or
    is one that cannot be read (it is then ordinary mail: nothing is suppressed for it)."""
    try:
        return _parse(email.message_from_bytes(raw, policy=policy.compat32))
    except Exception:  # the parser's own failure on hostile bytes: then it is no DSN of ours
        return None


def _parse(msg: Message) -> DeliveryReport | None:
    if msg.get_content_type() != "multipart/report" \
            or str(msg.get_param("report-type", "")).lower() != "delivery-status" \
            or not msg.is_multipart():
        return None
    mta: str | None = None
    original: str | None = None
    recipients: list[RecipientReport] = []
    for part in msg.get_payload():
        if not isinstance(part, Message):
            continue
        kind = part.get_content_type()
        if kind == "message/delivery-status" and isinstance(part.get_payload(), list):
            blocks = [b for b in part.get_payload() if isinstance(b, Message)]
            if blocks:
                mta = _typed_value(_field(blocks[0], "Reporting-MTA"))
            for block in blocks[1:]:
                address = _typed_value(_field(block, "Final-Recipient")
                                       or _field(block, "Original-Recipient"))
                if not address or "@" not in address:
                    continue
                diagnostic = _typed_value(_field(block, "Diagnostic-Code"))
                status = (_field(block, "Status") or "").strip()
                recipients.append(RecipientReport(
                    address=address.strip("<>").lower(),
                    action=(_field(block, "Action") or "").strip().lower(),
                    status=status.split()[0] if status else "",
                    diagnostic=" ".join(diagnostic.split())[:DIAGNOSTIC_CHARS]
                    if diagnostic else None))
        elif kind in ("message/rfc822", "text/rfc822-headers"):
            original = _original_id(part) or original
    return DeliveryReport(reporting_mta=mta, original_message_id=original, recipients=recipients)
