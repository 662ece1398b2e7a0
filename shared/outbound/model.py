"""The send tools' requests, the identity that sends, and what a send returns.

The request Structs are the decoded arguments of ``mail_send``, ``mail_reply`` and
``mail_forward`` (spec section 4.3, field for field and with the schema's limits), so the tool
layer can decode a call straight into them. What the schema cannot say is checked by
``shared.outbound.send``: at least one of ``text`` and ``html``, the recipient counts, the header
allowlist, addr-specs. ``Delivery`` is the delivery state ``shared.outbound.outbox`` keeps.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from shared.mail.records import MessageRecord
from shared.tenancy.store import Identity

__all__ = ["Recipient", "Attachment", "SendRequest", "ReplyRequest", "ForwardRequest", "Sender",
           "RecipientDelivery", "Delivery", "Sent", "DeliveryStatus", "RecipientStatus",
           "HEADER_VALUES"]

IdempotencyKey = Annotated[str, msgspec.Meta(min_length=1, max_length=255,
                                             pattern="^[\\x20-\\x7E]{1,255}$")]
IdentityRef = Annotated[str, msgspec.Meta(max_length=254)]
AddressText = Annotated[str, msgspec.Meta(max_length=254)]
MessageId = Annotated[str, msgspec.Meta(pattern="^msg_[0-9A-HJKMNP-TV-Z]{26}$")]
ThreadId = Annotated[str, msgspec.Meta(pattern="^thr_[0-9A-HJKMNP-TV-Z]{26}$")]
HeaderValue = Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
MetadataValue = Annotated[str, msgspec.Meta(max_length=512)]

#: The extra header fields whose values are fixed, and their values in the spec's order (spec
#: section 4.3, ``headers``; RFC 2156 section 5.3). ``shared.outbound.headers`` checks them.
HEADER_VALUES: dict[str, tuple[str, ...]] = {
    "Importance": ("high", "normal", "low"),
    "Priority": ("normal", "non-urgent", "urgent"),
    "Sensitivity": ("personal", "private", "company-confidential"),
}
#: ``headers`` as the schema publishes it: the values of :data:`HEADER_VALUES` as ``properties``
#: (no type can say "these names, with these values, case-insensitively"), the rest in words.
Headers = Annotated[dict[str, HeaderValue], msgspec.Meta(
    description="X- headers whose name matches ^X-[A-Za-z0-9_-]+$, plus Importance, Priority, "
                "Sensitivity, Keywords, Comments and Organization; names are matched "
                "case-insensitively. Any other name gets header_not_allowed.",
    extra_json_schema={"properties": {name: {"type": "string", "enum": list(values)}
                                      for name, values in HEADER_VALUES.items()}})]


class Recipient(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A recipient given as ``{address, name}``."""

    address: AddressText
    name: Annotated[str, msgspec.Meta(max_length=78)] | None = None


#: A recipient as a string (an addr-spec, or ``Name <addr-spec>``) or as ``{address, name}``.
RecipientItem = AddressText | Recipient
Recipients = Annotated[list[RecipientItem], msgspec.Meta(max_length=49)]


