"""Spam signals: how much a message looks like unsolicited bulk mail or a scam, for triage.

Triage puts a message in ``spam`` when an upstream filter marked it, or when the weights of the
signals below add up to :data:`SPAM_SCORE` (the way SpamAssassin scores rules; these rules are
ours, written for the phrasing and header habits of bulk mail and advance-fee scams). Each
signal counts once, however often its words occur:

- **bulk phrasing**: removal and opt-in boilerplate ("to be removed", "reply with REMOVE in
  the subject", "this is not spam", "Bill S.1618"), offers ("100% free", "risk-free", "no
  obligation", "act now", "order today"), money-making, loans and mortgages, pills, weight loss,
  adult content, gambling, "dear friend", bulk e-mail lists;
- **scam phrasing**: next of kin, beneficiary, millions of dollars, "strictly confidential",
  transfer of funds to a foreign account (the advance-fee "419" letter);
- **shouting**: a subject or text written mostly in capitals, or three lines or more in capitals;
- **habits of bulk senders**: a subject ending in a run of spaces and a tracking token, an
  ``ADV:`` subject or one that sells (money, "free", a percentage), undisclosed recipients,
  top-priority flags, an HTML-only body (short ones more), a Date no mailer writes (year 0102,
  zone -1900, or none), a Message-ID without ``@``, a Message-ID or X-Mailer of a mailer that
  did not send it (Outlook's without the fields Outlook adds, random letters), mail addressed
  to its own sender, links to bare IP addresses, text padded with runs of empty lines or ending
  in a random tag;
- **trust** (``shared.mail.trust``): a failed authentication verdict, a lookalike domain.

Two signals count against spam: a reply (In-Reply-To or References), since bulk mail starts
conversations and does not answer them, and a PGP or S/MIME signed message. Mail from a known
sender (the mailbox wrote to them) is never spam by these signals: only an upstream mark makes
it spam. The weights were set on the SpamAssassin public corpus' ham/spam split (README,
"Trust and triage", gives the precision measured on it).

:func:`content_signals` gives the signals of the message alone (everything but trust), which
ingest computes before the message's trust is known, on the import's worker processes
(``shared.ingest.prepare``); :func:`spam_signals` adds trust's. The phrase patterns run behind
literal gates (``shared.mail.prefilter``): same signals, a fraction of the searches.

Pure: no I/O. Called by ``shared.mail.triage``.
"""

from __future__ import annotations

import email.utils
import re
from collections.abc import Sequence

from shared.mail.domains import domain_of, organizational_domain
from shared.mail.judged import Trust
from shared.mail.prefilter import Gated, Scanned

__all__ = ["SPAM_SCORE", "SIGNALS", "content_signals", "spam_signals", "trust_signals"]


#: Score at which a message is spam.
SPAM_SCORE = 3.0

_I = re.IGNORECASE | re.DOTALL

