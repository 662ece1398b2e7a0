"""Evidence ranking (``shared.deepsearch.evidence``): the shape of the answer a part asks for,
on hand-made messages, with a model that finds every sentence equally close to the question."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

import msgspec
import pytest
import numpy as np

from shared.deepsearch.evidence import holds_amount, rank_evidence
from shared.deepsearch.question import analyse
from shared.deepsearch.reading import ReadMessage


def _message(n: int, subject: str, text: str) -> ReadMessage:
    return ReadMessage(id=f"msg_{n:026d}", thread_id=f"thr_{n:026d}",
                       rfc_message_id=f"m{n}@example.org", in_reply_to=(), subject=subject,
                       from_name="Accounts", from_address="accounts@example.org",
                       date=datetime(2026, 9, 19, 9, 0, tzinfo=timezone.utc), own_text=text)


async def _same_meaning(texts: Sequence[str]) -> np.ndarray:
    return np.ones((len(texts), 4), dtype=np.float32) / 2


async def _go_on() -> None:
    return None


async def _best(question: str, *messages: ReadMessage) -> str:
    ranking = await rank_evidence(analyse(question), messages, {}, _same_meaning, _go_on)
    return ranking.by_part[0][0].sentence.text


INVOICE = _message(1, "Invoice INV-77120 for September",
                   "Please find attached invoice INV-77120 for fleet leasing in September.\n"
                   "Amount due: GBP 4,812.50, payable by 3 October 2026.")
PENALTY = _message(2, "Penalty charge notice PCN KT09917332",
                   "A penalty charge notice KT09917332 was issued on 28 September 2026 at "
                   "Station Road.\nPay GBP 35 within 14 days, or challenge it online.")


async def test_how_much_is_answered_by_a_sum_of_money_not_by_a_code_or_a_date() -> None:
    assert await _best("How much is the penalty?", PENALTY) == (
        "Pay GBP 35 within 14 days, or challenge it online.")
    assert await _best("How much is the September invoice?", INVOICE) == (
        "Amount due: GBP 4,812.50, payable by 3 October 2026.")


async def test_when_is_answered_by_a_sentence_holding_a_date() -> None:
    assert await _best("When is the September invoice due?", INVOICE) == (
        "Amount due: GBP 4,812.50, payable by 3 October 2026.")


async def test_who_sent_reads_the_senders_name_as_well() -> None:
    """"Who sent the insurance claim?" was insufficient_evidence on the demo mailbox: only the
    sender's name, "Harbour Insurance Claims", says "insurance" (found by a new user)."""
    claim = msgspec.structs.replace(
        _message(3, "Claim CLM-5531: damage to vehicle AB12 CDE",
                 "We have opened claim CLM-5531 for the scratch on the rear door."),
        from_name="Harbour Insurance Claims", from_address="claims@harbour-insurance.example")
    sent = await rank_evidence(analyse("Who sent the insurance claim?"), [claim, PENALTY], {},
                               _same_meaning, _go_on)
    said = await rank_evidence(analyse("Who mentioned the insurance claim?"), [claim, PENALTY],
                               {}, _same_meaning, _go_on)
    best_sent, best_said = sent.by_part[0][0], said.by_part[0][0]
    assert best_sent.message.id == claim.id
    assert best_sent.scores[0] > said.by_part[0][[c.message.id for c in said.by_part[0]].index(
        claim.id)].scores[0]  # the sender's name counted only when the question asks who sent


async def test_reading_many_messages_gives_the_event_loop_back() -> None:
    """Reading is CPU work on the worker's loop: it awaits the checkpoint every few messages
    and sentences, where other jobs run and a call past its deadline stops (an attack held a
    worker for 15 s with 120 long messages, and other callers' jobs never started)."""
    from shared.deepsearch.evidence import YIELD_MESSAGES, YIELD_SENTENCES

    long_text = " ".join(f"Sentence {i} of the quarterly report is here." for i in range(300))
    messages = [_message(10 + n, "Quarterly report", long_text) for n in range(4 * YIELD_MESSAGES)]
    calls = 0

    async def counting() -> None:
        nonlocal calls
        calls += 1

    await rank_evidence(analyse("What does the quarterly report say?"), messages, {},
                        _same_meaning, counting)
    sentences = 300  # the first message's; later ones repeat it and are not read again
    assert calls >= 2 * (len(messages) // YIELD_MESSAGES) + sentences // YIELD_SENTENCES

    class Stop(Exception):
        pass

    async def past_deadline() -> None:
        raise Stop

    with pytest.raises(Stop):
        await rank_evidence(analyse("What does the quarterly report say?"), messages, {},
                            _same_meaning, past_deadline)


@pytest.mark.parametrize(("question", "sentence", "answers"), [
    # a "how much" without a unit asks for a sum: a phone number is no answer (a new user's)
    ("How much did the Nigerian letter promise?",
     "If you have received a letter, please fax a copy of that letter to (202) 406-5031.", False),
    ("How much did the Nigerian letter promise?", "TRANSFER OF US$ 22.5 M to your account.", True),
    ("How much does the hire cost?", "The hire is 120 a day.", False),
    ("How much does the hire cost?", "The hire is £120 a day.", True),
    # with a unit, any number the question does not hold answers
    ("How much memory does the build need?", "It needs 512 MB.", True),
    ("How many patches were in the series?", "The series has 44 patches.", True),
    ("How many patches were in the series?", "Thanks for the review.", False),
])
def test_an_amount_answers_how_much_and_how_many(question: str, sentence: str,
                                                 answers: bool) -> None:
    assert holds_amount(analyse(question).parts[0], sentence, question) is answers
