"""Tests of the query language parser (``shared.search.query``; spec sections 4.3 and 6.1)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import shared.search
from shared.errors import ErrorCode, PylotaError
from shared.mail.triage import CATEGORIES
from shared.search import query as query_module
from shared.search.query import (
    ATTACHMENT_TYPES,
    MAX_OPERATORS,
    And,
    Not,
    Operator,
    OperatorName,
    Or,
    Phrase,
    Query,
    Term,
    may_use_custom,
    parse,
    render,
)

PATTERNS = {"booking": "[A-Z]{3}[0-9]{3}"}
THREAD_ID = "thr_01HZY8Q6W4C5N2M7R3T9V0XKJB"


def rejected(q: str, **kwargs: object) -> PylotaError:
    """The error ``parse(q)`` raises, checked to be ``invalid_request`` at path ``q`` with a fix."""
    with pytest.raises(PylotaError) as caught:
        parse(q, **kwargs)  # type: ignore[arg-type]
    error = caught.value
    assert error.code is ErrorCode.INVALID_REQUEST
    assert error.details == {"path": "q"}
    assert error.fix and error.fix != error.message
    return error


def op(name: OperatorName, value: str, normalized: str) -> Operator:
    return Operator(name, value, normalized)


# --- operators: valid values ---------------------------------------------------------------------

VALID = [
    ("from:jo@example.net", op(OperatorName.FROM, "jo@example.net", "jo@example.net")),
    ("from:Jo@Example.NET", op(OperatorName.FROM, "Jo@Example.NET", "jo@example.net")),
    ("from:@brightwell.example", op(OperatorName.FROM, "@brightwell.example", "@brightwell.example")),
    ('from:"Jo  Smith"', op(OperatorName.FROM, "Jo Smith", "jo smith")),
    ("FROM:jo", op(OperatorName.FROM, "jo", "jo")),
    ("from:dhowells-H+wXaHxf7aLQT0dZR+AlfA@public.gmane.org",
     op(OperatorName.FROM, "dhowells-H+wXaHxf7aLQT0dZR+AlfA@public.gmane.org",
        "dhowells-h+wxahxf7alqt0dzr+alfa@public.gmane.org")),
    ("to:@example.com", op(OperatorName.TO, "@example.com", "@example.com")),
    ("participant:Worth", op(OperatorName.PARTICIPANT, "Worth", "worth")),
    ("subject:invoice", op(OperatorName.SUBJECT, "invoice", "invoice")),
    ('subject:"PATCH 04/10"', op(OperatorName.SUBJECT, "PATCH 04/10", "patch 04/10")),
    ('subject:Re:"change of  dates"', op(OperatorName.SUBJECT, "Re:change of dates", "re:change of dates")),
    ("ref:ab12cde", op(OperatorName.REF, "ab12cde", "AB12CDE")),
    ('ref:"AB12 CDE"', op(OperatorName.REF, "AB12 CDE", "AB12CDE")),
    ("ref:INV-2026-0042", op(OperatorName.REF, "INV-2026-0042", "INV20260042")),
    ("ref:INV\u20132026", op(OperatorName.REF, "INV\u20132026", "INV2026")),
    ("custom:booking:abc123", op(OperatorName.CUSTOM, "booking:abc123", "booking:ABC123")),
    ('custom:Booking:"ABC 123"', op(OperatorName.CUSTOM, "Booking:ABC 123", "booking:ABC123")),
    ("after:2026-09-01", op(OperatorName.AFTER, "2026-09-01", "2026-09-01")),
    ("before:2026-10-01", op(OperatorName.BEFORE, "2026-10-01", "2026-10-01")),
    ("after:2026-09-01T09:30:00Z", op(OperatorName.AFTER, "2026-09-01T09:30:00Z", "2026-09-01T09:30:00Z")),
    ("before:2026-09-01t01:30:00.25+02:00",
     op(OperatorName.BEFORE, "2026-09-01t01:30:00.25+02:00", "2026-08-31T23:30:00.250000Z")),
    ("newer_than:30d", op(OperatorName.NEWER_THAN, "30d", "30")),
    ("newer_than:2w", op(OperatorName.NEWER_THAN, "2w", "14")),
    ("older_than:6m", op(OperatorName.OLDER_THAN, "6m", "180")),
    ("older_than:1Y", op(OperatorName.OLDER_THAN, "1Y", "365")),
    ("older_than:100y", op(OperatorName.OLDER_THAN, "100y", "36500")),
    ("has:attachment", op(OperatorName.HAS, "attachment", "attachment")),
    ("has:Attachment", op(OperatorName.HAS, "Attachment", "attachment")),
    ("filename:invoice", op(OperatorName.FILENAME, "invoice", "invoice")),
    ('filename:"March Report (1).pdf"', op(OperatorName.FILENAME, "March Report (1).pdf", "march report (1).pdf")),
    ("type:PDF", op(OperatorName.TYPE, "PDF", "pdf")),
    ("in:inbound", op(OperatorName.IN, "inbound", "inbound")),
    ("in:outbound", op(OperatorName.IN, "outbound", "outbound")),
    ("is:unread", op(OperatorName.IS, "unread", "unread")),
    ("is:read", op(OperatorName.IS, "read", "read")),
    ("is:needs_reply", op(OperatorName.IS, "needs_reply", "needs_reply")),
    ("label:claims", op(OperatorName.LABEL, "claims", "claims")),
    ("label:vip:eu-west_2", op(OperatorName.LABEL, "vip:eu-west_2", "vip:eu-west_2")),
    ("label:Claims", op(OperatorName.LABEL, "Claims", "claims")),
    ("label:" + "a" * 64, op(OperatorName.LABEL, "a" * 64, "a" * 64)),
    ("category:billing", op(OperatorName.CATEGORY, "billing", "billing")),
    (f"thread:{THREAD_ID}", op(OperatorName.THREAD, THREAD_ID, THREAD_ID)),
    (f"thread:{THREAD_ID.lower()}", op(OperatorName.THREAD, THREAD_ID.lower(), THREAD_ID)),
]  # fmt: skip


@pytest.mark.parametrize(("q", "expected"), VALID, ids=[q for q, _ in VALID])
def test_operator_valid(q: str, expected: Operator) -> None:
    assert parse(q, custom_patterns=PATTERNS).root == expected


def test_every_operator_has_a_valid_case() -> None:
    assert {expected.name for _, expected in VALID} == set(OperatorName)


def test_every_attachment_type_is_accepted() -> None:
    for kind in ATTACHMENT_TYPES:
        assert parse(f"type:{kind}").root == op(OperatorName.TYPE, kind, kind)


# --- operators: invalid values -------------------------------------------------------------------

# (query, text the message must name)
INVALID = [
    ("from:", "from:"),
    ("from: jo@example.net", "from:"),
    ('from:""', "from:"),
    ("from:jo@", "jo@"),
    ("from:jo@example..net", "jo@example..net"),
    ('to:"jo @ example"', "jo @ example"),
    ("participant:@", "@"),
    ("subject:", "subject:"),
    ("ref:--", "ref:--"),
    ("custom:booking:12", "custom:booking:12"),
    ("custom:booking", "custom:booking"),
    ("custom:flight:AB1234", "flight"),
    ("custom:booking:-", "custom:booking:-"),
    ("after:2026-9-1", "after:2026-9-1"),
    ("after:2026-02-30", "2026-02-30"),
    ("before:yesterday", "before:yesterday"),
    ("before:20260901", "20260901"),
    ("after:2026-09-01T09:30:00", "2026-09-01T09:30:00"),
    ("after:2026-09-01T25:00:00Z", "2026-09-01T25:00:00Z"),
    ("after:0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00+01:00"),
    ("newer_than:30", "newer_than:30"),
    ("newer_than:30h", "newer_than:30h"),
    ("newer_than:0d", "newer_than:0d"),
    ("newer_than:-1d", "newer_than:-1d"),
    ("older_than:101y", "older_than:101y"),
    ("older_than:9999999d", "older_than:9999999d"),
    ("older_than:1.5y", "older_than:1.5y"),
    ("has:attachments", "has:attachments"),
    ("has:pdf", "has:pdf"),
    ("filename:", "filename:"),
    ('filename:" "', "filename:"),
    ("type:exe", "type:exe"),
    ("in:spam", "in:spam"),
    ("is:starred", "is:starred"),
    ("label:-claims", "label:-claims"),
    ("label:" + "a" * 65, "label:aaaa"),
    ('label:"two words"', "two words"),
    ("label:caf\u00e9", "label:caf\u00e9"),
    ("category:" + "x" * 33, "category:xxxx"),
    ("category:invoices", "category:invoices"),
    ("thread:thr_123", "thread:thr_123"),
    ("thread:" + THREAD_ID.replace("Q", "I"), "thread:thr_"),
    ("thread:msg_01HZY8Q6W4C5N2M7R3T9V0XKJB", "msg_01HZY8Q6W4C5N2M7R3T9V0XKJB"),
    ("thread:thr_" + "\u017f" * 26, "thread:thr_\u017f"),
]


@pytest.mark.parametrize(("q", "named"), INVALID, ids=[q[:40] for q, _ in INVALID])
def test_operator_invalid(q: str, named: str) -> None:
    assert named in rejected(q, custom_patterns=PATTERNS).message


def test_every_operator_has_an_invalid_case() -> None:
    names = {q.split(":", 1)[0] for q, _ in INVALID}
    assert names == {str(name) for name in OperatorName}


def test_custom_without_tenant_patterns_points_to_ref() -> None:
    error = rejected("custom:booking:ABC123")
    assert "booking" in error.message
    assert "ref:" in error.fix


def test_custom_fix_lists_the_tenant_patterns() -> None:
    error = rejected("custom:flight:AB1", custom_patterns={"booking": ".*", "pnr": ".*"})
    assert "booking" in error.fix and "pnr" in error.fix


def test_a_repeated_term_counts_once() -> None:
    assert render(parse("-category:list " * 70).root) == "-category:list"
    assert render(parse("van van OR van lorry van").root) == "van lorry"
    assert render(parse("a OR b OR a c").root) == "a OR b c"


def test_category_fix_lists_every_category() -> None:
    fix = rejected("category:invoices").fix
    assert all(f"category:{name}" in fix for name in CATEGORIES)


def test_category_is_case_insensitive() -> None:
    assert parse("category:Billing").root == op(OperatorName.CATEGORY, "Billing", "billing")


def test_bad_value_fix_shows_the_right_form() -> None:
    assert "after:2026-09-01" in rejected("after:01/09/2026").fix
    assert "has:attachment" in rejected("has:file").fix
    assert "older_than:30d" in rejected("older_than:3x").fix
    assert "to:@example.com" in rejected("to:a@").fix


# --- unknown operators and words with colons -----------------------------------------------------


@pytest.mark.parametrize(
    ("q", "named"),
    [
        ("foo:bar", "foo:"),
        ("-cc:jo@example.net", "cc:"),
        ("mailto:jo@example.net", "mailto:"),
        ('re:"x y"', "re:"),
        ('C:"x"', "C:"),
        ("date:2026-09-01", "date:"),
    ],
)
def test_unknown_operator_is_rejected(q: str, named: str) -> None:
    error = rejected(q)
    assert named in error.message
    assert "from:" in error.fix and "quote" in error.fix


def test_unknown_operator_suggests_the_right_one() -> None:
    assert "to:" in rejected("cc:jo@example.net").fix.split("Use one of")[0]
    assert "label:" in rejected("tag:vip").fix.split("Use one of")[0]


@pytest.mark.parametrize(
    "word",
    ["10:30", "4:3", "http://example.com/a:b", "file:///tmp/x", "std::string", "fe80::1",
     "C:\\temp", "a:b", "Acked-by:", "Acked-by:Jo", "Message-ID:<x@y>", "Re:", "Note:", "::1",
     "größe:5", "v2:beta"],
)  # fmt: skip
def test_words_that_only_look_like_operators_are_terms(word: str) -> None:
    assert parse(word).root == Term(word)


# --- precedence, negation, grouping --------------------------------------------------------------


def test_or_binds_tighter_than_and() -> None:
    assert parse("a b OR c d").root == And((Term("a"), Or((Term("b"), Term("c"))), Term("d")))


def test_or_chains_flatten() -> None:
    assert parse("a OR b OR c").root == Or((Term("a"), Term("b"), Term("c")))
    assert parse("(a OR b) OR c").root == Or((Term("a"), Term("b"), Term("c")))


def test_lower_case_or_is_a_word() -> None:
    assert parse("a or b").root == And((Term("a"), Term("or"), Term("b")))
    assert parse("a Or b").root == And((Term("a"), Term("Or"), Term("b")))


def test_or_between_operators_and_phrases() -> None:
    assert parse('from:@a.example OR "late payment" -is:read').root == And((
        Or((op(OperatorName.FROM, "@a.example", "@a.example"), Phrase("late payment"))),
        Not(op(OperatorName.IS, "read", "read")),
    ))  # fmt: skip


def test_negation_applies_to_one_term() -> None:
    assert parse("-draft invoice").root == And((Not(Term("draft")), Term("invoice")))
    assert parse("a OR -b").root == Or((Term("a"), Not(Term("b"))))
    assert parse('-"change of dates"').root == Not(Phrase("change of dates"))
    assert parse("-from:@spam.example").root == Not(op(OperatorName.FROM, "@spam.example", "@spam.example"))


def test_dash_inside_a_word_is_not_negation() -> None:
    assert parse("Acked-by e-mail").root == And((Term("Acked-by"), Term("e-mail")))


def test_parentheses_group() -> None:
    assert parse("(a b) OR c").root == Or((And((Term("a"), Term("b"))), Term("c")))
    assert parse("-(a OR b)").root == Not(Or((Term("a"), Term("b"))))
    assert parse("x (a b) y").root == And((Term("x"), Term("a"), Term("b"), Term("y")))
    assert parse("((a))").root == Term("a")


def test_empty_query_lists_newest() -> None:
    assert parse("") == Query(None)
    assert parse(" \t\n ") == Query(None)
    assert parse("").render() == ""


# --- quoting --------------------------------------------------------------------------------------


def test_phrases() -> None:
    assert parse('"too many open files"').root == Phrase("too many open files")
    assert parse('"  spaced \n out  "').root == Phrase("spaced out")
    assert parse('"a OR -b (c) from:x"').root == Phrase("a OR -b (c) from:x")
    assert parse("\u201ccurly quotes\u201d").root == Phrase("curly quotes")


def test_quote_ends_a_word() -> None:
    assert parse('say"hello world"now').root == And((Term("say"), Phrase("hello world"), Term("now")))


def test_quoted_operator_values() -> None:
    assert parse('from:"Jo Smith"').root == op(OperatorName.FROM, "Jo Smith", "jo smith")
    assert parse('is:"unread"').root == op(OperatorName.IS, "unread", "unread")


@pytest.mark.parametrize("q", ['"abc', 'a "b', 'from:"Jo', 'subject:"PATCH 04/10', '"a" "b'])
def test_unbalanced_quote_is_an_error(q: str) -> None:
    error = rejected(q)
    assert "quote" in error.message.lower()
    assert '"' in error.message


# --- syntax errors name their token and give a fix -------------------------------------------------

SYNTAX_ERRORS = [
    ("-", "'-'"),
    ("a - b", "'-'"),
    ("a -", "'-'"),
    ("--force", "'--'"),
    ("-OR b", "'OR'"),
    ("(a -)", "'-'"),
    ("OR", "'OR'"),
    ("OR a", "'OR'"),
    ("a OR", "'OR'"),
    ("a OR OR b", "'OR'"),
    ("(a OR) b", "'OR'"),
    ('""', '\'""\''),
    ("a)", "')'"),
    ("(a", "'('"),
    ("()", "'()'"),
    ("(" * 17 + "a" + ")" * 17, "'('"),
]


@pytest.mark.parametrize(("q", "named"), SYNTAX_ERRORS, ids=[q[:20] for q, _ in SYNTAX_ERRORS])
def test_syntax_error_names_token(q: str, named: str) -> None:
    error = rejected(q)
    assert named in error.message
    assert "character" in error.message


def test_error_message_gives_position() -> None:
    assert "character 9" in rejected("invoice foo:bar").message


def test_long_token_is_cut_in_message() -> None:
    error = rejected("from:" + "x" * 500 + "@")
    assert len(error.message) < 250


def test_sixteen_levels_of_parentheses_parse() -> None:
    assert parse("(" * 16 + "a" + ")" * 16).root == Term("a")


# --- render ---------------------------------------------------------------------------------------

CANONICAL = [
    ("a   b OR c\td", "a b OR c d"),
    ("(a b) OR c", "(a b) OR c"),
    ("(a OR b) c", "a OR b c"),
    ("-(a b)", "-(a b)"),
    ("-(-a)", "-(-a)"),
    ('SUBJECT:"x"', "subject:x"),
    ('from:"Jo   Smith"', 'from:"Jo Smith"'),
    ('custom:booking:"ABC 123"', 'custom:"booking:ABC 123"'),
    ("\u201cx y\u201d", '"x y"'),
    ('Re: "x"', 'Re: "x"'),
    ('filename:"a(1).pdf"', 'filename:"a(1).pdf"'),
]


@pytest.mark.parametrize(("q", "canonical"), CANONICAL)
def test_render_is_canonical(q: str, canonical: str) -> None:
    parsed = parse(q, custom_patterns=PATTERNS)
    assert parsed.render() == canonical
    assert parse(canonical, custom_patterns=PATTERNS) == parsed


@pytest.mark.parametrize("q", [q for q, _ in VALID] + [q for q, _ in CANONICAL])
def test_render_round_trips(q: str) -> None:
    parsed = parse(q, custom_patterns=PATTERNS)
    assert parse(parsed.render(), custom_patterns=PATTERNS) == parsed


def test_render_parenthesizes_hand_built_nesting() -> None:
    assert render(And((Term("a"), And((Term("b"), Term("c")))))) == "a (b c)"
    assert render(Or((Term("a"), Or((Term("b"), Term("c")))))) == "a OR (b OR c)"


def test_ast_round_trips_through_json() -> None:
    parsed = parse('-(a OR "b c") from:@x.example newer_than:1w')
    assert msgspec.json.decode(msgspec.json.encode(parsed), type=Query) == parsed


# --- the QA kit's real queries ----------------------------------------------------------------------


def test_search_dev_queries_parse(kit: Path) -> None:
    path = kit / "qa" / "search-dev.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found: the kit has no search judgments")
    queries = [json.loads(line)["query"] for line in path.read_text().splitlines() if line.strip()]
    assert queries
    for q in queries:
        parsed = parse(q)
        assert parsed.root is not None, q
        assert parse(parsed.render()) == parsed, q


def test_search_dev_operators_are_read_as_operators() -> None:
    # Queries of search-dev.jsonl, pinned so the shape holds without the kit.
    assert parse('subject:"PATCH 04/10"').root == op(OperatorName.SUBJECT, "PATCH 04/10", "patch 04/10")
    assert parse("Acked-by after:2010-11-01 before:2010-12-31").root == And((
        Term("Acked-by"),
        op(OperatorName.AFTER, "2010-11-01", "2010-11-01"),
        op(OperatorName.BEFORE, "2010-12-31", "2010-12-31"),
    ))  # fmt: skip
    assert parse("notmuch won't compile on a Mac").root == And(
        tuple(Term(word) for word in "notmuch won't compile on a Mac".split())
    )


# --- properties -------------------------------------------------------------------------------------


def parse_or_reject(q: str) -> Query | None:
    """``parse(q)``, or None when it raises ``invalid_request``; any other exception fails."""
    try:
        return parse(q, custom_patterns=PATTERNS)
    except PylotaError as error:
        assert error.code is ErrorCode.INVALID_REQUEST
        assert error.details == {"path": "q"}
        return None


def check_round_trip(q: str) -> None:
    parsed = parse_or_reject(q)
    if parsed is not None:
        rendered = parsed.render()
        assert parse(rendered, custom_patterns=PATTERNS) == parsed
        assert parse(rendered, custom_patterns=PATTERNS).render() == rendered


@settings(max_examples=500)
@given(st.text(max_size=1024))
def test_arbitrary_text_parses_or_is_invalid_request(q: str) -> None:
    check_round_trip(q)


OPERATORISH = st.one_of(
    st.sampled_from(
        [f"{name}:" for name in OperatorName]
        + ["FROM:", "Subject:", "foo:", "cc:", "http:", "Re:", "a:", "10:", "-", "--", "OR", "or",
           "(", ")", '"', "\u201c", "\u201d", ":", "::", "//", "@", "thr_", "custom:booking:"]
    ),
    st.sampled_from(
        ["jo@example.net", "@example.com", "Jo", "2026-09-01", "2026-02-30", "2026-09-01T09:30:00Z",
         "30d", "1y", "0d", "attachment", "pdf", "inbound", "unread", "needs_reply", "claims",
         THREAD_ID, "AB12 CDE", "ABC123", "x", ""]
    ),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
)  # fmt: skip


@settings(max_examples=500)
@given(st.lists(st.tuples(OPERATORISH, st.sampled_from(["", " ", "  ", "\t"])), max_size=30))
def test_operatorish_text_parses_or_is_invalid_request(parts: list[tuple[str, str]]) -> None:
    check_round_trip("".join(token + gap for token, gap in parts))


WORD = st.text(alphabet="abcXYZ019_.@'/", min_size=1, max_size=6)
ATOM = st.one_of(
    WORD,
    WORD.map(lambda w: f'"{w} {w}"'),
    st.sampled_from([q for q, _ in VALID]),
)


def compose(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        children.map(lambda q: f"-({q})"),
        st.lists(children, min_size=2, max_size=4).map(" OR ".join),
        st.lists(children, min_size=2, max_size=4).map(lambda qs: "(" + " ".join(qs) + ")"),
    )


@settings(max_examples=300)
@given(st.recursive(st.one_of(ATOM, ATOM.map(lambda q: "-" + q)), compose, max_leaves=12))
def test_generated_valid_queries_round_trip(q: str) -> None:
    parsed = parse(q, custom_patterns=PATTERNS)
    assert parsed.root is not None
    assert parse(parsed.render(), custom_patterns=PATTERNS) == parsed


def test_a_query_holds_at_most_max_operators() -> None:
    refs = [f"ref:AB{n:03d}" for n in range(MAX_OPERATORS + 1)]
    assert len(parse(" ".join(refs[:MAX_OPERATORS])).root.nodes) == MAX_OPERATORS
    assert parse(" ".join(["ref:AB001"] * 40)).root is not None  # a repeat is one operator
    for q in (" ".join(refs), " OR ".join(refs), "invoice -(" + " ".join(refs) + ")"):
        with pytest.raises(PylotaError) as caught:
            parse(q)
        assert caught.value.code is ErrorCode.INVALID_REQUEST
        assert caught.value.details["path"] == "q"
        assert f"holds {MAX_OPERATORS + 1} operators" in caught.value.message


def _outcome(q: str, patterns: dict[str, str]) -> object:
    try:
        return parse(q, custom_patterns=patterns)
    except PylotaError as exc:
        return exc.message


@settings(max_examples=300)
@given(st.lists(st.tuples(OPERATORISH, st.sampled_from(["", " ", "booking:ABC123 ", "x"])),
                max_size=12))
def test_a_query_that_may_not_use_custom_parses_alike_whatever_the_patterns(
        parts: list[tuple[str, str]]) -> None:
    """mail_search reads the tenant's patterns only when ``may_use_custom`` says so."""
    q = "".join(token + gap for token, gap in parts)
    if not may_use_custom(q):
        assert _outcome(q, {}) == _outcome(q, PATTERNS)


