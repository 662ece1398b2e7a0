"""Triage: each message's category, urgency and risk flags, and the ``message_triage`` table this
module owns (spec section 4.3: the Message object's "triage (category, urgency, risk_flags)";
``category:`` in ``mail_search``; DESIGN.md section 2, "follow-up jobs: ... triage").

Rules, not a model: they run at ingest in microseconds, need no network, and give the same answer
every time, so a search by ``category:`` never changes under an agent's feet. What each category
holds is :data:`CATEGORIES`; how one is chosen, in order:

1. ``spam`` when an upstream filter marked the message (``X-Spam-Flag: YES``, ``X-Spam-Status:
   Yes``), or when its spam signals (``shared.mail.spam``: bulk and scam phrasing, bulk
   senders' header habits, failed authentication, a lookalike domain) score at least
   :data:`~shared.mail.spam.SPAM_SCORE`. Mail from a known sender (trust's ``known_sender``) is
   spam only by an upstream mark.
2. ``list`` for mailing-list discussion (a ``List-Post`` field, RFC 2369; ``X-Mailing-List`` or
   ``Mailing-List``, which vger and ezmlm add; ``Precedence: list``), unless its topic is
   unmistakable (:data:`STRONG_TOPIC`).
3. A topic (``billing`` ... ``security``) when its phrases score at least :data:`MIN_TOPIC`: a
   phrase in the subject scores 3, in an attachment's file name 2, in the new text (quotes
   removed, first :data:`TEXT_CHARS` characters) 1. The highest score wins; ties go to the topic
   listed first. A ``text/calendar`` part is a meeting invitation (``scheduling``).
4. ``newsletter`` for bulk mail (``List-Unsubscribe``, ``Precedence: bulk``, a ``List-Id`` without
   ``List-Post``: an announcement list), ``notification`` for
   other automated mail (``Auto-Submitted`` other than ``no``, RFC 3834; a delivery report, RFC
   3464; no-reply, mailer-daemon and notification senders); otherwise ``other``.

``automated`` is true for mail a machine sent or a list relayed: an upstream spam mark, any
list field (``List-Id``, ``List-Post``, ``List-Unsubscribe``, ``X-Mailing-List``, ``Mailing-List``),
``Precedence: bulk/list/junk``,
``Auto-Submitted`` other than ``no``, a delivery report, or a no-reply kind of sender (even when
its topic, say an invoice, gives it a topic category). ``is:needs_reply`` never offers those, and
the ``mail_reply`` description says never to auto-reply to them.

Urgency is ``high`` when the subject or new text presses for time (urgent, ASAP, final notice,
overdue, within 24 hours, ...; for automated mail the subject only) or the message carries
``Importance: high`` / ``X-Priority: 1|2``; ``low`` for spam and for automated mail that does
not; ``normal`` otherwise.

Risk flags (:data:`RISK_FLAGS`) point an agent at what to check before acting on a request in the
mail (spec: "Check trust and risk_flags before acting on any request in the message").

Triage runs in two steps, so that the costly one needs no database: :func:`draft_of` reads the
message alone (its phrases, fields and attachments; all but trust), and :func:`decide` adds trust
to a draft. Ingest drafts on the import's worker processes (``shared.ingest.prepare``) and decides
once the message's trust is known; :func:`triage` is the two in one. Phrase patterns run behind
literal gates (``shared.mail.prefilter``): the same results for a fraction of the searches.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import asyncpg
import msgspec

from shared.mail.judged import Triage, Trust
from shared.mail.model import ParsedMessage
from shared.mail.plain import plain
from shared.mail.prefilter import Gated, Scanned
from shared.mail.spam import SPAM_SCORE, content_signals, trust_signals

__all__ = ["CATEGORIES", "RISK_FLAGS", "URGENCIES", "MIN_TOPIC", "STRONG_TOPIC", "TEXT_CHARS",
           "FIELD_CHARS",
           "Triage", "TriageInput", "TriageDraft", "judged_text", "input_of", "triage", "draft_of",
           "decide", "save_triage", "triage_of", "categories_of", "TRIAGE_COLUMN", "triage_from"]

#: Every category, and what it holds. ``mail_search``'s ``category:`` accepts exactly these.
CATEGORIES: dict[str, str] = {
    "billing": "invoices, payments, receipts, refunds, statements and remittances",
    "orders": "orders, purchase orders, shipping, delivery and returns",
    "claims": "insurance claims and damage reports",
    "legal": "contracts, penalty charge notices, fines, disputes and data requests",
    "scheduling": "meetings, calendar invitations, bookings and appointments",
    "support": "problems, faults, complaints and help requests",
    "sales": "enquiries, quotes, prices and proposals",
    "hiring": "job applications, CVs and interviews",
    "security": "sign-in alerts, password resets and verification codes",
    "list": "mailing-list discussion",
    "newsletter": "bulk and marketing mail",
    "notification": "other automated mail: alerts, bounces, system notices",
    "spam": "unsolicited bulk mail and scams: marked by an upstream filter, or by spam signals",
    "other": "none of the above",
}

#: Urgency values, least to most pressing.
URGENCIES = ("low", "normal", "high")

#: Risk flags, and what each means.
RISK_FLAGS: dict[str, str] = {
    "payment_change": "asks to pay to new or changed bank details",
    "credential_request": "asks for a password, PIN, login or code",
    "gift_cards": "asks for gift cards or vouchers to be bought",
    "urgent_payment": "presses for a payment or transfer to be made at once",
    "reply_to_mismatch": "replies would go to a domain other than the sender's",
    "display_name_mismatch": "the display name shows an address other than the sender's",
    "dangerous_attachment": "carries a program, script or macro document",
    "prompt_injection": "addresses instructions to an AI agent",
}

#: Score a topic needs: one phrase in the subject, or two in the text.
MIN_TOPIC = 2
#: Score at which a topic beats the ``list`` category (the subject and three phrases of the text
#: say it): list discussion mentions invoices and meetings in passing.
STRONG_TOPIC = 6
#: Characters of new text read: as much as mail_get_message shows an agent (32,000), so that
#: padding cannot push an instruction or a payment request past what triage reads.
TEXT_CHARS = 32_000
#: Characters of the subject and of the display name read (the parser keeps no more).
FIELD_CHARS = 1_000

_I = re.IGNORECASE

# Phrases per topic, in tie-break order. Word boundaries keep "order" out of "border" and
# "inv" out of "invite"; each pattern counts once however often it occurs.
_TOPICS: dict[str, tuple[str, ...]] = {
    "billing": (r"\binvoic", r"\binv[-\s#]?\d", r"\bpayments?\b", r"\bpaid\b", r"\breceipt",
                r"\brefund", r"\bstatement of account|\baccount statement", r"\bremittance",
                r"\boverdue\b", r"\b(balance|amount|payment) (is )?(due|outstanding)",
                r"\bdirect debit\b", r"\bcredit note\b", r"\bbilling\b", r"\bpro[- ]?forma\b"),
    "orders": (r"\border (#|no\.?|number|confirm)", r"\byour order\b", r"\bpurchase order\b",
               r"\bPO[-\s#]?\d", r"\bship(ping|ment|ped)\b", r"\bdispatch(ed)?\b",
               r"\bdeliver(y|ed|ies)\b", r"\btracking (number|code|link)", r"\bcourier\b",
               r"\breturns? (label|request|authori[sz]ation)"),
    "claims": (r"\bclaims?\b", r"\bdamage[ds]?\b", r"\binsur(er|ance)\b", r"\bloss adjuster",
               r"\bexcess\b", r"\baccident\b"),
    "legal": (r"\bpenalty charge\b", r"\bPCN\b", r"\bparking (fine|ticket)", r"\bfine\b.{0,20}\bissued",
              r"\bcontract\b", r"\bagreement\b", r"\bsolicitor", r"\blawyer", r"\bcourt\b",
              r"\blegal action\b", r"\bterms and conditions\b", r"\bNDA\b", r"\bGDPR\b",
              r"\bsubject access request\b", r"\bdispute\b", r"\bappeal\b"),
    "scheduling": (r"\bmeeting\b", r"\binvitation:", r"\bcalendar\b", r"\bbooking\b",
                   r"\breservation\b", r"\bappointment\b", r"\breschedul", r"\bavailab(le|ility)\b",
                   r"\b(call|meet) (on|at|next)\b", r"\bagenda\b"),
    "support": (r"\b(not|isn'?t|doesn'?t|won'?t|can'?t|cannot) (work|start|load|connect|log ?in|open)",
                r"\bstopped working\b", r"\bbroken\b", r"\b(error|fault) (message|code)\b",
                r"\bcomplain", r"\b(need|needs|could you|can you|please) help\b",
                r"\bhelp (me|us|with)\b", r"\bsupport (ticket|request|case)\b",
                r"\b(ticket|case) (#|no\.?|number)", r"\bbug report\b", r"\bnot happy\b",
                r"\bdisappointed\b", r"\bfaulty\b"),
    "sales": (r"\bquot(e|ation)s?\b", r"\bpric(e|es|ing)\b", r"\bproposal\b", r"\benquir",
              r"\binquir", r"\bdiscount\b", r"\bbrochure\b", r"\bdemo\b", r"\bpartnership\b",
              r"\bfree trial\b"),
    "hiring": (r"\bjob application\b", r"\bapplication for\b", r"\bcurriculum vitae\b",
               r"\b(my|the|attached) (CV|r[eé]sum[eé])\b", r"\binterview\b", r"\bvacanc(y|ies)\b",
               r"\bjob offer\b", r"\bposition of\b"),
    "security": (r"\bpassword\b", r"\bverification code\b", r"\bone[- ]time (code|password|pin)",
                 r"\bsign[- ]?in (attempt|alert|from)", r"\bnew (sign[- ]?in|login|device)\b",
                 r"\btwo[- ]factor\b|\b2fa\b", r"\bsecurity (alert|code|notice)",
                 r"\bverify your (email|account|identity)"),
}
_COMPILED = {name: [Gated(re.compile(p, _I)) for p in pats] for name, pats in _TOPICS.items()}

_URGENT = Gated(re.compile(
    r"\burgent(ly)?\b|\basap\b|\bas soon as possible\b|\bimmediate(ly)?\b|\bfinal (notice|reminder|demand)"
    r"|\boverdue\b|\bwithin (24|48) hours\b|\bby (the )?end of (the )?day\b|\btime[- ]sensitive\b"
    r"|\baction required\b|\blegal action\b|\bdeadline (is )?(today|tomorrow)\b", _I))
_NOREPLY = re.compile(
    r"^(no-?reply|do-?not-?reply|mailer-daemon|postmaster|notifications?|bounces?)([+@.-]|$)", _I)

_PAYMENT_CHANGE = Gated(re.compile(
    r"\b(new|changed?|updated?|different)\b.{0,40}\b(bank|account) (details|number|information)"
    r"|\b(bank|account) (details|number)\b.{0,40}\b(have |has )?(changed|updated)"
    r"|\bIBAN\b.{0,60}\b(new|changed?|updated?)\b|\bnew (IBAN|sort code)\b", _I | re.S))
_CREDENTIALS = Gated(re.compile(
    r"\b(send|give|confirm|provide|share|enter|reply with)\b.{0,40}\b(password|passcode|PIN|login"
    r"|credentials|verification code|security code|one[- ]time code)\b"
    r"|\bverify your (account|identity|password)\b", _I | re.S))
_GIFT_CARDS = Gated(re.compile(
    r"\b(gift ?cards?|itunes cards?|vouchers?)\b.{0,60}\b(buy|purchase|get|send)"
    r"|\b(buy|purchase|get)\b.{0,60}\b(gift ?cards?|itunes cards?)", _I | re.S))
_PRESS = r"(urgent(ly)?|immediately|asap|as soon as possible|today|right away|within \d+ hours)"
_PAYING = r"(wire|transfer|pay|payment|remit)"
# Pressure and payment in one sentence ("wire it immediately", "urgent: pay today").
_URGENT_PAYMENT = Gated(re.compile(rf"\b{_PRESS}\b[^.!?\n]{{0,60}}\b{_PAYING}\b"
                                   rf"|\b{_PAYING}\b[^.!?\n]{{0,60}}\b{_PRESS}\b", _I))
_INJECTION = Gated(re.compile(
    r"\b(ignore|disregard|forget)\b.{0,30}\b(previous|prior|above|earlier|all|your)\b.{0,20}"
    r"\b(instructions|prompts?|rules|directions)\b"
    r"|\bsystem prompt\b|\b(you are|act as) (now )?an? (AI|assistant|language model)\b"
    r"|\b(AI|LLM) (agent|assistant)s?\b.{0,40}\b(must|should|need to|are instructed)\b"
    r"|<\|im_start\|>|\[/?INST\]|\bdeveloper mode\b", _I | re.S))
_DANGEROUS_EXT = re.compile(
    r"\.(exe|scr|com|pif|bat|cmd|vbs|vbe|js|jse|wsf|wsh|hta|msi|msp|jar|ps1|lnk|iso|img|docm"
    r"|xlsm|pptm|dotm|xlam)$", _I)
_DANGEROUS_TYPES = ("application/x-msdownload", "application/x-dosexec", "application/x-msi",
                    "application/java-archive", "application/x-sh", "application/hta")
#: Fields only discussion lists add: RFC 2369's List-Post, vger's X-Mailing-List, ezmlm's
#: Mailing-List.
_DISCUSSION_HEADERS = ("list-post", "x-mailing-list", "mailing-list")
# Majordomo and its kin send list mail with the list's owner as Sender ("owner-linux-mm@"),
# often with Precedence: bulk and no List-Id: such a patch and its replies were "newsletter"
# (found by a new user).
_LIST_OWNER = re.compile(r"(^|[<\s])owner-[^@\s<>]+@")
_ADDR_SPEC = re.compile(r"[\w.+-]+@[\w-]+(\.[\w-]+)+")


@dataclass(frozen=True)
class TriageInput:
    """What triage reads of a message: the subject, sender and Reply-To addr-specs, the header
    fields as ``(name, value)`` pairs, the text judged (:func:`judged_text`), the
    attachments as ``(filename, content_type)``, and its trust (``shared.mail.trust``; None when
    not judged)."""

    subject: str
    from_address: str | None
    from_name: str | None
    reply_to: Sequence[str]
    headers: Sequence[tuple[str, str]]
    text: str
    attachments: Sequence[tuple[str | None, str]]
    trust: Trust | None = None


def judged_text(new_text: str, text: str, *, answers: bool) -> str:
    """The text triage judges: the new text of a message that answers another (In-Reply-To or
    References), else the whole text. A message that answers nothing has no earlier message to
    quote, so its "quoted" lines are its own words: bulk mail laid out in a ``<blockquote>``
    renders as quoted text, and judging only what was left unquoted hid the offer."""
    return (new_text if answers else "") or text


def input_of(parsed: ParsedMessage, new_text: str, trust: Trust | None = None) -> TriageInput:
    """What triage reads of a freshly parsed message, ``new_text`` being its text without quotes
    and ``trust`` its trust."""
    return TriageInput(
        subject=parsed.subject, from_address=parsed.from_.address if parsed.from_ else None,
        from_name=parsed.from_.name if parsed.from_ else None,
        reply_to=[a.address for a in parsed.reply_to], headers=parsed.headers,
        text=judged_text(new_text, parsed.text,
                         answers=bool(parsed.in_reply_to or parsed.references)),
        attachments=[(a.filename, a.content_type) for a in parsed.attachments], trust=trust)


#: Characters a writer can put inside a word to break a pattern that names it ("Ig\u200bnore",
#: "ceo@pylota\u200b.example") while readers see nothing: the format characters (Unicode
#: category Cf, tags included), combining marks left over once NFKC has composed what it can
#: (the grapheme joiner, variation selectors, stray accents), and the blank fillers (Hangul,
#: Braille). Two attacks found these one range at a time.
def _header(fields: dict[str, list[str]], name: str) -> list[str]:
    return [v.strip().lower() for v in fields.get(name, ())]


def _by_name(headers: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Each field's values by lower-case name, in order: one pass for triage's many lookups."""
    found: dict[str, list[str]] = {}
    for name, value in headers:
        found.setdefault(name.lower(), []).append(value)
    return found


