"""Triage on a real inbox: the SpamAssassin public corpus (kit, ``corpus/mailboxes/
spamassassin-public``), imported as a new user would, through ``pylota import``'s own path
(``shared.ingest.importer.import_paths``) into a real database. Its parts say which mail is ham
(``easy-ham-*``, ``hard-ham-*``) and which is spam (``spam-*``, SOURCES.md there).

Measured: how much of what lands in ``spam`` is spam (precision), how much spam lands there
(recall), how much of each other category is ham, and how much of ``is:needs_reply`` is spam
(spam is automated, so only spam that triage missed can be there). The table is printed;
README.md ("Trust and triage") reports it.
"""

from __future__ import annotations

import collections
from pathlib import Path


from shared.ingest.importer import import_paths
from shared.mail.triage import CATEGORIES
from shared.search.compile import NEEDS_REPLY_SQL
from shared.tenancy.store import create_identity, create_tenant

_NOT_TOPICS = {"list", "newsletter", "notification", "spam", "other"}
assert _NOT_TOPICS <= set(CATEGORIES)

PARTS = ("easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1", "spam-2")

#: Thresholds, set a little below the measurement (README, "Trust and triage": recall 0.917,
#: precision 0.946; list, newsletter and other at least 0.91 ham; the topic categories 0.86 ham
#: together; 10.5 % of is:needs_reply spam).
SPAM_RECALL = 0.90
SPAM_PRECISION = 0.92
#: Ham share of each category holding at least :data:`LARGE` messages.
HAM_SHARE = 0.90
LARGE = 100
#: Ham share of the topic categories (billing ... security) together: each holds a handful.
TOPIC_HAM_SHARE = 0.85
NEEDS_REPLY_SPAM_SHARE = 0.12


async def _import_parts(conn, identity_id: str, folder: Path) -> dict[str, str]:
    """Import each part in turn; returns the set (ham or spam) of every stored message id."""
    kind_of: dict[str, str] = {}
    for part in PARTS:
        summary = await import_paths(conn, None, identity_id, [folder / f"{part}.mbox.gz"],
                                     mboxrd=False)
        assert not summary.failed
        new = await conn.fetch("SELECT id FROM messages WHERE identity_id = $1"
                               " AND NOT (id = any($2::text[]))", identity_id, list(kind_of))
        assert len(new) == summary.imported
        kind_of.update({r["id"]: "spam" if part.startswith("spam") else "ham" for r in new})
    return kind_of


def _table(counts: dict[str, collections.Counter]) -> str:
    lines = ["| category | messages | ham | spam | share that is ham |",
             "| --- | --- | --- | --- | --- |"]
    for category, c in sorted(counts.items(), key=lambda kv: -sum(kv[1].values())):
        total = c["ham"] + c["spam"]
        lines.append(f"| {category} | {total} | {c['ham']} | {c['spam']} | "
                     f"{c['ham'] / total:.3f} |")
    return "\n".join(lines)


async def test_spam_lands_in_spam_and_the_other_categories_hold_ham(conn, corpus, capsys) -> None:
    tenant = await create_tenant(conn, "corpus")
    identity = await create_identity(conn, tenant.id, "inbox@pylota.test")
    kind_of = await _import_parts(conn, identity.id, corpus / "mailboxes/spamassassin-public")
    assert len(kind_of) == 6046

    rows = await conn.fetch("SELECT message_id, category FROM message_triage"
                            " WHERE identity_id = $1", identity.id)
    assert len(rows) == len(kind_of)
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in rows:
        counts[r["category"]][kind_of[r["message_id"]]] += 1
    spam_total = sum(k == "spam" for k in kind_of.values())
    caught = counts["spam"]["spam"]
    recall = caught / spam_total
    precision = caught / (caught + counts["spam"]["ham"])
    needing_reply = {r["id"] for r in await conn.fetch(
        f"SELECT m.id FROM messages m WHERE m.identity_id = $1 AND {NEEDS_REPLY_SQL}",
        identity.id)}
    spam_needing_reply = sum(kind_of[i] == "spam" for i in needing_reply)
    with capsys.disabled():
        print(f"\nspam: recall {recall:.3f}, precision {precision:.3f}; is:needs_reply "
              f"{len(needing_reply)} messages, {spam_needing_reply} of them spam")
        print(_table(counts))

    assert recall >= SPAM_RECALL and precision >= SPAM_PRECISION
    assert spam_needing_reply <= NEEDS_REPLY_SPAM_SHARE * len(needing_reply)
    for category, c in counts.items():
        if category != "spam" and c["ham"] + c["spam"] >= LARGE:
            assert c["ham"] / (c["ham"] + c["spam"]) >= HAM_SHARE, category
    topics = [c for category, c in counts.items() if category not in _NOT_TOPICS]
    topic_ham = sum(c["ham"] for c in topics)
    assert topic_ham / sum(c["ham"] + c["spam"] for c in topics) >= TOPIC_HAM_SHARE