#: Text signals: name → (weight, pattern over the subject and the new text).
_TEXT: dict[str, tuple[float, str]] = {
    "removal_boilerplate": (3.0, r"\bto be removed\b|\bremoved? (yourself |your (e-?mail|name|"
                                 r"address) )?from (our|this|the|all|future) (mailing |e-?mail |"
                                 r"distribution |contact )?(list|mailings)"
                                 r"|\bremove\b.{0,40}\bsubject\b|\bremoval (instructions|link)"
                                 r"|\bpl(ea)?se? (reply|respond) (to|with)\b.{0,30}\bremove"),
    "harvested_address": (2.5, r"\b(e-?mail|address) (was|has been) (obtained|collected|harvested)"
                               r"|\bpurchased (a |e-?mail )?list\b|\bopt-?in (list|database)\b"),
    "opt_out_boilerplate": (1.0, r"\b(no longer|not|don'?t) (wish|want|like)( us)? to (receive|be "
                                 r"contacted|get|hear)|\bnever (receive|get) (another|any more|"
                                 r"further)|\b(leave|be taken off) (this|our|the) list\b"
                                 r"|\bstop receiving\b|\bwish to (unsubscribe|opt[- ]?out)\b"
                                 r"|不想再收到|拒收|配信停止"),
    "cheap_offer": (0.5, r"\bwhy pay (more|full)\b|\bnever pay retail\b|\blow(est)? prices?\b"
                         r"|\bcheap(est)?\b|\b(huge |big )?discounts?\b|\bsave (up to )?\$?\d+"
                         r"|\bwholesale\b|\bspecial offer\b"),
    # Markers the law asks of unsolicited ads: US Bill S.1618 (cited by bulk mailers), Japan's
    # 未承諾広告 ("unsolicited advertisement"), Korea's (광고) ("advertisement").
    "spam_law": (4.0, r"\bs\.? ?1618\b|\bsection 301\b|\bbill\b.{0,12}1618|未承諾広告"
                      r"|[(\[]광고[)\]]"),
    "not_spam_claim": (2.0, r"\b(this|it) is not (a )?spam\b|\bnot (an? )?unsolicited\b"
                            r"|\bno spam\b"),
    "receiving_because": (1.0, r"\byou (are|were) receiving this\b.{0,40}\bbecause\b"
                               r"|\bone[- ]time (e-?mail|mailing)\b"),
    "opt_in": (1.0, r"\bopt(ed)?[- ]?in\b"),
    "click_here": (1.5, r"\bclick (here|below|on the link)\b"),
    "online_business": (1.5, r"\b(online|internet|home) (business|marketing|casino|pharmacy)\b"),
    "numeric_link": (2.5, r"\bhttps?://\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b"),
    "padding": (2.5, r"(\n[ \t]*){15,}\S"),
    "hundred_percent": (1.5, r"\b100 ?% (free|guaranteed|satisfaction|natural|legal|risk)"),
    "risk_free": (1.0, r"\brisk[- ]free\b|\bmoney[- ]back\b"),
    "no_obligation": (1.5, r"\bno (obligation|cost|fees|risk|catch)\b|\bwithout (any )?obligation"),
    "free_offer": (1.0, r"\bfree (trial|gift|offer|quote|membership|sample|info|information|"
                        r"report|cd|consultation|bonus|evaluation|access)\b"),
    "act_now": (1.5, r"\bact now\b|\border (now|today)\b|\bcall (now|today|toll[- ]free)\b"
                     r"|\blimited time\b|\bdon'?t (delay|miss (out|this))\b|\bapply now\b"
                     r"|\bhurry\b"),
    "toll_free": (1.0, r"\btoll[- ]free\b|\b1[- ]?8(00|88|77|66)[- ]?\d{3}[- ]?\d{4}\b"),
    "money_making": (2.0, r"\b(make|earn|making|earning) (big |extra |serious |fast )?(money|cash|"
                          r"\$\s?\d)|\bwork (from|at) home\b|\bhome[- ]based business\b"
                          r"|\bbe your own boss\b|\bfinancial (freedom|independence)\b"
                          r"|\b(extra|residual|passive|weekly) income\b|\bmulti[- ]?level marketing"
                          r"|\bnetwork marketing\b|\bper (week|month) (from|with) (home|your)"
                          r"|\btired of (your job|working)\b|\btime to retire\b"
                          r"|\bno (investment|experience) (needed|required|necessary)\b"),
    "loans": (1.5, r"\bmortgage|\brefinanc|\b(low|lower|lowest|fixed) (interest )?rates?\b"
                   r"|\bdebt (consolidation|free|relief)|\bcredit (rating|history|problems)\b"
                   r"|\bbad credit\b|\bloans?\b.{0,30}\b(approved|approval)\b|\bcredit report\b"
                   r"|\bapprovals?\b.{0,20}\bcredit\b|\bauto loans?\b"
                   r"|\binsurance (quotes?|rates)\b"),
    "found_money": (1.5, r"\bclaim (your|the|their) (cash|money|prize|funds?|winnings)\b"
                         r"|\b(unclaimed|lost|free) (cash|money)\b"),
    "pills": (2.5, r"\bv[i1*!|l]agra\b|\bno prescription\b|\bcialis\b|\bpenis\b|\berections?\b"
                   r"|\bimpotence\b|\bhgh\b"
                   r"|\bprescription\b.{0,30}\b(online|without)\b|\bpharmac(y|eutical)"),
    "weight_loss": (2.0, r"\blose (weight|\d+(\.\d+)? ?(lbs|pounds))\b|\bweight[- ]loss\b"
                         r"|\bdiet pills?\b|\bburn fat\b"),
    "adult": (1.5, r"\bporn|\bxxx\b|\bhorny\b|\bnude|\bhardcore\b|\badult (site|entertainment|"
                   r"movies|content|membership|club)"),
    "gambling": (2.0, r"\bcasino\b|\blottery\b|\bjackpot\b|\bsweepstakes?\b|\bpowerball\b"
                      r"|\bwinning numbers\b"),
    "dear_friend": (1.5, r"\bdear (friend|sir|madam|sir/madam|homeowner|valued|member|"
                         r"opportunity|business|entrepreneur)"),
    "bulk_email": (2.0, r"\b(e-?mail|fax) addresses\b|\bbulk (e-?mail|mail)\b|\bmass e-?mail"
                        r"|\btargeted (e-?mail|traffic)|\be-?mail marketing\b"
                        r"|\bmillions? of (e-?mail|people|prospects)"),
    "guarantee": (0.5, r"\bguarantee[ds]?\b"),
    "amounts": (0.5, r"\$\s?\d{1,3}(,\d{3})+|\$\s?\d+(\.\d+)? ?(million|billion)\b"),
    "exclamations": (0.5, r"!!+"),
    "scam_kin": (2.0, r"\bnext of kin\b|\bbeneficiar(y|ies)\b|\bbarrister\b|\bdeceased\b"
                      r"|\blate (husband|father|client)\b"),
    "scam_millions": (1.5, r"\bmillion (united states |us |u\.s\. )?dollars\b"
                           r"|\b(us ?)?\$ ?\d+(\.\d+)? ?m(illion)?\b|\busd ?\d+(,\d{3})+"),
    "scam_secrecy": (1.5, r"\bstrictly confidential\b|\butmost (confidentiality|secrecy|trust)\b"
                          r"|\babsolute (confidentiality|secrecy)\b|\btop secret\b"),
    "scam_transfer": (2.0, r"\bforeign (partner|account)\b|\btransfer (of )?(the |this )?(fund|"
                           r"money|sum)|\b(\d\d|twenty|thirty) ?(%|percent) (of the (total )?"
                           r"(sum|fund)|for you)|\bsecurity company\b|\bdiplomatic\b"),
    "scam_country": (1.0, r"\bnigeria|\bsierra leone\b|\bzimbabwe\b|\bivory coast\b"
                          r"|\bdemocratic republic of congo\b|\bsouth africa\b"),
}
_TEXT_RES = {name: (w, Gated(re.compile(p, _I))) for name, (w, p) in _TEXT.items()}