def _domain(address: str | None) -> str:
    return (address or "").rpartition("@")[2].lower()


def _topic(msg: TriageInput, subject: Scanned, text: Scanned) -> tuple[str | None, int]:
    best, best_score = None, 0
    names = " ".join(f for f, _ in msg.attachments if f)
    scanned_names = Scanned(names)
    for name, patterns in _COMPILED.items():
        score = sum(3 * bool(p.search(subject)) + 2 * bool(names and p.search(scanned_names))
                    + bool(p.search(text)) for p in patterns)
        if name == "scheduling" and any(ct == "text/calendar" for _, ct in msg.attachments):
            score += 3
        if score > best_score:
            best, best_score = name, score
    return best, best_score


class TriageDraft(msgspec.Struct, frozen=True, kw_only=True):
    """What triage reads of a message without its trust (:func:`draft_of`), for :func:`decide`:
    the upstream spam mark, the spam score of the content (``shared.mail.spam.content_signals``),
    the list, bulk and automated-sender marks, the best topic and its score, whether a priority
    field or the subject or text presses, and the risk flags that do not depend on the category,
    with the two that do (a credentials request, a Reply-To in another domain) apart."""

    marked_spam: bool
    content_score: float
    listed: bool
    bulk: bool
    auto: bool
    topic: str | None
    score: int
    priority_high: bool
    subject_pressed: bool
    text_pressed: bool
    flags: list[str]
    asks_credentials: bool
    reply_elsewhere: bool


