"""Literal gates in front of regular expressions (``shared.mail.prefilter``): a gated pattern
answers exactly as the pattern does, on hand-made edge cases, on generated text, on every
pattern triage, spam and references gate, and on the kit's real mail."""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.mail import refs, spam, triage
from shared.mail.parse import parse_message
from shared.mail.prefilter import Gated, Scanned, fold, required_literals
from shared.mail.sources import iter_sources

_I = re.IGNORECASE


def _gated_in(value: object) -> list[Gated]:
    if isinstance(value, Gated):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [g for item in value for g in _gated_in(item)]
    return []


#: Every gated pattern of the modules that gate: ingest runs all of them on every message.
GATED = [g for module in (spam, triage, refs) for value in vars(module).values()
         for g in _gated_in(value)]


def test_the_modules_gate_their_patterns_and_most_gates_hold_strings():
    assert len(GATED) > 120
    assert sum(g.gate is not None for g in GATED) > 110


@pytest.mark.parametrize(("pattern", "flags", "literals"), [
    (r"\bpaid\b", _I, {"paid"}),
    (r"\bpayments?\b", _I, {"payment"}),  # "payments" holds "payment": one string is enough
    (r"colou?r", 0, {"color", "colour"}),
    (r"\bINV[-\s#]?\d", 0, {"INV"}),
    (r"(?<![A-Z])PO\d", 0, {"PO"}),  # a lookbehind matches nothing itself
    (r"\bto be removed\b|\bremoval (instructions|link)", _I,
     {"to be removed", "removal instructions", "removal link"}),
    (r"Invoice", _I, {"invoice"}),  # compared with the folded text
    (r"[a-z]{3}", 0, None),
    (r"\bcheap\b|.*", _I, None),  # one alternative needs nothing: no gate
    (r"(?i:x)yz", 0, {"yz"}),  # a scoped flag is not followed; the rest still gates
    (r"\b(my|the) r[eé]sum[eé]\b", _I, {"my resume", "my resumé", "my résume", "my résumé",
                                        "the resume", "the resumé", "the résume", "the résumé"}),
    (r"\bμ-law\b", _I, {"-law"}),  # Greek: re's case equivalences are not str.lower's
])
def test_required_literals(pattern, flags, literals):
    assert required_literals(re.compile(pattern, flags)) == (
        None if literals is None else frozenset(literals))


def test_fold_maps_every_character_re_matches_with_an_ascii_or_latin1_letter_to_it():
    # re's IGNORECASE matches İ ı ſ and the Kelvin sign with ASCII letters, and each accented
    # Latin-1 letter with its capital: fold must give the same letter for all of them, or a
    # gate would skip a text re matches.
    letters = "abcdefghijklmnopqrstuvwxyzàáâãäåæçèéêëìíîïðñòóôõöøùúûüýþ"
    any_letter = re.compile(f"[{letters}]", _I)
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        if any_letter.fullmatch(ch):
            matched = [x for x in letters if re.fullmatch(x, ch, _I)]
            assert [fold(ch)] == matched, (hex(code), matched)


@pytest.mark.parametrize("text", ["CİALIS now", "cıalis now", "the ſpecial offer", "\u212aXX",
                                  "SPECIAL OFFER", "Special\u00a0offer", "ÉTÉ click HERE"])
def test_gates_open_on_case_variants_re_matches(text):
    for gated in GATED:
        assert bool(gated.search(text)) == bool(gated.pattern.search(text)), gated.pattern


def _pieces() -> st.SearchStrategy[str]:
    literals = sorted({s for g in GATED for s in (g.gate or ())})
    return st.one_of(st.sampled_from(literals), st.sampled_from(literals).map(str.upper),
                     st.text(alphabet="aAiIsSkK İıſ\u212a\n.,-#:$£€0123456789", max_size=6))


@settings(max_examples=300, deadline=None)
@given(st.lists(_pieces(), max_size=12).map("".join))
def test_a_gated_pattern_finds_what_the_pattern_finds(text):
    scanned = Scanned(text)
    for gated in GATED:
        assert bool(gated.search(scanned)) == bool(gated.pattern.search(text)), gated.pattern
        assert [m.span() for m in gated.finditer(scanned)] == \
            [m.span() for m in gated.pattern.finditer(text)], gated.pattern


def test_a_gated_pattern_finds_what_the_pattern_finds_in_real_mail(corpus):
    texts = []
    mailboxes = sorted((corpus / "mailboxes" / "spamassassin-public").glob("*.mbox.gz"))
    for item in iter_sources(mailboxes[:2]):
        if item.raw is not None:
            parsed = parse_message(item.raw)
            texts += [f"{parsed.subject}\n{parsed.text}", parsed.text.upper()]
        if len(texts) >= 600:
            break
    assert len(texts) >= 600
    opened = skipped = 0
    for text in texts:
        scanned = Scanned(text)
        for gated in GATED:
            found = gated.search(scanned)
            assert bool(found) == bool(gated.pattern.search(text)), gated.pattern
            if gated.gate is not None:
                skipped += not gated._open(scanned)
                opened += gated._open(scanned)
    assert skipped > 5 * opened  # the gates are what makes triage cheap: most stay shut