#: Every signal and its weight (negative ones count against spam).
SIGNALS: dict[str, float] = {
    **{name: w for name, (w, _) in _TEXT.items()},
    "shouted_subject": 1.5,
    "subject_offer": 1.5,
    "shouted_text": 1.5,
    "shouted_lines": 0.5,
    "subject_tracking_token": 3.0,
    "adv_subject": 3.0,
    "undisclosed_recipients": 1.0,
    "top_priority": 1.0,
    "html_only": 1.5,
    "html_short": 1.5,
    "forged_mailer": 2.5,
    "random_mailer": 3.0,
    "to_self": 1.0,
    "malformed_date": 2.5,
    "malformed_message_id": 2.0,
    "tracking_token": 2.5,
    "auth_failed": 2.5,
    "lookalike_domain": 2.0,
    "reply": -3.0,
    "signed": -2.0,
    "announcement_list": -2.0,
    "own_message_id": -1.0,
}

# A subject padded with spaces before a tracking token ("Rates are down          ptjti"), or
# ending in an id spammers use to tell their runs apart.
_TRACKING = re.compile(r"\S\s{4,}[\w#.-]{2,}\s*$|\s[\[(]?(id|offer ?id|ref)[:#]\s*\w+[\])]?\s*$"
                       r"|\s\d{4,}\s*$(?<!\b(19|20)\d\d)", re.IGNORECASE)
