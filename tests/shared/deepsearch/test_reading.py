"""What deep search reads of a message (``shared.deepsearch.reading``): its own text up to
``MAX_OWN_CHARS``, however long the stored text is (the attack report of 3 December 2026: a
30 MB message held a worker's event loop past the call's budget)."""

from __future__ import annotations

from shared.db import Database
from shared.deepsearch.reading import MAX_OWN_CHARS, read_messages, sentences_of
from tests.shared.search.conftest import Mailbox


async def test_a_huge_message_is_read_up_to_the_limit(mailbox: Mailbox, pool: Database) -> None:
    filler = "The weekly report lists nothing new this week. " * (3 * MAX_OWN_CHARS // 47)
    mid = await mailbox.add("huge", sender="Ann Example <ann@acme.example>", subject="Reports",
                            body="The first line says the depot opens at nine.\n\n" + filler
                                 + "\n\nThe depot code past the limit is 4417.")
    async with pool.acquire() as conn:
        (message,) = await read_messages(conn, [mailbox.identity_id], [], [mid])
    assert message.own_text.startswith("The first line says the depot opens at nine.")
    assert len(message.own_text) == MAX_OWN_CHARS
    sentences = [s.text for s in sentences_of(message)]
    assert sentences[0] == "The first line says the depot opens at nine."
    assert not any("4417" in s for s in sentences)
