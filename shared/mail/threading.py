"""The rules that decide which thread a message joins.

A message joins the thread of any message it names, and the ids it names are its own Message-ID,
its References and its In-Reply-To (RFC 5322 section 3.6.4): ``thread_keys`` lists them. Only a
message that names no parent at all, and whose subject says it is a reply or forward
(``is_reply_or_forward``), may join by subject, compared as ``subject_key``, and only a thread
its sender already takes part in (From, To or Cc of one of its messages), unless the identity
wrote it: a stranger's "Re: <subject>" starts a thread of its own. This is the
simplified JWZ algorithm (https://www.jwz.org/doc/threading.html) without its container tree:
we keep the thread, not the reply tree.

:class:`ThreadUnion` applies the rules to a run of messages in memory, one after another, from
the database rows the run touches; ``store`` loads those rows and writes the outcome.

Pure: no I/O. Called by ``store``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from shared.ids import Prefix, new_id
from shared.mail.model import ParsedMessage

__all__ = ["KEY_CHARS", "is_reply_or_forward", "subject_key", "thread_keys", "participants_of",
           "RootRank", "ThreadState", "Placement", "ThreadUnion"]

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


#: A message's claim to give its thread the subject: (answers another message, date, message id);
#: the least wins, so a root (one naming no parent) before any answer, then the earliest.
RootRank = tuple[bool, datetime, str]


@dataclass
class ThreadState:
    """What the rules read of one thread while a run of messages is placed: when it was created
    (the oldest wins a merge), its newest message's date and its subject key (the Re:/Fwd:
    fallback picks the newest thread with the key), and the rank and subject of the message that
    gives the thread its subject."""

    id: str
    created_at: datetime
    last_at: datetime | None
    subject_key: str
    root: tuple[RootRank, str] | None
    #: The addresses in From, To and Cc of its messages, for a thread a Re:/Fwd: without parent
    #: may join by subject (None: not read, and so not joined by subject).
    participants: set[str] | None = None


@dataclass
class Placement:
    """Where :meth:`ThreadUnion.place` put a message: its thread, whether that thread is new,
    and the threads merged into it."""

    thread_id: str
    created: bool
    merged: list[str] = field(default_factory=list)


class ThreadUnion:
    """The threads a run of messages touches, in memory, placed one message after another as
    the store's rules place them in the database: join the threads the message's keys map to
    (merging several into the oldest), else by subject for a Re:/Fwd: without parent, else a
    new thread. Built from the database rows of every key the run names and of every thread its
    fallback subjects match, it decides a run of messages exactly as one message at a time
    would; the store writes the outcome (``shared.mail.store.insert_messages``).

    A tie for the newest thread with a subject key (equal ``last_at``), which the database
    answers in no particular order, goes to the greater thread id.
    """

    def __init__(self, refs: dict[str, str], threads: list[ThreadState]) -> None:
        #: msg-id → thread id, as ``thread_refs`` holds it (merged ids followed by :meth:`live`).
        self.refs = dict(refs)
        self.threads = {t.id: t for t in threads}
        #: Thread id → the thread it merged into.
        self.merged_into: dict[str, str] = {}
        self._last_created: datetime | None = None

    def live(self, thread_id: str) -> str:
        """The thread ``thread_id`` is now: itself, or the one it was merged into."""
        while thread_id in self.merged_into:
            thread_id = self.merged_into[thread_id]
        return thread_id

    def _created_now(self) -> datetime:
        # Strictly after every thread before it, as separate transactions' now() would be.
        now = datetime.now(UTC)
        if self._last_created is not None and now <= self._last_created:
            now = self._last_created + timedelta(microseconds=1)
        self._last_created = now
        return now

    def _by_subject(self, key: str, sender: str | None, ours: bool) -> str | None:
        # Only a thread the sender already takes part in (or any, for our own mail): a stranger
        # writing "Re: <subject>" joined the conversation, and deep search answered from it
        # (found by an attack).
        found = [t for t in self.threads.values()
                 if t.subject_key == key and t.id not in self.merged_into
                 and t.participants is not None and (ours or sender in t.participants)]
        if not found:
            return None
        return max(found, key=lambda t: (t.last_at is not None, t.last_at or _NEVER, t.id)).id

    def place(self, message_id: str, msg: ParsedMessage, when: datetime, *,
              ours: bool = False) -> Placement:
        """Place the message ``message_id`` (``msg``, dated ``when``; ``ours`` when the identity
        wrote it) and update the threads."""
        keys = thread_keys(msg)
        found = sorted({self.live(self.refs[k]) for k in keys if k in self.refs},
                       key=lambda t: (self.threads[t].created_at, t))
        if not found and not msg.in_reply_to and not msg.references \
                and is_reply_or_forward(msg.subject):
            key = subject_key(msg.subject)
            sender = msg.from_.address if msg.from_ else None
            by_subject = self._by_subject(key, sender, ours) if key else None
            found = [by_subject] if by_subject else []
        if found:
            placement = Placement(thread_id=found[0], created=False, merged=found[1:])
        else:
            placement = Placement(thread_id=new_id(Prefix.THREAD), created=True)
            self.threads[placement.thread_id] = ThreadState(
                id=placement.thread_id, created_at=self._created_now(), last_at=when,
                subject_key=subject_key(msg.subject), root=None, participants=set())
        target = self.threads[placement.thread_id]
        for other in placement.merged:
            self.merged_into[other] = target.id
            merged = self.threads[other]
            target.last_at = _latest(target.last_at, merged.last_at)
            if target.participants is not None and merged.participants is not None:
                target.participants |= merged.participants
            if merged.root is not None and (target.root is None or merged.root < target.root):
                target.root = merged.root
        for key in keys:
            self.refs[key] = target.id
        if target.participants is not None:
            target.participants |= participants_of(msg)
        target.last_at = _latest(target.last_at, when)
        rank = ((bool(msg.in_reply_to or msg.references), when, message_id), msg.subject)
        if target.root is None or rank < target.root:
            target.root = rank
        target.subject_key = subject_key(target.root[1])
        return placement


_NEVER = datetime.min.replace(tzinfo=UTC)


def participants_of(msg: ParsedMessage) -> set[str]:
    """The addr-specs in the From, To and Cc of ``msg``."""
    return {a.address for a in (*([msg.from_] if msg.from_ else []), *msg.to, *msg.cc)}


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else max(a, b)