_SUBJECT_OFFER = re.compile(r"\$\s?\d|\bfree\b|\d ?%|\bsave\b|\bcash\b|\bincome\b", re.IGNORECASE)
# The text ends in one word of letters and digits that reads as a random id ("xay1992361y"): a
# bulk mailer's tag for telling its runs or recipients apart.
_TAIL_TOKEN = re.compile(r"(^|\n)\s*(?=[A-Za-z-]*\d)(?=[\d-]*[A-Za-z])[A-Za-z0-9-]{7,}\s*$")
_ZONE = re.compile(r"([+-]\d{4}|\b(UT|GMT|Z|[A-Z]{3,4}))\s*(\(.*\))?\s*$")
_OUTLOOK_ID = re.compile(r"<?[0-9a-f]{8,}\$[0-9a-f]{8,}\$[0-9a-f]{8,}@", re.IGNORECASE)
# An X-Mailer that is one long run of letters and digits names no program.
_RANDOM_MAILER = re.compile(r"\s*(?=[A-Za-z]*\d)[A-Za-z0-9]{20,}\s*")
_WORD = re.compile(r"[^\W\d_]{2,}")
_URL = re.compile(r"\(?https?://\S+")
_ADV = re.compile(r"^\s*adv\b|\badv\s*:", re.IGNORECASE)
_UNDISCLOSED = re.compile(r"undisclosed|recipient list|^\s*$|friend@|valued\.?customer",
                          re.IGNORECASE)
# A line with no small letter, not quoted (at least 12 capitals are asked of it too).
_CAPITAL_LINE = re.compile(r"^(?!\s*>)[^a-z\n]{12,}$", re.MULTILINE)
_UPPER = re.compile(r"[A-Z]")
_LETTERS = re.compile(r"[^\W\d_]")
#: Letters of text a shouting test needs; fewer say too little.
_SHOUT_LETTERS = 200


def _header(fields: dict[str, list[str]], name: str) -> list[str]:
    return [v.strip() for v in fields.get(name, ())]


