"""Who a reply goes to, and from which of our addresses (spec section 4.3, ``mail_reply``).

The rules, in order:

1. **From** is, for a parent we sent ourselves (stored ``outbound``: sent here, or imported
   from one of our addresses; mail that arrived is never our own, whatever its From), its From; else the first of the identity's
   addresses the parent was sent to (its To, then Cc); else the identity's main address.
   Forwards use the same rule.
2. **To**, for mail we received: the parent's Reply-To (RFC 5322 section 3.6.2) when it names at
   least one address that is not ours, else its From. Safety rules for Reply-To:
   - our own addresses are dropped from it, so a reply never loops back into the mailbox;
   - an address that is not one we can send to (``shared.outbound.addresses``) is dropped;
   - a Reply-To domain that is neither the From's domain nor a parent or subdomain of it is
     honoured but flagged ``reply_to_other_domain`` in the result, because redirecting replies
     elsewhere is how impersonation harvests answers. The agent should check the message's trust
     before such a reply; the flag tells it that it went elsewhere.
   For mail we sent: the parent's To (a follow-up goes to the people we wrote to).
3. **reply_all** adds, as Cc, the parent's other To and Cc recipients minus our own addresses and
   minus those already in To. Bcc is never added: it is not in the stored message we received,
   and for mail we sent it stays private to that message.
4. A parent that leaves nobody to reply to is ``invalid_request`` (path ``message_id``); one
   that would fill To or Cc past ``MAX_PER_LIST`` is ``too_many_recipients`` (path
   ``reply_all``, or ``message_id`` without it).

Addresses go out as the parent spelled them: the store keeps addr-specs lower-cased for
comparing, but a local part may be case-sensitive (RFC 5321 section 2.4), and
``JustinMattock-Re5JQ…@public.gmane.org`` lower-cased is another mailbox (found by a new user).
The spelling is read from the parent's header fields as stored.

``automated_reason`` applies RFC 3834 section 2 for ``kind: "auto_reply"``: no automatic answer
to automatic mail, lists, or delivery reports.

Pure: no I/O. Called by ``shared.outbound.send``.
"""

from __future__ import annotations

from email.utils import getaddresses

import msgspec

from shared.errors import ErrorCode, PylotaError, invalid
from shared.mail.model import Address
from shared.mail.records import MessageRecord
from shared.outbound.addresses import MAX_PER_LIST, Mailbox, domain_of, mailbox_of, shown_name

__all__ = ["REPLY_TO_OTHER_DOMAIN", "ReplyAddressing", "sender_for", "reply_addressing",
           "automated_reason"]

#: The flag of a reply that went to a Reply-To on an unrelated domain.
REPLY_TO_OTHER_DOMAIN = "reply_to_other_domain"

_LIST_HEADERS = ("list-id", "list-unsubscribe", "list-post")
_BULK_PRECEDENCE = frozenset({"bulk", "junk", "list"})
_ROBOT_LOCAL_PARTS = ("mailer-daemon", "postmaster", "owner-", "-request", "noreply", "no-reply",
                      "do-not-reply", "donotreply")


class ReplyAddressing(msgspec.Struct, frozen=True, kw_only=True):
    """The outcome of the rules: our ``sender`` address (lower-case, as stored), recipients,
    and flags for the result."""

    sender: str
    to: list[Mailbox]
    cc: list[Mailbox]
    flags: list[str]


_ADDRESS_FIELDS = frozenset({"from", "reply-to", "to", "cc"})


def _as_written(parent: MessageRecord) -> dict[str, str]:
    """The parent's addr-specs of From, Reply-To, To and Cc as its header fields spell them,
    by their lower-cased form (module docstring); the first spelling of each wins."""
    values = [f.value for f in parent.headers or () if f.name.lower() in _ADDRESS_FIELDS]
    spelled: dict[str, str] = {}
    for _, address in getaddresses(values):
        if "@" in address:
            spelled.setdefault(address.lower(), address)
    return spelled


def _usable(items: list[Address], own: set[str], spelled: dict[str, str]) -> list[Mailbox]:
    boxes: dict[str, Mailbox] = {}
    for item in items:
        if item.address.lower() in own:
            continue
        try:
            box = mailbox_of("message_id", spelled.get(item.address.lower(), item.address))
        except PylotaError:
            continue  # an address we cannot send to is left out, never an error of the caller
        boxes.setdefault(box.key, Mailbox(address=box.address, name=shown_name(item.name)))
    return list(boxes.values())


def _related(a: str, b: str) -> bool:
    return a == b or a.endswith(f".{b}") or b.endswith(f".{a}")


def _ours(parent: MessageRecord, mine: set[str]) -> bool:
    # Mail we sent, or imported mail written from one of our addresses (both stored outbound);
    # mail that arrived is received mail whatever its From says: anyone can write our address
    # there, and answering it as our own would send the reply where the writer chose.
    return (parent.direction == "outbound" and parent.from_ is not None
            and parent.from_.address.lower() in mine)