class Attachment(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A file to attach; ``inline`` parts with a ``content_id`` can be shown by the HTML body
    as ``cid:<content_id>`` (RFC 2392)."""

    filename: Annotated[str, msgspec.Meta(max_length=255)]
    content_type: Annotated[str, msgspec.Meta(max_length=127)]
    content_base64: str
    disposition: Literal["attachment", "inline"] = "attachment"
    content_id: Annotated[str, msgspec.Meta(max_length=255)] | None = None


Attachments = Annotated[list[Attachment], msgspec.Meta(max_length=10)]


class SendRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``mail_send`` arguments (spec section 4.3). ``identity`` is resolved by the caller and
    passed as a :class:`Sender`. ``unsubscribe`` and ``consent`` are accepted as the schema says
    and not used yet: the spec gives them no fields."""

    # Required fields in the spec's order (to, subject, idempotency_key): the schema's
    # ``required`` list follows the fields.
    identity: IdentityRef | None = None
    to: Annotated[list[RecipientItem], msgspec.Meta(min_length=1, max_length=49)]
    cc: Recipients = []
    bcc: Recipients = []
    subject: Annotated[str, msgspec.Meta(min_length=1, max_length=998)]
    idempotency_key: IdempotencyKey
    text: str | None = None
    html: str | None = None
    attachments: Attachments = []
    kind: Literal["transactional", "marketing", "auto_reply"] = "transactional"
    thread_id: ThreadId | None = None
    from_address: AddressText | None = None
    labels: Annotated[list[str], msgspec.Meta(max_length=64)] = []
    headers: Headers = {}
    metadata: dict[str, MetadataValue] = {}
    unsubscribe: dict[str, Any] | None = None
    consent: dict[str, Any] | None = None


class ReplyRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``mail_reply`` arguments (spec section 4.3)."""

    message_id: MessageId
    identity: IdentityRef | None = None
    idempotency_key: IdempotencyKey
    reply_all: bool = False
    text: str | None = None
    html: str | None = None
    attachments: Attachments = []
    kind: Literal["transactional", "auto_reply"] = "transactional"


class ForwardRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``mail_forward`` arguments (spec section 4.3); ``text`` is the note above the original."""

    message_id: MessageId
    identity: IdentityRef | None = None
    to: Annotated[list[AddressText], msgspec.Meta(min_length=1, max_length=49)]
    idempotency_key: IdempotencyKey
    text: str | None = None
    include_attachments: bool = True


class Sender(msgspec.Struct, frozen=True, kw_only=True):
    """The identity a message is sent from: its addr-specs (the first is its main address) and
    display name, and its tenant (whose policy and suppression list apply)."""

    identity_id: str
    tenant_id: str
    addresses: list[str]
    display_name: str | None = None

    @classmethod
    def of(cls, identity: Identity) -> Sender:
        """The sender for a resolved :class:`~shared.tenancy.store.Identity`."""
        return cls(identity_id=identity.id, tenant_id=identity.tenant_id,
                   addresses=list(identity.addresses), display_name=identity.display_name)


DeliveryStatus = Literal["queued", "sending", "sent", "deferred", "failed"]
RecipientStatus = Literal["pending", "sent", "failed", "suppressed", "bounced"]


class RecipientDelivery(msgspec.Struct, frozen=True, kw_only=True):
    """One envelope recipient: ``pending`` until the relay accepts it (``sent``) or refuses it
    for good (``failed``); ``suppressed`` when a hard bounce put it on the tenant's suppression
    list; ``bounced`` when a delivery status notification (RFC 3464) reported it failed later.
    ``last_reply`` is the relay's reply for it, or what went wrong."""

    address: str
    field: Literal["to", "cc", "bcc"]
    status: RecipientStatus
    last_reply: str | None = None


class Delivery(msgspec.Struct, frozen=True, kw_only=True):
    """The delivery of one sent message.

    ``status``: ``queued`` (waiting for its first attempt), ``sending`` (a worker holds it),
    ``deferred`` (a temporary failure: 4xx reply or relay unreachable; tried again at
    ``next_attempt_at``), ``sent`` (the relay accepted it for at least one recipient and none is
    pending), ``failed`` (no recipient accepted: a 5xx reply, or attempts ran out).
    ``last_reply`` is the relay's last reply (such as ``250 2.0.0 Ok: queued``) or the connection
    error; ``attempts`` counts attempts made.
    """

    status: DeliveryStatus
    attempts: int
    last_reply: str | None
    next_attempt_at: datetime | None
    updated_at: datetime
    recipients: list[RecipientDelivery]


class Sent(msgspec.Struct, kw_only=True):
    """What a send tool returns: the stored message (``status`` ``queued`` on a first call),
    whether this call replayed an earlier one with the same idempotency key, the delivery state,
    and what the call carried beside the message.

    ``flags`` name what the caller should know, such as ``reply_to_other_domain`` (a reply went
    to a Reply-To whose domain differs from the From's; see ``shared.outbound.replies``).
    ``message.triage`` and ``message.refs`` are not filled here (the tool layer annotates).
    """

    message: MessageRecord
    deduplicated: bool
    delivery: Delivery
    kind: str
    metadata: dict[str, str]
    flags: list[str]
