"""``mail_send``, ``mail_reply`` and ``mail_forward`` as domain functions (spec section 4.3).

Each takes the decoded request, the resolved :class:`~shared.outbound.model.Sender`, and returns
a :class:`~shared.outbound.model.Sent`. The steps, in this order:

1. Check what needs no database (bodies, addresses, headers, attachments, labels), so a bad call
   fails before anything is touched.
2. In one transaction: claim the idempotency key (``shared.outbound.idempotency``); a key seen
   before replays its message with ``deduplicated: true``, or is ``idempotency_conflict``.
3. Read what the message depends on (the parent of a reply or forward, the thread of a send
   with ``thread_id``), address it, check recipient counts against the tenant's
   ``max_recipients``.
4. Compose the MIME message; then ``check_allowance``, the hook for the plan's allowances
   (``billing_limit``), which sees its size: it runs before anything is stored, and when it
   raises the whole transaction, the key's claim included, is rolled back, so a retry with the
   same key after a top-up sends.
5. Store the message through ``shared.ingest.pipeline.ingest_raw`` like imported
   mail, status ``queued``: it is threaded by its References, indexed, and found by
   ``in:outbound`` at once. Then queue its delivery (``shared.outbound.outbox``), honouring the
   suppression list, and record the key's message.
6. After the commit, announce the message on the identity's new-mail channel.

Delivery happens later, on a worker (``shared.outbound.delivery``).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable

import asyncpg
import msgspec
from redis.asyncio import Redis
from redis.exceptions import RedisError

from shared.db import Database
from shared.errors import ErrorCode, PylotaError, invalid
from shared.events import NewMail, publish_new_mail
from shared.extract.store import with_text_status
from shared.logs import get_logger
from shared.ingest.pipeline import ingest_raw
from shared.mail.parse import parse_message
from shared.mail.records import MessageRecord
from shared.mail.store import get_message, get_thread, raw_of, set_labels, thread_page
from shared.outbound.addresses import Mailbox, check_counts, own_mailbox, recipients
from shared.outbound.compose import (Draft, OutgoingPart, compose, forward_subject,
                                     forwarded_text, parts_of, quoted_reply, references_for,
                                     reply_subject)
from shared.header_text import plain_text
from shared.outbound.headers import extra_headers
from shared.outbound.idempotency import claim, complete, request_hash
from shared.outbound.model import ForwardRequest, ReplyRequest, Sender, SendRequest, Sent
from shared.outbound.outbox import enqueue, outbound_of
from shared.outbound.replies import automated_reason, reply_addressing, sender_for
from shared.outbound.suppression import suppressed
from shared.tenancy.store import get_tenant

__all__ = ["SendAllowance", "send_message", "reply_message", "forward_message",
           "MAX_METADATA_KEYS", "MAX_METADATA_KEY_CHARS"]

log = get_logger("shared.outbound.send")

SendAllowance = Callable[[asyncpg.Connection, Sender, int, int], Awaitable[None]]
"""``await check_allowance(conn, sender, recipient_count, message_bytes)``: raise
``PylotaError(BILLING_LIMIT)`` when the plan's allowance cannot take this message
(``message_bytes``: the composed message, as it will be stored). Runs inside the send's
transaction, after the key is claimed (a replay is never charged) and before anything is
stored."""

_LABEL = re.compile(r"^[a-z0-9][a-z0-9_:-]{0,63}$")


class _Prepared(msgspec.Struct, frozen=True, kw_only=True):
    draft: Draft
    bcc: list[Mailbox] = []
    kind: str
    flags: list[str] = []
    labels: list[str] = []
    metadata: dict[str, str] = {}


def _need_body(text: str | None, body_html: str | None) -> None:
    if not text and not body_html:
        raise invalid("text", "The message has no body.", "Pass text, html, or both.")


def _labels(labels: list[str]) -> list[str]:
    for i, label in enumerate(labels):
        if not _LABEL.fullmatch(label):
            raise invalid(f"labels[{i}]", f"{label[:80]!r} is not a label.",
                          "Labels are 1-64 of a-z, 0-9, _, : and -, starting with a letter or "
                          "digit.")
    return list(dict.fromkeys(labels))


#: Keys of a send's ``metadata``, and characters of one key (values: 512, the schema's). It is
#: stored with the message and echoed in every read of it; 60,000 keys (6 MB) were accepted,
#: stored outside any storage allowance (found by an attack).
MAX_METADATA_KEYS = 50
MAX_METADATA_KEY_CHARS = 64


def _metadata(metadata: dict[str, str]) -> dict[str, str]:
    if len(metadata) > MAX_METADATA_KEYS:
        raise invalid("metadata", f"metadata has {len(metadata)} keys; at most "
                                  f"{MAX_METADATA_KEYS}.",
                      f"Keep metadata to {MAX_METADATA_KEYS} keys, such as your own ids; "
                      "store anything larger on your side.")
    for key, value in metadata.items():
        if not key or len(key) > MAX_METADATA_KEY_CHARS:
            raise invalid(f"metadata.{key[:64]}", f"A metadata key has {len(key)} characters.",
                          f"Use keys of 1 to {MAX_METADATA_KEY_CHARS} characters.")
        if "\x00" in key or "\x00" in value:
            raise invalid(f"metadata.{key[:64]}", "Metadata cannot hold NUL characters.",
                          "Remove U+0000 from metadata keys and values.")
    return dict(metadata)


def _check_sender(sender: Sender) -> None:
    if not sender.addresses:
        raise invalid("identity", "This identity has no address to send from.",
                      "Give the identity an address first.")


def _main_mailbox(sender: Sender, from_address: str | None) -> Mailbox:
    _check_sender(sender)
    if from_address is None:
        return own_mailbox(sender.addresses[0], sender.display_name)
    wanted = from_address.strip().lower()
    if wanted not in {a.lower() for a in sender.addresses}:
        raise invalid("from_address", f"{from_address[:254]!r} is not an address of this identity.",
                      "Omit from_address, or pass one of the identity's addresses "
                      "(mail_list_identities).")
    return own_mailbox(wanted, sender.display_name)


async def _parent(conn: asyncpg.Connection, sender: Sender, message_id: str) -> MessageRecord:
    # whole: a forward sends the original's whole text (found by a second attack: it was cut
    # at READ_TEXT_CHARS without a word)
    parent = await get_message(conn, sender.identity_id, message_id, include_text=True,
                               include_headers=True, whole_text=True)
    if parent is None:
        raise PylotaError(ErrorCode.MESSAGE_NOT_FOUND, f"No message {message_id} in this mailbox.",
                          fix="Pass a message_id from mail_search or mail_get_thread of this "
                              "identity.")
    return parent


async def _thread_tail(conn: asyncpg.Connection, sender: Sender, thread_id: str) -> MessageRecord:
    thread = await get_thread(conn, sender.identity_id, thread_id)
    if thread is None or thread.message_count == 0:
        raise PylotaError(ErrorCode.THREAD_NOT_FOUND, f"No thread {thread_id} in this mailbox.",
                          fix="Pass a thread_id from mail_list_threads of this identity, or omit "
                              "it to start a new thread.")
    page, _ = await thread_page(conn, thread, offset=thread.message_count - 1, limit=1,
                                include_text=False)
    return page.messages[-1]


async def _parent_parts(conn: asyncpg.Connection, parent: MessageRecord) -> list[OutgoingPart]:
    raw = await raw_of(conn, parent.id)
    if raw is None:
        return []
    # In a thread, as ingest parses: a 20 MB original held the front's event loop, every
    # other tenant's calls with it, for 2.6 s (found by an attack).
    parsed = await asyncio.to_thread(parse_message, raw)
    return [OutgoingPart(filename=a.filename, content_type=a.content_type, content=a.content,
                         disposition="inline" if a.disposition == "inline" else "attachment",
                         content_id=a.content_id)
            for a in parsed.attachments]


async def _sent(conn: asyncpg.Connection, sender: Sender, message_id: str, *,
                deduplicated: bool) -> Sent:
    record = await get_message(conn, sender.identity_id, message_id)
    outbound = await outbound_of(conn, message_id)
    assert record is not None and outbound is not None, "stored in this transaction or before"
    await with_text_status(conn, [record])  # queued pending with the message (or read since)
    return Sent(message=record, deduplicated=deduplicated, delivery=outbound.delivery,
                kind=outbound.kind, metadata=outbound.metadata, flags=outbound.flags)


async def _submit(pool: Database, redis: Redis | None, sender: Sender, tool: str,
                  request: SendRequest | ReplyRequest | ForwardRequest,
                  prepare: Callable[[asyncpg.Connection], Awaitable[_Prepared]],
                  check_allowance: SendAllowance | None) -> Sent:
    digest = request_hash(tool, request)
    async with pool.acquire() as conn:
        async with conn.transaction():
            original = await claim(conn, sender.identity_id, request.idempotency_key, digest)
            if original is not None:
                return await _sent(conn, sender, original, deduplicated=True)
            tenant = await get_tenant(conn, sender.tenant_id)
            assert tenant is not None, "an identity's tenant exists"
            prepared = await prepare(conn)
            draft = prepared.draft
            count = check_counts({"to": draft.to, "cc": draft.cc, "bcc": prepared.bcc},
                                 tenant.max_recipients)
            # Rendering megabytes of text and attachments is CPU work: off the event loop.
            composed = await asyncio.to_thread(compose, draft)
            if check_allowance is not None:
                await check_allowance(conn, sender, count, len(composed.raw))
            outcome, _ = await ingest_raw(conn, None, sender.identity_id, composed.raw,
                                          queued=True)
            if prepared.labels:
                await set_labels(conn, outcome.message_id, prepared.labels)
            # One envelope recipient per mailbox, however often (and in whatever case) the
            # lists name it: the first list that names it wins.
            envelope: dict[str, tuple[str, str]] = {}
            for field, boxes in (("to", draft.to), ("cc", draft.cc), ("bcc", prepared.bcc)):
                for box in boxes:
                    envelope.setdefault(box.key, (field, box.address))
            await enqueue(conn, message_id=outcome.message_id, identity_id=sender.identity_id,
                          tenant_id=sender.tenant_id, rfc_message_id=composed.message_id,
                          mail_from=draft.sender.address, recipients=list(envelope.values()),
                          kind=prepared.kind, metadata=prepared.metadata, flags=prepared.flags,
                          suppressed=await suppressed(conn, sender.tenant_id, list(envelope)))
            await complete(conn, sender.identity_id, request.idempotency_key, outcome.message_id)
            sent = await _sent(conn, sender, outcome.message_id, deduplicated=False)
    log.info("queued", tool=tool, identity_id=sender.identity_id,
             message_id=outcome.message_id, recipients=count)
    if redis is not None:
        try:
            await publish_new_mail(redis, sender.identity_id,
                                   NewMail(message_id=outcome.message_id,
                                           thread_id=outcome.thread_id))
        except RedisError:
            log.warning("new_mail_not_announced", identity_id=sender.identity_id,
                        message_id=outcome.message_id)
    return sent


async def send_message(pool: Database, redis: Redis | None, sender: Sender,
                       request: SendRequest, *,
                       check_allowance: SendAllowance | None = None) -> Sent:
    """``mail_send``: a new message, or one more in ``thread_id`` (threaded by References on
    the thread's newest message).

    Raises:
        PylotaError: ``invalid_request`` (text/html both missing; a bad address, subject,
            attachment, label, metadata or from_address, at its path), ``header_not_allowed``,
            ``too_many_recipients``, ``thread_not_found``, ``idempotency_conflict``, and what
            ``check_allowance`` raises (``billing_limit``).
    """
    _need_body(request.text, request.html)
    plain_text("subject", request.subject)
    to, cc, bcc = (recipients("to", request.to), recipients("cc", request.cc),
                   recipients("bcc", request.bcc))
    headers = extra_headers(request.headers)
    parts = parts_of(request.attachments)
    labels, metadata = _labels(request.labels), _metadata(request.metadata)
    from_box = _main_mailbox(sender, request.from_address)

    async def prepare(conn: asyncpg.Connection) -> _Prepared:
        in_reply_to, references = None, []
        if request.thread_id is not None:
            in_reply_to, references = references_for(
                await _thread_tail(conn, sender, request.thread_id))
        draft = Draft(sender=from_box, to=to, cc=cc, subject=request.subject,
                      text=request.text or None, html=request.html or None, parts=parts,
                      headers=headers, in_reply_to=in_reply_to,
                      references=references,
                      auto_submitted="auto-replied" if request.kind == "auto_reply" else None)
        return _Prepared(draft=draft, bcc=bcc, kind=request.kind, labels=labels,
                         metadata=metadata)

    return await _submit(pool, redis, sender, "mail_send", request, prepare, check_allowance)


async def reply_message(pool: Database, redis: Redis | None, sender: Sender,
                        request: ReplyRequest, *,
                        check_allowance: SendAllowance | None = None) -> Sent:
    """``mail_reply``: addressed by ``shared.outbound.replies``, ``Re:`` once, In-Reply-To and
    References from the parent's Message-IDs, the parent quoted below the new text.

    Raises:
        PylotaError: ``invalid_request`` (no body; a bad attachment; nobody to reply to; an
            ``auto_reply`` to automated mail, path ``kind``, RFC 3834), ``message_not_found``,
            ``too_many_recipients``, ``idempotency_conflict``, and what ``check_allowance``
            raises.
    """
    _check_sender(sender)
    _need_body(request.text, request.html)
    parts = parts_of(request.attachments)

    async def prepare(conn: asyncpg.Connection) -> _Prepared:
        parent = await _parent(conn, sender, request.message_id)
        if request.kind == "auto_reply" and (reason := automated_reason(parent)) is not None:
            raise invalid("kind", f"No automatic reply to this message: {reason} (RFC 3834).",
                          "Do not auto-reply to automated mail; reply with kind transactional "
                          "only if a person asked you to.")
        addressing = reply_addressing(parent, sender.addresses, reply_all=request.reply_all)
        in_reply_to, references = references_for(parent)
        draft = Draft(sender=own_mailbox(addressing.sender, sender.display_name),
                      to=addressing.to, cc=addressing.cc, subject=reply_subject(parent.subject),
                      text=quoted_reply(request.text or None, parent, as_html=False),
                      html=quoted_reply(request.html or None, parent, as_html=True), parts=parts,
                      in_reply_to=in_reply_to, references=references,
                      auto_submitted="auto-replied" if request.kind == "auto_reply" else None)
        return _Prepared(draft=draft, kind=request.kind, flags=addressing.flags)

    return await _submit(pool, redis, sender, "mail_reply", request, prepare, check_allowance)


async def forward_message(pool: Database, redis: Redis | None, sender: Sender,
                          request: ForwardRequest, *,
                          check_allowance: SendAllowance | None = None) -> Sent:
    """``mail_forward``: the note, then the original's header block and text; its attachments
    unless ``include_attachments`` is false; ``Fwd:`` once; References kept.

    Raises:
        PylotaError: ``invalid_request`` (a bad address in ``to``), ``message_not_found``,
            ``too_many_recipients``, ``idempotency_conflict``, and what ``check_allowance``
            raises.
    """
    _check_sender(sender)
    to = recipients("to", request.to)

    async def prepare(conn: asyncpg.Connection) -> _Prepared:
        parent = await _parent(conn, sender, request.message_id)
        parts = await _parent_parts(conn, parent) if request.include_attachments else []
        in_reply_to, references = references_for(parent)
        draft = Draft(sender=own_mailbox(sender_for(parent, sender.addresses),
                                         sender.display_name),
                      to=to, subject=forward_subject(parent.subject),
                      text=forwarded_text(request.text, parent), parts=parts,
                      in_reply_to=in_reply_to, references=references)
        return _Prepared(draft=draft, kind="transactional")

    return await _submit(pool, redis, sender, "mail_forward", request, prepare, check_allowance)