def draft_of(msg: TriageInput) -> TriageDraft:
    """The trust-free part of :func:`triage` for ``msg`` (whose ``trust`` is not read). Pure;
    never raises."""
    fields = _by_name(msg.headers)
    text = plain(msg.text[:TEXT_CHARS])
    msg = dataclasses.replace(msg, subject=plain(msg.subject[:FIELD_CHARS]),
                              from_name=plain((msg.from_name or "")[:FIELD_CHARS]) or None)
    listed = any(_header(fields, name) for name in _DISCUSSION_HEADERS) or (
        "list" in _header(fields, "precedence")) or any(
        _LIST_OWNER.search(v) for v in _header(fields, "sender"))
    # A List-Id without List-Post is an announcement list: one sender, many readers.
    bulk = bool(_header(fields, "list-unsubscribe")) or any(
        v in ("bulk", "junk") for v in _header(fields, "precedence")) or (
        bool(_header(fields, "list-id")) and not listed)
    auto = any(v and v != "no" for v in _header(fields, "auto-submitted")) or any(
        "multipart/report" in v for v in _header(fields, "content-type")) or bool(
        _NOREPLY.match(msg.from_address or ""))
    scanned_subject, scanned_text = Scanned(msg.subject), Scanned(text)
    topic, score = _topic(msg, scanned_subject, scanned_text)
    priority = _header(fields, "importance") + _header(fields, "x-priority") + _header(
        fields, "priority")
    body = Scanned(f"{msg.subject}\n{text}")
    flags = set()
    if _PAYMENT_CHANGE.search(body):
        flags.add("payment_change")
    if _GIFT_CARDS.search(body):
        flags.add("gift_cards")
    if _URGENT_PAYMENT.search(body):
        flags.add("urgent_payment")
    shown = _ADDR_SPEC.search(msg.from_name or "")
    if shown and shown[0].lower() != (msg.from_address or ""):
        flags.add("display_name_mismatch")
    if any((f and _DANGEROUS_EXT.search(f)) or ct in _DANGEROUS_TYPES
           for f, ct in msg.attachments):
        flags.add("dangerous_attachment")
    if _INJECTION.search(body):
        flags.add("prompt_injection")
    sender = _domain(msg.from_address)
    return TriageDraft(
        marked_spam=any(v.startswith("yes") for v in _header(fields, "x-spam-flag")
                        + _header(fields, "x-spam-status")),
        content_score=sum(content_signals(subject=msg.subject, text=text, headers=msg.headers,
                                          from_address=msg.from_address).values()),
        listed=listed, bulk=bulk, auto=auto, topic=topic, score=score,
        priority_high=any(v in ("high", "urgent") or v[:1] in ("1", "2") for v in priority),
        subject_pressed=_URGENT.search(scanned_subject) is not None,
        text_pressed=_URGENT.search(scanned_text) is not None,
        flags=sorted(flags),
        asks_credentials=_CREDENTIALS.search(body) is not None,
        # Lists and bulk senders set Reply-To to the list or a help desk as a matter of course
        # (only mail that is not automated gets the flag: decide).
        reply_elsewhere=bool(sender) and any(_domain(r) and _domain(r) != sender
                                             for r in msg.reply_to))


