"""The rules that decide which thread a message joins.

A message joins the thread of any message it names, and the ids it names are its own Message-ID,
its References and its In-Reply-To (RFC 5322 section 3.6.4): ``thread_keys`` lists them. Only a
message that names no parent at all, and whose subject says it is a reply or forward
(``is_reply_or_forward``), may join by subject, compared as ``subject_key``. This is the
simplified JWZ algorithm (https://www.jwz.org/doc/threading.html) without its container tree:
we keep the thread, not the reply tree.

Pure: no I/O. Applying the rules, the union of threads in the database, is done by ``store``.
"""

from __future__ import annotations

import re

from shared.mail.model import ParsedMessage

__all__ = ["KEY_CHARS", "is_reply_or_forward", "subject_key", "thread_keys"]

# Reply and forward prefixes in the languages our users' mail uses most: English Re/Fw/Fwd,
# German AW/WG, Scandinavian SV/VS, plus a counter ("Re[2]:", "Re^2:") that some clients add.
_REPLY_FORWARD = r"(?:re|fwd?|aw|sv|wg|vs)(?:\s*(?:\[\d+\]|\^\d+))?\s*:"
_LIST_TAG = r"\[[^\[\]]*\]"
_PREFIX = re.compile(rf"^\s*(?:{_REPLY_FORWARD}|{_LIST_TAG})\s*", re.IGNORECASE)
_REPLY_OR_FORWARD = re.compile(rf"^\s*(?:{_LIST_TAG}\s*)*{_REPLY_FORWARD}", re.IGNORECASE)
_WHITESPACE = re.compile(r"\s+")


#: Characters of a subject key kept: enough to tell subjects apart, and an index entry fits a page.
KEY_CHARS = 300


def subject_key(subject: str) -> str:
    """The subject for comparison: leading ``Re:``/``Fwd:``/``[list]`` prefixes removed, any
    number and mix of them, white space collapsed, case folded, at most :data:`KEY_CHARS`
    characters. ``"Re: [dev] RE: Fwd:  Plan"`` gives ``"plan"``.
    """
    previous = None
    while previous != subject:
        previous, subject = subject, _PREFIX.sub("", subject, count=1)
    return _WHITESPACE.sub(" ", subject).strip().casefold()[:KEY_CHARS]


def is_reply_or_forward(subject: str) -> bool:
    """Whether the subject starts (after any ``[list]`` tags) with a reply or forward prefix."""
    return _REPLY_OR_FORWARD.match(subject) is not None


def thread_keys(msg: ParsedMessage) -> list[str]:
    """The msg-ids that tie ``msg`` to a thread: its Message-ID, then References (oldest first),
    then In-Reply-To, without repeats. Empty when the message has none of them.
    """
    keys: list[str] = []
    own = [msg.message_id] if msg.message_id else []
    for key in (*own, *msg.references, *msg.in_reply_to):
        if key not in keys:
            keys.append(key)
    return keys
