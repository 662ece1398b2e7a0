"""Reading and the built-in composer (``shared.deepsearch.reading``, ``composing``): pure, on
hand-made messages and rankings."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import msgspec

from shared.deepsearch.citations import supported
from shared.deepsearch.composing import choose, claim_for
from shared.deepsearch.evidence import Candidate, Ranking
from shared.deepsearch.question import analyse
from shared.deepsearch.reading import ReadMessage, Sentence, sentences_of

START = datetime(2010, 6, 22, 21, 0, tzinfo=timezone.utc)


def message(n: int, sender: str, text: str, *, reply_to: str | None = None,
            hours: int = 0) -> ReadMessage:
    return ReadMessage(id=f"msg_{n:026d}", thread_id="thr_" + "1" * 26,
                       rfc_message_id=f"m{n}@example.org",
                       in_reply_to=(reply_to,) if reply_to else (), subject="cache index keys",
                       from_name=sender, from_address=f"{sender.split()[0].lower()}@example.org",
                       date=START + timedelta(hours=hours), own_text=text)


def ranking(parts: list[list[tuple[ReadMessage, float]]]) -> Ranking:
    """Candidates (each message's first sentence) with the given score for each part."""
    messages = {m.id: m for part in parts for m, _ in part}
    by_part = []
    for j, part in enumerate(parts):
        by_part.append(tuple(Candidate(
            sentence=Sentence(message_id=m.id, index=0, text=sentences_of(m)[0].text),
            message=m, scores=tuple(score if k == j else 0.0 for k in range(len(parts))))
            for m, score in sorted(part, key=lambda x: -x[1])))
    return Ranking(by_part=tuple(by_part), messages=messages, refused=0)


def test_patches_keep_description_notes_and_diffstat_summary_only() -> None:
    m = message(1, "Jan Janak", "Do not use -C with install. Older versions fail.\n\n"
                "Signed-off-by: Jan Janak <jan@example.org>\n---\n Compile tested.\n\n"
                " Makefile.local |    8 ++++----\n 1 files changed, 4 insertions(+), 4 deletions(-)\n\n"
                "diff --git a/Makefile.local b/Makefile.local\n+install -d $$d\n")
    assert [s.text for s in sentences_of(m)] == [
        "Do not use -C with install.", "Older versions fail.",
        "Signed-off-by: Jan Janak <jan@example.org>", "Compile tested.",
        "1 files changed, 4 insertions(+), 4 deletions(-)"]


def test_a_cover_letters_shortlog_is_not_sentences_but_its_diffstat_summary_is() -> None:
    m = message(1, "Suresh Jayaraman", "Comments are welcome.\n\nSuresh Jayaraman (2):\n"
                "  cifs: register CIFS for caching\n  cifs: add mount option to enable caching\n"
                "\n Kconfig |    9 ++\n 2 files changed, 9 insertions(+)\n\nThanks, Suresh.")
    assert [s.text for s in sentences_of(m)] == [
        "Comments are welcome.", "2 files changed, 9 insertions(+)", "Thanks, Suresh."]


def test_header_lines_of_a_quoted_message_are_not_sentences() -> None:
    m = message(1, "David Miller", "From: Joe Perches <joe@perches.com>\n"
                "Date: Sun, 14 Nov 2010 19:04:58 -0800\n\nApplied.")
    assert [s.text for s in sentences_of(m)] == ["Applied."]


def test_a_follow_up_is_answered_by_the_reply_not_by_older_mail() -> None:
    q = analyse("Jeff didn't like the hostname key. What did he propose instead, and did "
                "Suresh agree to change it?")
    patch = message(1, "Suresh Jayaraman", "Currently, the server objects are keyed by hostname.")
    review = message(2, "Jeff Layton", "Would a tuple of address/family/port be better?",
                     reply_to="m1@example.org", hours=1)
    # the archive rewrote the id the reply names
    reply = message(3, "Suresh Jayaraman", "Good point. I'll fix it up when I do a respin.",
                    reply_to="m2-4QP7MXygkU+dMjc06nkz3ljfA9RmPOcC@public.gmane.org", hours=2)
    chosen = choose(q, ranking([[(review, 0.6), (patch, 0.5)],
                                [(patch, 0.7), (reply, 0.45)]]))
    assert [c.candidate.message.id for c in chosen] == [review.id, reply.id]
    assert chosen[1].quote == "Good point. I'll fix it up when I do a respin."
    claim = claim_for(chosen[1], "UTC")
    assert claim.text == ("Suresh Jayaraman wrote on 22 June 2010: “Good point. I'll fix it up "
                          "when I do a respin.”") and claim.cites == (reply.id,)


def test_no_first_part_no_answer() -> None:
    q = analyse("What did Carl think of the patch?")
    other = message(1, "Stewart Smith", "Reading in inode order saves seeks.")
    assert choose(q, ranking([[(other, 0.9)]])) == []  # the part is about Carl


def test_excluded_people_and_which_classes_are_never_the_answer() -> None:
    alex = message(1, "Alex Botero-Lowry", "I reported the infinite loop.")
    carl = message(2, "Carl Worth", "Priit Laes reported the same thing in IRC.", hours=1)
    q = analyse("Apart from Alex, who else had reported the loop?")
    assert [c.candidate.message.id for c in choose(q, ranking([[(alex, 0.9), (carl, 0.6)]]))] \
        == [carl.id]
    q = analyse("Which commit did the developers identify as the cause?")
    report = message(3, "Justin Mattock", "My bluetooth is not functioning with rc4.")
    assert choose(q, ranking([[(report, 0.9)]])) == []


def test_a_which_answer_named_only_by_the_subject_shows_the_subject() -> None:
    """"Which vehicle …": the chosen sentence does not name it, the subject does, so the answer
    says the subject, and the citation check still passes it."""
    claim_mail = msgspec.structs.replace(
        message(1, "Harbour Claims", "Please send photos of the damage and the hire agreement."),
        subject="Claim CLM-5531: damage to vehicle AB12 CDE")
    q = analyse("Which vehicle was damaged in the claim?")
    [chosen] = choose(q, ranking([[(claim_mail, 0.7)]]))
    claim = claim_for(chosen, "UTC")
    assert claim.text == ("Harbour Claims wrote on 22 June 2010 under the subject Claim CLM-5531: "
                          "damage to vehicle AB12 CDE: “Please send photos of the damage and the "
                          "hire agreement.”")
    assert supported(claim, {claim_mail.id: claim_mail}, "UTC")
    # a sentence that names the vehicle itself needs no subject
    named = msgspec.structs.replace(
        message(2, "Harbour Claims", "The vehicle AB12 CDE has a scratch on the rear door."),
        subject="Claim CLM-5531: damage to vehicle AB12 CDE")
    [chosen] = choose(q, ranking([[(named, 0.7)]]))
    assert "under the subject" not in claim_for(chosen, "UTC").text


def test_how_much_or_how_many_is_answered_only_by_an_amount() -> None:
    """Asked what something cost, a sentence without a sum of money is no answer, however close
    its words ("How much did the van hire cost?" quoted the booking's dates: found by a new
    user); asked how many, one without a number the question does not hold is none either."""
    booking = message(1, "Jo Marsh", "We would like to hire a van from 8 to 12 September.")
    invoice = message(2, "Accounts", "The van hire costs GBP 480 for the five days.", hours=1)
    q = analyse("How much did the van hire cost?")
    assert choose(q, ranking([[(booking, 0.9)]])) == []
    [chosen] = choose(q, ranking([[(booking, 0.9), (invoice, 0.6)]]))
    assert chosen.candidate.message.id == invoice.id
    q = analyse("How many files did the 2 patches touch?")
    vague = message(3, "Ingmar", "The 2 patches touch several files.")
    counted = message(4, "Ingmar", "They touch three files in all.", hours=1)
    assert choose(q, ranking([[(vague, 0.9)]])) == []
    [chosen] = choose(q, ranking([[(vague, 0.9), (counted, 0.6)]]))
    assert chosen.candidate.message.id == counted.id


def test_when_something_is_is_answered_by_a_stated_date_when_one_is_there() -> None:
    """"When is invoice INV-77120 due?" quoted "Please find attached invoice INV-77120 …", the
    closer words, over the sentence stating the date (found by a new user). A "when" about
    sending is answered by the message's own date, which every answer states."""
    attached = message(1, "Accounts", "Please find attached invoice INV-77120 for September.")
    due = message(2, "Accounts", "Amount due: GBP 4,812.50, payable by 3 October 2026.")
    q = analyse("When is invoice INV-77120 due?")
    [chosen] = choose(q, ranking([[(attached, 0.9), (due, 0.6)]]))
    assert chosen.candidate.message.id == due.id
    [chosen] = choose(q, ranking([[(attached, 0.9)]]))  # no date stated anywhere: the best
    assert chosen.candidate.message.id == attached.id
    # the invoice's own text names its month, closer in words: the day it is due answers
    # (found by a new user once attachment text was read)
    invoice = message(3, "Accounts",
                      "INVOICE INV-77120 Fleet leasing, September 2026 Total: GBP 4,812.50")
    [chosen] = choose(q, ranking([[(invoice, 0.9), (due, 0.6)]]))
    assert chosen.candidate.message.id == due.id
    [chosen] = choose(q, ranking([[(invoice, 0.9), (attached, 0.8)]]))  # a month is a date
    assert chosen.candidate.message.id == invoice.id
    sent = analyse("When did Accounts send invoice INV-77120?")
    [chosen] = choose(sent, ranking([[(attached, 0.9), (due, 0.6)]]))
    assert chosen.candidate.message.id == attached.id
