"""Authentication-Results fields (``shared.mail.auth_results``, RFC 8601): parsing and which
fields are believed; pure."""

from __future__ import annotations

from shared.mail.auth_results import AuthResult, parse_auth_results, trusted_results

OURS = "mx.pylota.test"


def test_a_field_with_every_kind_of_resinfo() -> None:
    parsed = parse_auth_results(
        "mx.pylota.test 1; spf=pass (sender IP is 192.0.2.1) smtp.mailfrom=bounce@acme.example;"
        " dkim=pass (2048-bit key; unprotected) header.d=acme.example header.s=sel1"
        ' header.b="ab;cd"; dmarc=fail reason="policy says so" header.from=acme.example')
    assert parsed is not None and parsed.authserv_id == OURS
    assert parsed.results == [
        AuthResult(method="spf", result="pass",
                   properties={"smtp.mailfrom": "bounce@acme.example"}),
        AuthResult(method="dkim", result="pass",
                   properties={"header.d": "acme.example", "header.s": "sel1",
                               "header.b": "ab;cd"}),
        AuthResult(method="dmarc", result="fail", reason="policy says so",
                   properties={"header.from": "acme.example"})]


def test_none_case_comments_and_junk() -> None:
    assert parse_auth_results("MX.Pylota.Test; none").results == []
    assert parse_auth_results("MX.Pylota.Test; none").authserv_id == OURS
    nested = parse_auth_results(
        "mx.pylota.test; (a (nested) comment) DKIM/1 = PASS header.d=a.example")
    assert nested.results == [AuthResult(method="dkim", result="pass",
                                         properties={"header.d": "a.example"})]
    assert parse_auth_results("mx.pylota.test; garbage here; spf=fail").results == [
        AuthResult(method="spf", result="fail")]
    assert parse_auth_results("") is None
    assert parse_auth_results("; spf=pass") is None


def fields(*pairs: tuple[str, str]) -> list[tuple[str, str]]:
    return list(pairs)


def test_only_the_topmost_trusted_block_counts() -> None:
    headers = fields(
        ("Received", "by internal.pylota.test"),
        ("Authentication-Results", f"{OURS}; dkim=fail header.d=acme.example"),
        ("Authentication-Results", f"{OURS}; spf=fail smtp.mailfrom=acme.example"),
        ("Received", "from sender.example by mx.pylota.test"),
        # Written by the sender (below our Received): claims our id, must not count.
        ("Authentication-Results", f"{OURS}; dkim=pass header.d=acme.example"),
        ("From", "a@acme.example"))
    block = trusted_results(headers, {OURS})
    assert [r.results[0].result for r in block] == ["fail", "fail"]


def test_a_field_of_another_server_and_an_empty_trust_list_count_for_nothing() -> None:
    headers = fields(("Authentication-Results", "mx.other.example; dkim=pass header.d=a.example"))
    assert trusted_results(headers, {OURS}) == []
    assert trusted_results(headers, set()) == []
    assert trusted_results(headers, {"MX.OTHER.EXAMPLE"})[0].authserv_id == "mx.other.example"


def test_a_sender_written_field_is_believed_only_when_it_is_the_topmost() -> None:
    # Documented limit (module docstring): when the trusted server never saw the message and
    # left a forged field in place, nothing above it tells them apart.
    forged = fields(("Received", "from sender.example by relay.example"),
                    ("Authentication-Results", f"{OURS}; dkim=pass header.d=acme.example"))
    assert len(trusted_results(forged, {OURS})) == 1
    ours_on_top = fields(("Authentication-Results", f"{OURS}; dkim=fail header.d=acme.example"),
                         *forged)
    assert [r.results[0].result for r in trusted_results(ours_on_top, {OURS})] == ["fail"]