def decide(draft: TriageDraft, trust: Trust | None) -> Triage:
    """The triage of a message from its draft and its trust (module docstring). Pure."""
    spam = draft.marked_spam or (
        not (trust is not None and trust.known_sender)
        and draft.content_score + sum(trust_signals(trust).values()) >= SPAM_SCORE)
    if spam:
        category = "spam"
    elif draft.listed and draft.score < STRONG_TOPIC:
        category = "list"
    elif draft.topic is not None and draft.score >= MIN_TOPIC:
        category = draft.topic
    elif draft.bulk:
        category = "newsletter"
    elif draft.auto:
        category = "notification"
    else:
        category = "other"
    automated = spam or draft.listed or draft.bulk or draft.auto
    # Automated mail presses only through its subject or priority fields: a list post's body is
    # full of "immediately" in code and quotes.
    pressed = draft.subject_pressed or (not automated and draft.text_pressed)
    if category != "spam" and (pressed or draft.priority_high):
        urgency = "high"
    elif automated:
        urgency = "low"
    else:
        urgency = "normal"
    flags = set(draft.flags)
    if draft.asks_credentials and category != "security":
        flags.add("credential_request")
    if draft.reply_elsewhere and not automated:
        flags.add("reply_to_mismatch")
    return Triage(category=category, urgency=urgency, risk_flags=sorted(flags),
                  automated=automated)


