"""Recipients of outgoing mail: addr-specs checked, domains as A-labels, counts limited.

A recipient is an RFC 5322 addr-spec (section 3.4.1), or ``display-name <addr-spec>`` when given
as a string, or ``{address, name}``. ``email_validator`` checks the syntax: dot-atom local parts
in ASCII (no SMTPUTF8: the relay is not asked for it), a domain with a dot and no special-use
name (RFC 6761), and an internationalised domain turned into its A-label (IDNA 2008, RFC 5891),
so every address leaves in ASCII. A display name may be any text without control characters:
the generator encodes it (RFC 2047).

Pure: no I/O. Called by ``shared.outbound.send`` and ``shared.outbound.replies``.
"""

from __future__ import annotations

import email_validator
import idna
import msgspec

from shared.errors import ErrorCode, PylotaError, invalid
from shared.header_text import plain_text
from shared.outbound.model import Recipient, RecipientItem

__all__ = ["MAX_PER_LIST", "Mailbox", "mailbox_of", "recipients", "check_counts", "own_mailbox",
           "domain_of", "shown_name"]

#: Recipients per list (spec section 4.3: 50 at the provider, one kept for the journal copy).
MAX_PER_LIST = 49


class Mailbox(msgspec.Struct, frozen=True, kw_only=True):
    """A checked recipient: ``address`` is ASCII with a lower-case A-label domain."""

    address: str
    name: str | None = None

    @property
    def key(self) -> str:
        """The address compared case-insensitively (duplicates, own addresses)."""
        return self.address.lower()


def mailbox_of(path: str, item: RecipientItem) -> Mailbox:
    """Check one recipient.

    Raises:
        PylotaError: ``invalid_request`` at ``path`` when the address is not an addr-spec we can
            send to, or the name holds control characters.
    """
    text = item.address if isinstance(item, Recipient) else item
    name = item.name if isinstance(item, Recipient) else None
    plain_text(path, text)
    try:
        checked = email_validator.validate_email(
            text.strip(), check_deliverability=False, allow_smtputf8=False,
            allow_display_name=not isinstance(item, Recipient), allow_quoted_local=False,
            # strict: a local part of at most 64 octets (RFC 5321 section 4.5.3.1.1), which
            # relays refuse past; found by an attack
            allow_domain_literal=False, strict=True)
    except email_validator.EmailNotValidError as exc:
        raise invalid(path, f"{text.strip()[:254]!r} is not an address mail can be sent to: {exc}",
                      "Pass an addr-spec such as jo@example.com, or Name <jo@example.com>."
                      ) from exc
    if name is None and checked.display_name:
        name = checked.display_name
    if name is not None:
        name = plain_text(path, name).strip() or None
    local, _, _ = checked.ascii_email.rpartition("@")
    return Mailbox(address=f"{local}@{checked.ascii_domain.lower()}", name=name)


def recipients(field: str, items: list[RecipientItem]) -> list[Mailbox]:
    """Check a recipient list (``to``, ``cc``, ``bcc``); a repeated address is kept once.
    Counts are checked by :func:`check_counts`, over every list at once.

    Raises:
        PylotaError: ``invalid_request`` at ``field[i]``.
    """
    seen: dict[str, Mailbox] = {}
    for i, item in enumerate(items):
        box = mailbox_of(f"{field}[{i}]", item)
        seen.setdefault(box.key, box)
    return list(seen.values())


def check_counts(lists: dict[str, list[Mailbox]], max_recipients: int) -> int:
    """The number of distinct recipients over ``lists``, checked against the tenant's policy.

    Raises:
        PylotaError: ``too_many_recipients`` over :data:`MAX_PER_LIST` in one list or
            ``max_recipients`` in all (spec section 4.3, policy.max_recipients).
    """
    for field, boxes in lists.items():
        if len(boxes) > MAX_PER_LIST:
            raise PylotaError(
                ErrorCode.TOO_MANY_RECIPIENTS,
                f"{field} has {len(boxes)} recipients; at most {MAX_PER_LIST} per list.",
                fix=f"Keep {field} to {MAX_PER_LIST} addresses.",
                details={"path": field, "limit": MAX_PER_LIST})
    total = len({b.key for boxes in lists.values() for b in boxes})
    if total > max_recipients:
        raise PylotaError(
            ErrorCode.TOO_MANY_RECIPIENTS,
            f"The message has {total} recipients; this workspace allows {max_recipients}.",
            fix=f"Send to at most {max_recipients} addresses over to, cc and bcc, or split the "
                "message.", details={"limit": max_recipients, "count": total})
    return total


def own_mailbox(address: str, name: str | None) -> Mailbox:
    """One of our identity's addresses as a sender: stored addresses are trusted, and only
    their domain is turned into its A-label (``idna``, UTS 46 mapping)."""
    local, _, domain = address.rpartition("@")
    try:
        ascii_domain = idna.encode(domain, uts46=True).decode("ascii")
    except idna.IDNAError:
        ascii_domain = domain
    return Mailbox(address=f"{local}@{ascii_domain.lower()}", name=shown_name(name))


def shown_name(name: str | None) -> str | None:
    """A stored display name (ours, or read from received mail) fit for a header: shown as it
    is, with only what could break the field (control and other unprintable characters)
    dropped."""
    shown = "".join(ch for ch in name if ch.isprintable()).strip() if name else ""
    return shown or None


def domain_of(address: str) -> str:
    """The lower-case domain of an addr-spec."""
    return address.rpartition("@")[2].lower()
