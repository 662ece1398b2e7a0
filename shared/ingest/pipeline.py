"""One raw message in: parse, separate new text, authenticate, store and thread, judge trust,
triage, index, queue its attachments for text extraction, announce.

Used by the SMTP listener (``front.smtp``), the send tools, which store the message they compose
here before it is delivered (``shared.outbound.send``), and ``pylota import`` for a message its
batches could not store together (``shared.ingest.batch``). What is derived from the message
alone comes from ``shared.ingest.prepare``, as on the importer's workers. Parsing never raises,
so a message that parses badly is stored as far as it parses (its raw bytes always) with its
defects; only a database failure stops an ingest.

Attachment text is extracted later, on the batch workers (``shared.extract``): ingest only queues
each stored attachment ``pending``, in the message's transaction, and then wakes the extraction
drain (``JOB_EXTRACT``) when it has a Redis client and the deployment's namespace; without them
the drain ticker finds the rows within ``PM_EMBED_POLL_SECONDS``.
"""

from __future__ import annotations

import asyncio

import asyncpg
from redis.asyncio import Redis
from redis.exceptions import RedisError

from shared.embeddings.store import enqueue
from shared.events import JOB_EXTRACT, NewMail, publish_new_mail, wake_drain
from shared.extract.store import queue as queue_attachment_texts
from shared.ingest.prepare import Prepared, derive
from shared.logs import get_logger
from shared.mail.parse import parse_message, unparsed
from shared.mail.patterns import identity_patterns
from shared.mail.refs import save_refs
from shared.mail.store import StoreOutcome, insert_message
from shared.mail.triage import decide, save_triage
from shared.mail.trust import TrustPolicy, assess, authenticate

__all__ = ["ingest_raw"]

log = get_logger("shared.ingest")

#: What PostgreSQL says of a value it cannot store or index (SQLSTATE classes 22 and 54).
_REFUSED = (asyncpg.DataError, asyncpg.ProgramLimitExceededError)


async def ingest_raw(conn: asyncpg.Connection, redis: Redis | None, identity_id: str,
                     raw: bytes, *, queued: bool = False, original: bytes | None = None,
                     trust_policy: TrustPolicy = TrustPolicy(), namespace: str | None = None,
                     arrived: bool = False) -> tuple[StoreOutcome, list[str]]:
    """Store ``raw`` in ``identity_id``'s mailbox and publish a new-mail event when new.

    ``queued`` marks mail composed here that waits for delivery: stored with status ``queued``
    instead of ``sent`` (``shared.outbound`` moves it on to ``sent`` or ``failed``).
    ``original`` is the message as the sender sent it when ``raw`` adds trace fields to it (the
    SMTP listener), so that the same message delivered twice is stored once.
    ``trust_policy`` says which Authentication-Results to believe and how DKIM keys are looked
    up (``shared.mail.trust``); the default believes none and verifies nothing, so every verdict
    is ``none``. DKIM lookups happen before the message's transaction opens.
    ``namespace`` (``PM_NAMESPACE``) lets ingest wake the batch workers' extraction drain when
    the message has attachments (module docstring); None leaves them to the drain ticker.
    ``arrived`` marks mail delivered from outside (the SMTP listener): inbound whatever its From
    says (``shared.mail.store.NewMessage``).

    Returns:
        The store outcome and the defects: the parse's, and a ``not indexed: …`` one when
        triage or the search index could not be derived (empty when all went cleanly).
    """
    patterns = await identity_patterns(conn, identity_id)
    # In a thread: parsing is CPU work of about 0.1 s a MiB, and a 20 MiB message held the SMTP
    # listener's event loop, every other session included, for 2 s (found by an attack).
    prepared = await asyncio.to_thread(_prepare, raw, patterns, queued)
    parsed = prepared.parsed
    defects = list(parsed.defects)
    sender = parsed.from_.address if parsed.from_ else None
    auth = await authenticate(raw, parsed.headers, sender, trust_policy, defects=parsed.defects)
    # One commit for the message and its search index: half the fsyncs of an import.
    async with conn.transaction():
        try:
            outcome = await insert_message(conn, identity_id, parsed, raw,
                                           new_text=prepared.new_text, snippet=prepared.snippet,
                                           status=prepared.status, dedupe_raw=original,
                                           arrived=arrived)
        except _REFUSED as exc:
            # A parsed value PostgreSQL refuses must not cost the message: keep its raw bytes
            # with the parse reduced to nothing, so it can be re-parsed once the parser is fixed.
            log.warning("stored_raw_only", identity_id=identity_id, error=type(exc).__name__)
            prepared = derive(unparsed(f"unparseable: storage refused a parsed value "
                                       f"({type(exc).__name__})"), patterns)
            defects = [*defects, *prepared.parsed.defects]
            outcome = await insert_message(conn, identity_id, prepared.parsed, raw, new_text="",
                                           snippet="", status="unparsed", dedupe_raw=original,
                                           arrived=arrived)
        queued_texts = 0
        if not outcome.duplicate and outcome.attachment_ids:
            # Every stored attachment, whatever its type: the worker decides what it reads, and
            # an unread type ends "skipped" rather than never leaving "pending".
            queued_texts = await queue_attachment_texts(conn, outcome.attachment_ids)
        if not outcome.duplicate:
            try:
                async with conn.transaction():
                    trust = await assess(conn, identity_id, outcome.message_id, auth, sender,
                                         outcome.date, outbound=outcome.outbound)
                    await save_triage(conn, identity_id,
                                      [(outcome.message_id, decide(prepared.draft, trust))])
                    # References and the embedding queue (spec section 4.3); the batch worker
                    # computes the vector later (shared.embeddings.store.embed_pending).
                    await save_refs(conn, identity_id, outcome.message_id, prepared.refs)
                    await enqueue(conn, identity_id, outcome.message_id)
            except Exception as exc:  # derived data must never cost the stored message
                # Stored, not judged, triaged or indexed: keyword search still finds it;
                # trust, references and category: wait for `pylota reindex`.
                log.warning("not_indexed", identity_id=identity_id,
                            message_id=outcome.message_id, error=type(exc).__name__)
                defects.append(f"not indexed: {type(exc).__name__}; run pylota reindex")
    if not outcome.duplicate and redis is not None:
        try:
            await publish_new_mail(redis, identity_id, NewMail(message_id=outcome.message_id,
                                                               thread_id=outcome.thread_id))
        except RedisError:
            # The message is stored; only a live mail_wait misses it (losing Redis loses no mail).
            log.warning("new_mail_not_announced", identity_id=identity_id,
                        message_id=outcome.message_id)
        if queued_texts and namespace is not None:
            try:
                await wake_drain(redis, namespace, JOB_EXTRACT)
            except RedisError:
                # The rows are stored; the drain ticker finds them.
                log.warning("extraction_not_woken", identity_id=identity_id,
                            message_id=outcome.message_id)
    return outcome, defects


def _prepare(raw: bytes, patterns: dict[str, str], queued: bool) -> Prepared:
    return derive(parse_message(raw), patterns, queued=queued)