def sender_for(parent: MessageRecord, own: list[str]) -> str:
    """Which of ``own`` (the identity's addr-specs, main first) answers ``parent``: rule 1."""
    mine = {a.lower() for a in own}
    if _ours(parent, mine):
        return parent.from_.address.lower()
    written_to = [a.address.lower() for a in (*parent.to, *parent.cc) if a.address.lower() in mine]
    return written_to[0] if written_to else own[0]


def reply_addressing(parent: MessageRecord, own: list[str], *, reply_all: bool) -> ReplyAddressing:
    """Apply the module's rules to ``parent`` for an identity owning the addr-specs ``own``.

    Raises:
        PylotaError: ``invalid_request`` (path ``message_id``) when nobody is left to reply to;
            ``too_many_recipients`` (path ``reply_all``, else ``message_id``) when To or Cc
            would pass ``MAX_PER_LIST``.
    """
    mine = {a.lower() for a in own}
    spelled = _as_written(parent)
    ours_sent = _ours(parent, mine)
    sender = sender_for(parent, own)
    flags: list[str] = []
    if ours_sent:
        to = _usable(parent.to, mine, spelled)
    else:
        to = _usable(parent.reply_to, mine, spelled)
        if to and parent.from_ is not None:
            home = domain_of(parent.from_.address)
            if any(not _related(domain_of(b.address), home) for b in to):
                flags.append(REPLY_TO_OTHER_DOMAIN)
        elif parent.from_ is not None:
            to = _usable([parent.from_], mine, spelled)
    if not to:
        # Say which address could not be used: "no address" read as a message without a sender
        # to someone whose sender wrote from jörg@bücher.example (found by an attack).
        written = [a.address for a in (parent.to if ours_sent else
                                       [*parent.reply_to, *([parent.from_] if parent.from_
                                                            else [])])
                   if a.address.lower() not in mine]
        raise invalid("message_id", (
            f"This message's reply address {written[0][:254]!r} is not one mail can be sent to "
            "from here (an address outside ASCII before the @ needs SMTPUTF8, which the relay "
            "is not asked for; a quoted local part, an IP literal or a special-use domain are "
            "refused too)." if written else "This message has no address a reply could go to."),
            "Use mail_send with the recipients you mean instead.")
    cc: list[Mailbox] = []
    if reply_all:
        taken = {b.key for b in to}
        others = parent.cc if ours_sent else [*parent.to, *parent.cc]
        cc = [b for b in _usable(others, mine, spelled) if b.key not in taken]
    for field, boxes in (("To", to), ("Cc", cc)):
        if len(boxes) > MAX_PER_LIST:
            # The caller wrote neither list, so the error names what it did write.
            raise PylotaError(
                ErrorCode.TOO_MANY_RECIPIENTS,
                f"The reply's {field} would hold {len(boxes)} addresses, from the message's "
                f"own recipients; at most {MAX_PER_LIST} per list.",
                fix="Reply without reply_all, or use mail_send with the recipients you mean."
                if reply_all else "Use mail_send with the recipients you mean.",
                details={"path": "reply_all" if reply_all else "message_id",
                         "limit": MAX_PER_LIST})
    return ReplyAddressing(sender=sender, to=to, cc=cc, flags=flags)


def automated_reason(parent: MessageRecord) -> str | None:
    """Why ``parent`` must not get an automatic reply (RFC 3834 section 2), or None.

    Reads the stored headers (``parent.headers`` must have been loaded): Auto-Submitted other
    than ``no``, Precedence bulk/junk/list, list headers (RFC 2369, 2919), a delivery or read
    report (``multipart/report``), or a sender address of a robot (MAILER-DAEMON, owner-…,
    …-request, no-reply).
    """
    fields = {h.name.lower(): h.value for h in parent.headers or []}
    auto = fields.get("auto-submitted", "").split(";")[0].strip().lower()
    if auto and auto != "no":
        return f"it is Auto-Submitted: {auto}"
    if fields.get("precedence", "").strip().lower() in _BULK_PRECEDENCE:
        return "it has Precedence: " + fields["precedence"].strip().lower()
    if any(name in fields for name in _LIST_HEADERS):
        return "it came from a mailing list"
    if fields.get("content-type", "").lower().startswith("multipart/report"):
        return "it is a delivery or read report"
    if parent.from_ is None:
        return "it has no sender"
    local = parent.from_.address.lower().rpartition("@")[0]
    if any(local == robot or (robot.endswith("-") and local.startswith(robot))
           or (robot.startswith("-") and local.endswith(robot)) for robot in _ROBOT_LOCAL_PARTS):
        return f"it was sent by {local}@…, a robot address"
    return None
