"""Listing an identity's threads newest first, with filters (mail_list_threads, spec section 4.3).

A read path like search: one statement reads ``threads``, ``messages`` and ``message_triage``
directly (the exception ``shared.mail.store`` states), so filters, counts and the needs-reply
score are computed from the rows as they are now — a label or read-state change
(``shared.mail.store.update_labels``) or a new message shows in the next listing.

What a thread's fields and filters mean:

- its *newest message* is the last by (date, id), date being the Date header or else the time
  received, as ``is:needs_reply`` orders them (``compile.NEEDS_REPLY_SQL``); ``last_direction``,
  ``last_message_at`` and ``snippet`` are that message's, and ``direction``, ``after``
  (inclusive) and ``before`` (exclusive) filter on it;
- ``labels`` is the union of its messages' labels, and ``label`` keeps threads where any message
  carries the label (as ``label:`` finds the message);
- ``unread_count`` counts its unread messages; ``is_unread: true`` keeps threads with at least
  one, ``false`` threads with none;
- ``category`` is triage's category of its newest inbound message (of its newest message when
  none is inbound), and ``category`` keeps threads whose category that is;
- ``archived``: a thread is archived when every one of its messages carries the label
  :data:`ARCHIVED_LABEL` (``mail_update_labels`` with ``thread_id`` and ``labels_add:
  ["archived"]`` archives it); a message arriving later has no such label, so the thread comes
  back, as an archived conversation does in a mail client. ``archived: false`` (the default)
  lists the threads that are not archived, ``true`` only the archived ones;
- ``needs_reply`` (:data:`NEEDS_REPLY_SCORE_SQL`) scores 0 to 1 how much the thread awaits a
  reply from the mailbox, derived from ``is:needs_reply`` and triage: it is at least 0.5 exactly
  when ``is:needs_reply`` holds for the newest message (inbound, and not automated: lists, bulk,
  auto-submitted, reports, no-reply senders and spam are), which scores 0.5, plus 0.2 when it
  asks a question (a ``?`` before a space or the end, in the first 4,000 characters of its new
  text), plus 0.2 when triage found it urgent, plus 0.1 when one of the identity's addresses is
  in its To (not only Cc). Automated newest mail scores 0.1, spam 0, and a thread whose newest
  message is ours (outbound) 0: the mailbox had the last word. So ``needs_reply_gte: 0.5`` lists
  the ``is:needs_reply`` threads, and a higher bound the pressing ones first.

Order and paging: newest first on the key ``(last_at, id)``, and a cursor holds the key of the
last thread shown (a keyset, not an offset), so mail arriving while a client pages never repeats
a thread or skips one that did not change: a new thread, or one that gains a message, moves to
the front, before the pages already read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import asyncpg
import msgspec

from shared.mail.model import Address
from shared.mail.records import ThreadSummary

__all__ = ["ARCHIVED_LABEL", "NEEDS_REPLY_SCORE_SQL", "PARTICIPANTS_SHOWN", "ThreadFilter",
           "list_threads"]

#: The label that archives: a thread all of whose messages carry it is archived.
ARCHIVED_LABEL = "archived"
#: Participants shown per thread; ``participants_truncated`` says when there are more.
PARTICIPANTS_SHOWN = 10

#: The needs-reply score of a thread (module docstring), over its newest message ``lm``, that
#: message's triage ``lt`` (null when not triaged) and the identity's addresses ``$2``.
NEEDS_REPLY_SCORE_SQL = """(CASE
    WHEN lm.direction = 'outbound' THEN 0
    WHEN lt.category = 'spam' THEN 0
    WHEN coalesce(lt.automated, false) THEN 0.1
    ELSE 0.5
      + CASE WHEN left(lm.new_text, 4000) ~ '[?]([[:space:]]|$)' THEN 0.2 ELSE 0 END
      + CASE WHEN lt.urgency = 'high' THEN 0.2 ELSE 0 END
      + CASE WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(lm.to_addresses) e
                          WHERE lower(e->>'address') = any($2::text[])) THEN 0.1 ELSE 0 END
  END)::float8"""


class ThreadFilter(msgspec.Struct, frozen=True, kw_only=True):
    """mail_list_threads' filters (module docstring); None is "any"."""

    label: str | None = None
    category: str | None = None
    needs_reply_gte: float | None = None
    is_unread: bool | None = None
    direction: Literal["inbound", "outbound"] | None = None
    after: datetime | None = None
    before: datetime | None = None
    archived: bool = False