@pytest.mark.parametrize("q", ["custom:booking:ABC123", "CUSTOM:booking:ABC123",
                               'a (Custom:booking:"ABC 123")', "-cUsToM:booking:abc123"])
def test_custom_in_any_case_needs_the_patterns(q: str) -> None:
    assert may_use_custom(q)
    assert _outcome(q, {}) != _outcome(q, PATTERNS)


# --- public surface -----------------------------------------------------------------------------------


def test_exported_members() -> None:
    assert shared.search.__all__ == []
    public = {
        name
        for name, member in vars(query_module).items()
        if not name.startswith("_")
        and (inspect.isclass(member) or inspect.isfunction(member))
        and getattr(member, "__module__", None) == query_module.__name__
    }
    assert public <= set(query_module.__all__)
    assert all(hasattr(query_module, name) for name in query_module.__all__)


@pytest.mark.parametrize("q", [
    "after:2026-10-01 before:2026-09-01", "invoice after:2026-09-01 before:2026-09-01",
    "after:2026-09-02T10:00:00Z before:2026-09-02T09:00:00+00:00",
])
def test_an_after_not_before_its_before_is_an_error(q: str) -> None:
    # swapped dates gave 0 hits without a word (found by an attack)
    error = rejected(q)
    assert error.details == {"path": "q"} and "no message can match" in error.message
    assert error.fix is not None and "Swap" in error.fix


@pytest.mark.parametrize("q", [
    "after:2026-09-01 before:2026-09-02", "after:2026-09-01T09:00:00Z before:2026-09-01T10:00:00Z",
    "after:2026-10-01 OR before:2026-09-01",  # either side of a range: not one range
    "after:2026-09-02 before:2026-09-02T00:30:00+14:00",  # a date and an instant: zone unknown
])
def test_a_range_that_can_match_is_kept(q: str) -> None:
    assert parse(q).root is not None
