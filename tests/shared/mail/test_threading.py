"""``shared.mail.threading``: the rules for which thread a message joins."""

from __future__ import annotations

import pytest

from shared.mail.model import ParsedMessage
from shared.mail.threading import is_reply_or_forward, subject_key, thread_keys


@pytest.mark.parametrize(
    ("subject", "key"),
    [
        ("Plan", "plan"),
        ("Re: Plan", "plan"),
        ("RE: re:Fwd: FW:  Plan", "plan"),
        ("AW: SV: Plan", "plan"),
        ("[dev] Re: [PATCH 1/2] Plan", "plan"),
        ("Re[2]: Plan", "plan"),
        ("  Re:   Quarterly\n\t plan  ", "quarterly plan"),
        ("Straße", "strasse"),  # casefold, not lower
        ("Regarding: plan", "regarding: plan"),  # only whole prefixes go
        ("Re:", ""),
    ],
)
def test_subject_key(subject: str, key: str) -> None:
    assert subject_key(subject) == key


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("Re: Plan", True),
        ("fwd: Plan", True),
        ("FW:Plan", True),
        ("AW: Plan", True),
        ("[dev] Re: Plan", True),
        ("Plan", False),
        ("[dev] Plan", False),
        ("Regarding the plan", False),
        ("Plan (re: budget)", False),
    ],
)
def test_is_reply_or_forward(subject: str, expected: bool) -> None:
    assert is_reply_or_forward(subject) is expected


def _message(message_id: str | None, references: list[str], in_reply_to: list[str]) -> ParsedMessage:
    return ParsedMessage(
        message_id=message_id, in_reply_to=in_reply_to, references=references, subject="",
        from_=None, to=[], cc=[], reply_to=[], sent_at=None, text="", headers=[], attachments=[],
        defects=[],
    )


def test_thread_keys_order_and_dedup() -> None:
    msg = _message("c@x", ["a@x", "b@x"], ["b@x"])
    assert thread_keys(msg) == ["c@x", "a@x", "b@x"]


def test_thread_keys_without_message_id() -> None:
    assert thread_keys(_message(None, [], ["p@x"])) == ["p@x"]
    assert thread_keys(_message(None, [], [])) == []