_LIST = f"""
SELECT t.id, t.subject, t.message_count, t.last_at, lm.id AS last_id, lm.direction,
       lm.snippet, agg.unread, agg.labels, agg.archived, cat.category, sc.needs_reply
FROM threads t
CROSS JOIN LATERAL (
    SELECT m.id, m.direction, m.snippet, m.new_text, m.to_addresses FROM messages m
    WHERE m.thread_id = t.id
    ORDER BY coalesce(m.sent_at, m.received_at) DESC, m.id DESC LIMIT 1) lm
LEFT JOIN message_triage lt ON lt.message_id = lm.id
CROSS JOIN LATERAL (SELECT {NEEDS_REPLY_SCORE_SQL} AS needs_reply) sc
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE NOT m.read) AS unread,
           bool_and('{ARCHIVED_LABEL}' = any(m.labels)) AS archived,
           coalesce((SELECT array_agg(DISTINCT l ORDER BY l) FROM messages m2, unnest(m2.labels) l
                     WHERE m2.thread_id = t.id), '{{}}') AS labels
    FROM messages m WHERE m.thread_id = t.id) agg
LEFT JOIN LATERAL (
    SELECT tr.category FROM messages m JOIN message_triage tr ON tr.message_id = m.id
    WHERE m.thread_id = t.id
    ORDER BY m.direction = 'inbound' DESC, coalesce(m.sent_at, m.received_at) DESC, m.id DESC
    LIMIT 1) cat ON true
WHERE t.identity_id = $1 AND :where
ORDER BY t.last_at DESC, t.id DESC
LIMIT :limit"""

# Everyone in the page's threads but the identity, numbered by first appearance (date, message,
# From before To and Cc), at most {shown} per thread; a name is the first one given.
_PEOPLE = """
WITH seen AS (
    SELECT m.thread_id, p.address, p.name,
           row_number() OVER (PARTITION BY m.thread_id
                              ORDER BY coalesce(m.sent_at, m.received_at), m.id, p.n) AS seq
    FROM messages m
    CROSS JOIN LATERAL (
        SELECT m.from_address AS address, m.from_name AS name, 0::bigint AS n
        WHERE m.from_address IS NOT NULL
        UNION ALL
        SELECT lower(x.e->>'address'), x.e->>'name', x.n
        FROM jsonb_array_elements(m.to_addresses || m.cc_addresses) WITH ORDINALITY x(e, n)) p
    WHERE m.thread_id = any($1::text[]) AND p.address <> ALL($2::text[])),
people AS (
    SELECT thread_id, address,
           (array_agg(name ORDER BY seq) FILTER (WHERE coalesce(name, '') <> ''))[1] AS name,
           row_number() OVER (PARTITION BY thread_id ORDER BY min(seq)) AS rank
    FROM seen GROUP BY thread_id, address)
SELECT thread_id, address, name FROM people WHERE rank <= $3 ORDER BY thread_id, rank"""


async def list_threads(conn: asyncpg.Connection, identity_id: str, own_addresses: list[str],
                       wanted: ThreadFilter, *, before_key: tuple[datetime, str] | None,
                       limit: int) -> list[ThreadSummary]:
    """Up to ``limit`` threads of ``identity_id`` that ``wanted`` keeps, newest first, after
    the thread whose key ``(last_at, id)`` is ``before_key`` (None: from the newest).

    ``own_addresses`` are the identity's addr-specs (lower-cased): not participants, and what
    "addressed to this mailbox in To" means. Subjects and labels come whole, participants at most
    :data:`PARTICIPANTS_SHOWN` + 1 (the caller cuts and flags).
    """
    params: list[object] = [identity_id, own_addresses]

    def bind(value: object) -> str:
        params.append(value)
        return f"${len(params)}"

    clauses = [f"agg.archived = {bind(wanted.archived)}"]
    if before_key is not None:
        clauses.append(f"(t.last_at, t.id) < ({bind(before_key[0])}::timestamptz,"
                       f" {bind(before_key[1])}::text)")
    if wanted.label is not None:
        clauses.append(f"{bind(wanted.label)}::text = any(agg.labels)")
    if wanted.category is not None:
        clauses.append(f"cat.category = {bind(wanted.category)}")
    if wanted.needs_reply_gte is not None:
        clauses.append(f"sc.needs_reply >= {bind(float(wanted.needs_reply_gte))}::float8")
    if wanted.is_unread is not None:
        clauses.append(f"(agg.unread > 0) = {bind(wanted.is_unread)}")
    if wanted.direction is not None:
        clauses.append(f"lm.direction = {bind(wanted.direction)}")
    if wanted.after is not None:
        clauses.append(f"t.last_at >= {bind(wanted.after)}::timestamptz")
    if wanted.before is not None:
        clauses.append(f"t.last_at < {bind(wanted.before)}::timestamptz")
    sql = _LIST.replace(":where", " AND ".join(clauses)).replace(":limit", bind(limit))
    rows = await conn.fetch(sql, *params)
    people: dict[str, list[Address]] = {}
    if rows:
        for r in await conn.fetch(_PEOPLE, [r["id"] for r in rows], own_addresses,
                                  PARTICIPANTS_SHOWN + 1):
            people.setdefault(r["thread_id"], []).append(
                Address(address=r["address"], name=r["name"]))
    return [ThreadSummary(
        id=r["id"], subject=r["subject"], participants=people.get(r["id"], []),
        message_count=r["message_count"], unread_count=r["unread"], last_message_id=r["last_id"],
        last_message_at=r["last_at"], last_direction=r["direction"], snippet=r["snippet"],
        labels=list(r["labels"]), category=r["category"], needs_reply=r["needs_reply"],
        archived=r["archived"]) for r in rows]
