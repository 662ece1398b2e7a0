"""Many prepared messages into one mailbox in one transaction: ``pylota import``'s store step.

:func:`ingest_batch` stores a batch (``shared.mail.store.insert_messages``, which threads it in
memory as one message after another would be) and then judges, triages and indexes each new
message in order, with the trust the mailbox gives it at that point of the run: the contacts are
counted in memory (``shared.mail.contacts.ContactBook``) exactly as the store counts them, so a
sender first seen earlier in the batch is not a first contact any more. Every derived row (trust,
triage, references, the embedding queue, attachment texts to extract) is written in one statement
per table, and the new messages are announced on Redis in one pipeline after the commit. The
message is keyword-searchable when the commit returns, as with ``ingest_raw``.

The result for each message is what ``shared.ingest.pipeline.ingest_raw`` gives for it. When the
database refuses anything in the batch, the batch is rolled back whole and the caller stores its
messages one at a time with ``ingest_raw``, which keeps each message as far as it can and
reports the one that fails (``shared.ingest.importer``).
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
from redis.asyncio import Redis
from redis.exceptions import RedisError

from shared.embeddings.store import enqueue_all
from shared.events import JOB_EXTRACT, NewMail, publish_new_mails, wake_drain
from shared.extract.store import queue as queue_attachment_texts
from shared.ingest.prepare import Prepared
from shared.logs import get_logger
from shared.mail.contacts import contact_book, correspondents
from shared.mail.domains import domain_of
from shared.mail.refs import save_refs_of
from shared.mail.store import NewMessage, StoreOutcome, insert_messages
from shared.mail.triage import decide, save_triage
from shared.mail.trust import Correspondence, TrustPolicy, authenticate, judge, save_trust
from shared.tenancy.store import identity_addresses

__all__ = ["ingest_batch"]

log = get_logger("shared.ingest")


async def ingest_batch(conn: asyncpg.Connection, redis: Redis | None, identity_id: str,
                       batch: Sequence[tuple[bytes, Prepared]], *,
                       trust_policy: TrustPolicy = TrustPolicy(), namespace: str | None = None
                       ) -> list[StoreOutcome]:
    """Store ``batch`` (raw bytes and what :func:`shared.ingest.prepare.prepare` derived from
    them) in ``identity_id``'s mailbox, in order, in one transaction, and announce the new
    messages (module docstring). DKIM lookups (``trust_policy``) happen before the transaction.

    Returns:
        Each message's store outcome, in order.

    Raises:
        asyncpg.PostgresError: the database refused something; nothing of the batch is stored.
    """
    auths = [await authenticate(raw, p.parsed.headers, _sender(p), trust_policy,
                                defects=p.parsed.defects) for raw, p in batch]
    async with conn.transaction():
        # insert_messages takes the lock too; taking it first keeps the contacts read below
        # and the writes of the batch one consistent view.
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", identity_id)
        own = await identity_addresses(conn, identity_id)
        people = {p.address for _, prepared in batch
                  for p in correspondents(prepared.parsed, own)[1]}
        book = await contact_book(conn, identity_id, sorted(people))
        outcomes = await insert_messages(conn, identity_id, [NewMessage(
            parsed=p.parsed, raw=raw, new_text=p.new_text, snippet=p.snippet, status=p.status)
            for raw, p in batch])
        trusts, triages, refs, new, attachment_ids = [], [], [], [], []
        own_domains = {domain_of(a) for a in own}
        for (_, prepared), auth, outcome in zip(batch, auths, outcomes):
            if outcome.duplicate:
                continue
            outbound, counted = correspondents(prepared.parsed, own)
            book.count(counted, outbound=outbound, when=outcome.date)
            trust = judge(auth, _sender(prepared), outcome.date, Correspondence(
                own=own, contacts=book.contacts,
                references=(own_domains | book.written_domains) - {""}), outbound=outbound)
            trusts.append((outcome.message_id, trust, auth.details))
            triages.append((outcome.message_id, decide(prepared.draft, trust)))
            refs.append((outcome.message_id, prepared.refs))
            new.append(outcome)
            attachment_ids += outcome.attachment_ids
        await save_trust(conn, identity_id, trusts)
        await save_triage(conn, identity_id, triages)
        await save_refs_of(conn, identity_id, refs)
        await enqueue_all(conn, identity_id, [o.message_id for o in new], bulk=True)
        queued = await queue_attachment_texts(conn, attachment_ids) if attachment_ids else 0
    if new and redis is not None:
        await _announce(redis, identity_id, new, queued, namespace)
    return outcomes


def _sender(prepared: Prepared) -> str | None:
    return prepared.parsed.from_.address if prepared.parsed.from_ else None


async def _announce(redis: Redis, identity_id: str, new: list[StoreOutcome], queued: int,
                    namespace: str | None) -> None:
    try:
        await publish_new_mails(redis, identity_id, [
            NewMail(message_id=o.message_id, thread_id=o.thread_id) for o in new])
    except RedisError:
        # The messages are stored; only a live mail_wait misses them (losing Redis loses no mail).
        log.warning("new_mail_not_announced", identity_id=identity_id, messages=len(new))
    if queued and namespace is not None:
        try:
            await wake_drain(redis, namespace, JOB_EXTRACT)
        except RedisError:
            log.warning("extraction_not_woken", identity_id=identity_id)  # the ticker finds them
