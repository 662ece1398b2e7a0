"""Domain names as trust reads them: organizational domains, "within", and lookalikes.

- :func:`organizational_domain` is a domain's registrable part by the Public Suffix List
  (``publicsuffixlist``, which ships the list; no network): ``mail.acme.co.uk`` → ``acme.co.uk``.
  DMARC's relaxed alignment compares these (RFC 7489 section 3.2).
- :func:`is_within` says whether a domain equals, or is a subdomain of, another that is not a
  public suffix; ``mail_wait``'s ``from`` filter names a sender's domain this way.
- :func:`lookalike_of` finds the domain a sender's domain imitates, if any (rule below).

Lookalike rule (the ``lookalike_domain`` trust flag). Let S be the sender's organizational
domain and R one reference domain (the mailbox's own domains and the domains it has written to),
both lower-cased and IDNA-decoded (``xn--`` labels read as Unicode). S imitates R when S ≠ R and

1. their *skeletons* are equal: each character replaced by the Latin letter it is confusable
   with (Unicode's confusables data, via ``confusable_homoglyphs``, after NFKC), then the ASCII
   tricks ``0``→``o``, ``1``→``l``, ``rn``→``m``, ``vv``→``w`` (``paypa1.com``, ``аcme.com`` in
   Cyrillic, ``rnicrosoft.com``); or
2. they are one edit apart (an insertion, deletion, substitution or swap of two neighbours:
   ``acme-corp.com``/``acmecorp.com``, ``acme.co``/``acme.com``) and R has at least
   :data:`MIN_TYPO_CHARS` characters, since short names are one edit from many honest ones; or
3. the sender's full domain carries R as whole labels outside its own organizational domain
   (``acme.com.login-check.net``).

Pure: no I/O. Used by ``shared.mail.trust`` and ``shared.mail.verification``.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable

from confusable_homoglyphs import confusables
from publicsuffixlist import PublicSuffixList

__all__ = ["MIN_TYPO_CHARS", "normalize_domain", "spellings", "organizational_domain", "is_within",
           "lookalike_of", "domain_of"]

#: Shortest reference domain (with its suffix, as in ``acme.com``) for which one edit counts.
MIN_TYPO_CHARS = 8

_PSL = PublicSuffixList()
#: ASCII look-alikes that Unicode's confusables data does not map (they are different letters
#: there), applied to the skeleton in this order.
_ASCII_TRICKS = (("rn", "m"), ("vv", "w"), ("0", "o"), ("1", "l"))


def domain_of(address: str | None) -> str:
    """The normalized domain of an addr-spec or ``@domain`` (empty when it has none)."""
    return normalize_domain((address or "").rpartition("@")[2])


def normalize_domain(domain: str) -> str:
    """Lower-case, without a trailing dot, ``xn--`` labels decoded to Unicode (RFC 5891)."""
    labels = domain.strip().rstrip(".").lower().split(".")
    out = []
    for label in labels:
        if label.startswith("xn--"):
            try:
                label = label.encode("ascii").decode("idna")
            except UnicodeError:
                pass  # not valid punycode: keep the label as written
        out.append(label)
    return ".".join(out)


def spellings(domain: str) -> list[str]:
    """``domain`` as Unicode and as ASCII (``xn--`` labels, IDNA), lower-cased, each once:
    mail names one domain either way (``bücher.example``, ``xn--bcher-kva.example``) and is
    stored as written."""
    unicode = normalize_domain(domain)
    try:
        ascii_ = unicode.encode("idna").decode("ascii")
    except UnicodeError:
        ascii_ = unicode  # not a name IDNA can write: only as given
    return list(dict.fromkeys((unicode, ascii_, domain.strip().rstrip(".").lower())))


def organizational_domain(domain: str) -> str | None:
    """The registrable domain of ``domain`` (Public Suffix List), or None for a public suffix
    itself (``co.uk``) or an empty name."""
    domain = normalize_domain(domain)
    return _PSL.privatesuffix(domain) if domain else None


def is_within(domain: str, parent: str) -> bool:
    """True when ``domain`` equals ``parent`` or is a subdomain of it, and ``parent`` is not a
    public suffix (``@co.uk`` names no sender)."""
    domain, parent = normalize_domain(domain), normalize_domain(parent)
    if not domain or not parent or organizational_domain(parent) is None:
        return False
    return domain == parent or domain.endswith("." + parent)


@functools.lru_cache(maxsize=4096)
def _skeleton(domain: str) -> str:
    chars = []
    for ch in unicodedata.normalize("NFKC", domain):
        if ord(ch) > 0x7F:
            found = confusables.is_confusable(ch, greedy=True, preferred_aliases=["latin"]) or []
            latin = [g["c"] for hit in found for g in hit["homoglyphs"] if g["c"].isascii()]
            ch = latin[0].lower() if latin else ch
        chars.append(ch)
    skeleton = "".join(chars)
    for trick, letter in _ASCII_TRICKS:
        skeleton = skeleton.replace(trick, letter)
    return skeleton


def _one_edit(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` differ by exactly one edit (Damerau: a swap counts as one)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]])
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    return short[i:] == long_[i + 1:]


def lookalike_of(sender_domain: str, references: Iterable[str]) -> str | None:
    """The reference domain that ``sender_domain`` imitates (module docstring), or None.

    ``references`` are domains the mailbox trusts: its own and those it wrote to. A sender within
    a reference's organization is never a lookalike of it.
    """
    full = normalize_domain(sender_domain)
    sender = organizational_domain(full)
    if sender is None:
        return None
    for ref in sorted({organizational_domain(r) or "" for r in references} - {""}):
        if ref == sender:
            continue
        if _skeleton(ref) == _skeleton(sender):
            return ref
        if len(ref) >= MIN_TYPO_CHARS and _one_edit(ref, sender):
            return ref
        outside = full[: -len(sender)].rstrip(".")
        if outside and (f".{outside}.".find(f".{ref}.") >= 0):
            return ref
    return None