def _by_name(headers: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Each field's values by lower-case name, in order: one pass for the many lookups."""
    found: dict[str, list[str]] = {}
    for name, value in headers:
        found.setdefault(name.lower(), []).append(value)
    return found


def _shouting(text: str, *, least: int, share: float) -> bool:
    letters = _LETTERS.findall(text)
    return len(letters) >= least and sum(map(str.isupper, letters)) / len(letters) >= share


def _malformed_date(values: list[str]) -> bool:
    """A Date no honest mailer writes: a year before 1990 as written ("0102"), no zone (RFC 5322
    section 3.3 requires one), or a zone offset past 14 hours or 59 minutes ("-1900")."""
    for value in values[:1]:
        parts = email.utils.parsedate_tz(value)
        if parts is None:
            return False
        if not _ZONE.search(value):
            return True
        offset = re.search(r"\s[+-](\d\d)(\d\d)\b", value)
        return parts[0] < 1990 or bool(offset and (int(offset[1]) > 14 or int(offset[2]) > 59))
    return False


def _forged_mailer(fields: dict[str, list[str]]) -> bool:
    """A Message-ID or X-Mailer of Microsoft's mailers without the field those mailers always
    add: an Outlook-style id (``<hex$hex$hex@host>``) with neither an Outlook X-Mailer nor
    X-MimeOLE, or an Outlook Express X-Mailer without X-MimeOLE."""
    mailer = " ".join(_header(fields, "x-mailer")).lower()
    mimeole = bool(_header(fields, "x-mimeole"))
    ids = _header(fields, "message-id")
    if ids and _OUTLOOK_ID.match(ids[0]) and "outlook" not in mailer and not mimeole:
        return True
    return "outlook express" in mailer and not mimeole


def _own_message_id(values: list[str], from_address: str) -> bool:
    """The Message-ID names the sender's own organization, as its mail servers write it."""
    domain = values[0].strip().strip("<>").rpartition("@")[2] if values else ""
    org = organizational_domain(domain) if domain else None
    return org is not None and org == organizational_domain(domain_of(from_address))


def spam_signals(*, subject: str, text: str, headers: Sequence[tuple[str, str]],
                 from_address: str | None, trust: Trust | None) -> dict[str, float]:
    """The signals ``subject``, ``text`` (new text) and ``headers`` give, with their weights
    (module docstring); their sum is the spam score. Empty for a known sender."""
    if trust is not None and trust.known_sender:
        return {}
    return {**content_signals(subject=subject, text=text, headers=headers,
                              from_address=from_address), **trust_signals(trust)}


def trust_signals(trust: Trust | None) -> dict[str, float]:
    """The signals of a message's trust (a failed verdict, a lookalike domain), with their
    weights; what :func:`spam_signals` adds to :func:`content_signals` unless the sender is
    known."""
    found: dict[str, float] = {}
    if trust is not None and trust.verdict == "fail":
        found["auth_failed"] = SIGNALS["auth_failed"]
    if trust is not None and "lookalike_domain" in trust.flags:
        found["lookalike_domain"] = SIGNALS["lookalike_domain"]
    return found


def content_signals(*, subject: str, text: str, headers: Sequence[tuple[str, str]],
                    from_address: str | None) -> dict[str, float]:
    """The signals of the message alone: all but trust's (:func:`trust_signals`)."""
    found: dict[str, float] = {}
    fields = _by_name(headers)
    body = Scanned(f"{subject}\n{text}")
    content_type = (_header(fields, "content-type") or ["text/plain"])[0].lower()
    to = _header(fields, "to")
    for name, (weight, pattern) in _TEXT_RES.items():
        if pattern.search(body):
            found[name] = weight
    if _shouting(subject, least=12, share=0.8):
        found["shouted_subject"] = SIGNALS["shouted_subject"]
    if _shouting(text[:5000], least=_SHOUT_LETTERS, share=0.5):
        found["shouted_text"] = SIGNALS["shouted_text"]
    if _TRACKING.search(subject):
        found["subject_tracking_token"] = SIGNALS["subject_tracking_token"]
    if sum(len(_UPPER.findall(m[0])) >= 12 for m in _CAPITAL_LINE.finditer(text[:10_000])) >= 3:
        found["shouted_lines"] = SIGNALS["shouted_lines"]
    if _TAIL_TOKEN.search(text[-500:]):
        found["tracking_token"] = SIGNALS["tracking_token"]
    if _SUBJECT_OFFER.search(subject):
        found["subject_offer"] = SIGNALS["subject_offer"]
    if content_type.startswith("text/html") and len(_WORD.findall(_URL.sub("", text))) < 150:
        found["html_short"] = SIGNALS["html_short"]
    if any("@" not in v for v in _header(fields, "message-id")[:1]):
        found["malformed_message_id"] = SIGNALS["malformed_message_id"]
    if _forged_mailer(fields):
        found["forged_mailer"] = SIGNALS["forged_mailer"]
    if any(_RANDOM_MAILER.fullmatch(v) for v in _header(fields, "x-mailer")):
        found["random_mailer"] = SIGNALS["random_mailer"]
    if from_address and any(from_address.lower() in v.lower() for v in to) and len(to) == 1 \
            and "," not in to[0]:
        found["to_self"] = SIGNALS["to_self"]
    if _malformed_date(_header(fields, "date")):
        found["malformed_date"] = SIGNALS["malformed_date"]
    if _ADV.search(subject):
        found["adv_subject"] = SIGNALS["adv_subject"]
    if not to or any(_UNDISCLOSED.search(v) for v in to):
        found["undisclosed_recipients"] = SIGNALS["undisclosed_recipients"]
    if any(v[:1] in ("1", "2") for v in _header(fields, "x-priority")) or any(
            v.lower() == "high" for v in _header(fields, "x-msmail-priority")):
        found["top_priority"] = SIGNALS["top_priority"]
    if content_type.startswith("text/html"):
        found["html_only"] = SIGNALS["html_only"]
    if _header(fields, "in-reply-to") or _header(fields, "references"):
        found["reply"] = SIGNALS["reply"]
    # A List-Unsubscribe without List-Post: a sender that lets one leave its announcements
    # (RFC 2369); bulk mail relayed by a discussion list carries the list's own fields instead.
    if _header(fields, "list-unsubscribe") and not _header(fields, "list-post"):
        found["announcement_list"] = SIGNALS["announcement_list"]
    if from_address and _own_message_id(_header(fields, "message-id"), from_address):
        found["own_message_id"] = SIGNALS["own_message_id"]
    if content_type.startswith(("multipart/signed", "application/pkcs7-mime")) or (
            "-----BEGIN PGP SIGNED MESSAGE-----" in text):
        found["signed"] = SIGNALS["signed"]
    return found
