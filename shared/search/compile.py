"""Compile a parsed query (``query.Node``) into a SQL condition over ``messages m``.

Pure: it builds text and a parameter list, and runs nothing. Each node becomes one boolean SQL
expression; parameters are numbered from the caller's offset, so the condition can sit inside a
larger statement. Words and phrases match the full-text index (``tsv``, English stemming with
accents folded), quoted text included; operators match columns.

Read as the QA kit reads them: ``from:``/``to:`` with a whole address match that address, with
``@domain`` the domain, otherwise part of the address or display name; ``subject:`` is a
case-insensitive substring of the subject with white space collapsed; ``after:D`` is on or after D
00:00 and ``before:D`` strictly before D 00:00 in the tenant's time zone.

A word made only of stop words ("the") matches everything rather than nothing, and excluded
(``-the``) excludes nothing: stop words are not in the index.

A word or phrase also matches a message when the ready text of one of its attachments holds it
(``attachment_texts.tsv``, which the batch workers fill: ``shared.extract``). Where the
identities in scope are known (:func:`compile_query`'s ``identities``), this is an uncorrelated
subquery giving message ids, which PostgreSQL computes once from the GIN index of
``attachment_texts`` and ORs with the messages' own GIN index; elsewhere (checking a few rows) it
is a per-message ``EXISTS``.

``ref:V`` and ``custom:NAME:V`` match the references extracted at ingest (``refs.py``), by every
form :func:`~shared.mail.refs.lookup_forms` gives V. ``is:needs_reply`` is an inbound message that
is the last of its thread (nothing later, from either side) and that triage did not find automated
(``shared.mail.triage``: list, bulk, auto-submitted, report or no-reply mail). ``category:C``
matches the category triage gave the message. ``thread:T`` matches the messages of thread T, or of
the thread T was merged into (``thread_aliases``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from shared.search.query import And, Node, Not, Operator, OperatorName, Or, Phrase, Term
from shared.mail.refs import lookup_forms

__all__ = ["Compiled", "compile_query", "without_words", "words_of", "NEEDS_REPLY_SQL"]

#: ``is:needs_reply`` over ``messages m`` (module docstring).
NEEDS_REPLY_SQL = """(m.direction = 'inbound'
  AND NOT EXISTS (SELECT 1 FROM messages l WHERE l.thread_id = m.thread_id AND l.id <> m.id
      AND (coalesce(l.sent_at, l.received_at), l.id) > (coalesce(m.sent_at, m.received_at), m.id))
  AND NOT EXISTS (SELECT 1 FROM message_triage t WHERE t.message_id = m.id AND t.automated))"""


def _literal(value: str) -> str:
    """``value`` for a LIKE pattern, its wildcards and escape character taken literally."""
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _like(value: str) -> str:
    return f"%{_literal(value)}%"


@dataclass
class Compiled:
    """A SQL condition, its parameters (numbered after ``first``), and the positive text terms
    (their ``tsquery`` SQL) to rank by."""

    first: int
    params: list[Any] = field(default_factory=list)
    rank_terms: list[str] = field(default_factory=list)
    #: Compile the loose form (:func:`compile_query`): words of a phrase in any order and place.
    loose: bool = False
    #: Whether the loose form differs from the exact one (there was a phrase to loosen).
    loosened: bool = False
    #: SQL of the ``text[]`` of identity ids in scope, for the attachment-text match
    #: (module docstring); None to match attachment text per message.
    identities: str | None = None

    def bind(self, value: Any) -> str:
        self.params.append(value)
        return f"${self.first + len(self.params) - 1}"


def _text(c: Compiled, text: str, positive: bool) -> str:
    # The loose form binds the same parameters in the same order, so both forms share one list.
    # A single word is left as it is (one lexeme has no positions to check), so the loose form of
    # a query without phrases is the query itself.
    loose = c.loose and len(re.findall(r"\w+", text)) > 1
    fn = "plainto_tsquery" if loose else "phraseto_tsquery"
    c.loosened = c.loosened or loose
    tsq = f"{fn}('en_unaccent', {c.bind(text)})"
    if "-" in text:  # "Acked-by" also matches "Acked By:" (punctuation between words is free)
        tsq = f"({tsq} || {fn}('en_unaccent', {c.bind(text.replace('-', ' '))}))"
    if positive:
        c.rank_terms.append(tsq)
        return f"(numnode({tsq}) = 0 OR m.tsv @@ {tsq} OR {_in_attachments(c, tsq)})"
    if loose:  # under a NOT: match less, so that NOT matches more
        return "false"
    # Under a NOT, stop words alone match nothing, so that "-the" excludes nothing (it excluded
    # everything: found by an attack).
    return f"(numnode({tsq}) > 0 AND (m.tsv @@ {tsq} OR {_in_attachments(c, tsq)}))"


def _in_attachments(c: Compiled, tsq: str) -> str:
    # attachment_texts.tsv is null unless the text is ready.
    if c.identities is None:
        return ("(m.has_attachment AND EXISTS (SELECT 1 FROM attachments a JOIN attachment_texts x"
                f" ON x.attachment_id = a.id WHERE a.message_id = m.id AND x.tsv @@ {tsq}))")
    return ("m.id = any(ARRAY(SELECT a.message_id FROM attachment_texts x JOIN attachments a"
            f" ON a.id = x.attachment_id WHERE x.identity_id = any({c.identities})"
            f" AND x.tsv @@ {tsq}))")


def _people(c: Compiled, column_sql: str, value: str) -> str:
    if value.startswith("@"):
        # "to:@%" matched every recipient (found by an attack)
        return f"{column_sql} LIKE {c.bind('%' + _literal(value))}"
    if "@" in value:
        return f"{column_sql} = {c.bind(value)}"
    return f"{column_sql} ILIKE {c.bind(_like(value))}"


def _recipients(c: Compiled, value: str) -> str:
    inner = _people(c, "e->>'address'", value)
    name = ""
    if "@" not in value:
        name = f" OR e->>'name' ILIKE {c.bind(_like(value))}"
    return ("EXISTS (SELECT 1 FROM jsonb_array_elements(m.to_addresses || m.cc_addresses) e"
            f" WHERE {inner}{name})")


def _sender(c: Compiled, value: str) -> str:
    if value.startswith("@"):  # the expression of index messages_identity_sender_domain
        return f"split_part(m.from_address, '@', -1) = {c.bind(value[1:])}"
    cond = _people(c, "m.from_address", value)
    if "@" not in value:
        cond = f"({cond} OR m.from_name ILIKE {c.bind(_like(value))})"
    return cond


def _instant(c: Compiled, value: str, time_zone: str) -> str:
    if len(value) == 10:  # a date: midnight in the tenant's zone
        return f"({c.bind(value)}::text::date::timestamp AT TIME ZONE {c.bind(time_zone)}::text)"
    return f"{c.bind(value)}::text::timestamptz"


def _operator(c: Compiled, op: Operator, time_zone: str) -> str:
    name, v = op.name, op.normalized
    date_sql = "coalesce(m.sent_at, m.received_at)"
    match name:
        case OperatorName.FROM:
            return _sender(c, v)
        case OperatorName.TO:
            return _recipients(c, v)
        case OperatorName.PARTICIPANT:
            return f"({_sender(c, v)} OR {_recipients(c, v)})"
        case OperatorName.SUBJECT:
            return f"regexp_replace(m.subject, '\\s+', ' ', 'g') ILIKE {c.bind(_like(v))}"
        case OperatorName.AFTER:
            return f"{date_sql} >= {_instant(c, v, time_zone)}"
        case OperatorName.BEFORE:
            return f"{date_sql} < {_instant(c, v, time_zone)}"
        case OperatorName.NEWER_THAN:
            return f"{date_sql} >= now() - make_interval(days => {c.bind(int(v))})"
        case OperatorName.OLDER_THAN:
            return f"{date_sql} < now() - make_interval(days => {c.bind(int(v))})"
        case OperatorName.HAS:
            return "m.has_attachment"
        # has_attachment is set exactly when attachments rows exist (store.py); testing it first
        # spares the probe of the attachments table for the nine messages in ten without any
        case OperatorName.FILENAME:
            return ("(m.has_attachment AND EXISTS (SELECT 1 FROM attachments a"
                    f" WHERE a.message_id = m.id AND a.filename ILIKE {c.bind(_like(v))}))")
        case OperatorName.TYPE:
            # The kind ingest stored (shared.mail.attachment_types), as the facet counts it.
            return ("(m.has_attachment AND EXISTS (SELECT 1 FROM attachments a"
                    f" WHERE a.message_id = m.id AND a.attachment_type = {c.bind(v)}))")
        case OperatorName.IN:
            return f"m.direction = {c.bind(v)}"
        case OperatorName.IS if v in ("unread", "read"):
            return "NOT m.read" if v == "unread" else "m.read"
        case OperatorName.IS:
            return NEEDS_REPLY_SQL
        case OperatorName.REF:
            return ("EXISTS (SELECT 1 FROM message_refs r WHERE r.message_id = m.id"
                    f" AND r.value = any({c.bind(lookup_forms(v))}::text[]))")
        case OperatorName.CUSTOM:
            name, _, value = v.partition(":")
            return ("EXISTS (SELECT 1 FROM message_refs r WHERE r.message_id = m.id"
                    f" AND r.kind = {c.bind('custom:' + name)} AND r.value = {c.bind(value)})")
        case OperatorName.LABEL:
            return f"{c.bind(v)} = any(m.labels)"
        case OperatorName.THREAD:
            # An id merged into another thread finds the merged thread (thread_aliases).
            t = c.bind(v)
            return (f"m.thread_id = coalesce((SELECT a.thread_id FROM thread_aliases a"
                    f" WHERE a.alias_id = {t}), {t})")
        case OperatorName.CATEGORY:
            # The identity lets the planner start from the (identity_id, category) index when
            # the category is rare (2,000 "claims" of 100,000: 17 ms against 3 ms).
            return ("EXISTS (SELECT 1 FROM message_triage t WHERE t.message_id = m.id"
                    f" AND t.identity_id = m.identity_id AND t.category = {c.bind(v)})")
    raise TypeError(f"not an operator: {op!r}")


def _node(c: Compiled, node: Node, time_zone: str, positive: bool) -> str:
    match node:
        case Term(text) | Phrase(text):
            return _text(c, text, positive)
        case Operator():
            return _operator(c, node, time_zone)
        case Not(inner):
            return f"NOT ({_node(c, inner, time_zone, not positive)})"
        case Or(nodes):
            return "(" + " OR ".join(_node(c, n, time_zone, positive) for n in nodes) + ")"
        case And(nodes):
            return "(" + " AND ".join(_node(c, n, time_zone, positive) for n in nodes) + ")"
    raise TypeError(f"not a query node: {node!r}")


def without_words(node: Node | None) -> Node | None:
    """``node`` with its words and phrases taken out, for semantic matching (the words are
    compared by meaning instead). An OR with a word in it goes whole, since a word alternative
    may match by meaning. An exclusion stays whole: ``-booking`` leaves out every message that
    holds the word, in every mode (semantic and hybrid search ranked "Booking request" first
    for ``van -booking``: found by an attack). None when nothing is left."""
    match node:
        case Term() | Phrase() | None:
            return None
        case Operator() | Not():
            return node
        case Or(nodes):
            kept = [without_words(n) for n in nodes]
            return node if all(k == n for k, n in zip(kept, nodes)) else None
        case And(nodes):
            left = [k for k in (without_words(n) for n in nodes) if k is not None]
            return None if not left else left[0] if len(left) == 1 else And(tuple(left))
    raise TypeError(f"not a query node: {node!r}")


def words_of(node: Node | None) -> str:
    """The words and phrases of ``node`` outside any exclusion, in order: the text that semantic
    search embeds."""
    match node:
        case Term(text) | Phrase(text):
            return text
        case Or(nodes) | And(nodes):
            return " ".join(w for w in (words_of(n) for n in nodes) if w)
    return ""


def compile_query(root: Node | None, *, first: int, time_zone: str, loose: bool = False,
                  identities: str | None = None) -> tuple[str, Compiled]:
    """SQL for ``root`` over ``messages m``, with parameters numbered from ``$first``.

    With ``loose``, a condition every message matching ``root`` satisfies, with the same
    parameters, that the full-text index answers without reading any message's ``tsv``: a word or
    phrase matches when all its words are present, in any order and place (an AND of lexemes
    needs no recheck; word positions do), and a word or phrase under a NOT excludes only when it
    has no words at all. The search narrows with it before checking the exact condition.

    ``identities``: SQL of the identity ids in scope (a ``text[]``), so that words are looked for
    in attachment text with one subquery (module docstring).
    """
    compiled = Compiled(first=first, loose=loose, identities=identities)
    if root is None:
        return "true", compiled
    return _node(compiled, root, time_zone, True), compiled