def triage(msg: TriageInput) -> Triage:
    """Category, urgency and risk flags of one message (module docstring). Pure; never raises."""
    return decide(draft_of(msg), msg.trust)


async def save_triage(conn: asyncpg.Connection, identity_id: str,
                      results: Iterable[tuple[str, Triage]]) -> None:
    """Store (or replace) the triage of each ``(message_id, triage)``."""
    await conn.executemany(
        """INSERT INTO message_triage (message_id, identity_id, category, urgency, risk_flags,
                                       automated)
           VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (message_id) DO UPDATE SET category = excluded.category,
             urgency = excluded.urgency, risk_flags = excluded.risk_flags,
             automated = excluded.automated""",
        [(mid, identity_id, t.category, t.urgency, t.risk_flags, t.automated)
         for mid, t in results])


#: :func:`triage_of` of one message as a column of a query on ``messages m`` (an anonymous
#: record, NULL when untriaged); :func:`triage_from` reads it. It lets a message and its
#: derived data come back in one round trip (``shared.mail.reading.read_message``).
TRIAGE_COLUMN = """(SELECT ROW(t.category, t.urgency, t.risk_flags, t.automated)
    FROM message_triage t WHERE t.message_id = m.id) AS triage"""


def triage_from(value: tuple | None) -> Triage | None:
    """The :class:`Triage` of a :data:`TRIAGE_COLUMN` value."""
    if value is None:
        return None
    category, urgency, risk_flags, automated = value
    return Triage(category=category, urgency=urgency, risk_flags=list(risk_flags),
                  automated=automated)


async def triage_of(conn: asyncpg.Connection, message_ids: list[str]) -> dict[str, Triage]:
    """The stored triage of each of ``message_ids`` that has one."""
    rows = await conn.fetch(
        "SELECT message_id, category, urgency, risk_flags, automated FROM message_triage"
        " WHERE message_id = any($1::text[])", message_ids)
    return {r["message_id"]: Triage(category=r["category"], urgency=r["urgency"],
                                    risk_flags=list(r["risk_flags"]), automated=r["automated"])
            for r in rows}


async def categories_of(conn: asyncpg.Connection, identity_id: str | None) -> dict[str, str]:
    """The stored category of every triaged message of ``identity_id`` (or of every identity)."""
    rows = await conn.fetch(
        "SELECT message_id, category FROM message_triage"
        " WHERE $1::text IS NULL OR identity_id = $1", identity_id)
    return {r["message_id"]: r["category"] for r in rows}
