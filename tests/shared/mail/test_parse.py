"""``shared.mail.parse``: raw bytes to ParsedMessage, on our fixtures and on the kit's real mail."""

from __future__ import annotations

import base64
import binascii
import email
import email.policy
import hashlib
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from shared.mail.model import Address, ParsedMessage
from shared.mail.parse import CHARSET_ALIASES, MAX_HEADER_CHARS, MAX_HEADERS, parse_message
from shared.mail.sources import iter_sources


def _parse(path: Path) -> ParsedMessage:
    return parse_message(path.read_bytes())


# Our fixtures ------------------------------------------------------------------------------------


def test_rfc2047_headers_and_addresses(fixtures: Path) -> None:
    msg = _parse(fixtures / "rfc2047_subject.eml")
    assert msg.subject == "Résumé des décisions €"
    assert msg.from_ == Address(address="juergen.mueller@example.de", name="Jürgen Müller")
    assert msg.to == [
        Address(address="team@example.com", name="Team"),
        Address(address="rene@example.com", name="René"),
    ]
    assert msg.cc == []  # an empty group is no address
    assert msg.message_id == "abc.123@mail.example.de"
    assert msg.sent_at == datetime(2024, 3, 5, 13, 30, tzinfo=UTC)
    assert msg.text == "Grüße aus München.\n"
    assert msg.defects == []


def test_latin1_label_is_read_as_windows_1252(fixtures: Path) -> None:
    # 0x80 and 0x96 are C1 controls in ISO-8859-1 but "€" and "–" in windows-1252 (WHATWG).
    assert _parse(fixtures / "latin1_euro.eml").text == "Café costs 5 € – cheap.\n"


def test_ks_c_5601_1987_body_and_subject(fixtures: Path) -> None:
    msg = _parse(fixtures / "ks_c_5601.eml")
    assert msg.subject == "회의"
    assert msg.text == "안녕하세요, 회의는 내일입니다."
    assert msg.sent_at == datetime(2024, 3, 7, 1, 0, tzinfo=UTC)


def test_html_only_body_is_rendered(fixtures: Path) -> None:
    # Plain text, no Markdown (issue 11): no "#" before headings, no "**", no link brackets.
    text = _parse(fixtures / "html_only.eml").text
    assert text.startswith("Spring sale\n\nPrices down 20")
    assert "the sale <https://example.com/sale>" in text  # the address beside its text
    assert "tracker" not in text  # images ignored
    assert "*" not in text and "#" not in text and "](" not in text


@pytest.mark.parametrize("body", [b"<HTML>\n<BODY><p>Cheap <b>pills</b> &amp; more</p></BODY></HTML>",
                                  b"  <!DOCTYPE html><html><body><p>Cheap <b>pills</b> &amp; more"])
def test_a_bare_html_body_without_content_type_is_read_as_html(body: bytes) -> None:
    parsed = parse_message(b"From: a@example.com\r\nSubject: offer\r\n\r\n" + body)
    assert parsed.text.strip() == "Cheap pills & more"
    assert any(d.startswith("Content-Type: missing") for d in parsed.defects)
    # declared text/plain stays as it was sent
    declared = parse_message(b"From: a@example.com\r\nContent-Type: text/plain\r\n\r\n" + body)
    assert "<p>" in declared.text


def test_attachments_are_byte_exact(fixtures: Path) -> None:
    msg = _parse(fixtures / "attachment.eml")
    assert msg.text == "See the report."  # text/plain wins over the text/html alternative
    data, logo, inner = msg.attachments
    assert (data.filename, data.content_type, data.disposition) == (
        "résultats 2024.bin", "application/octet-stream", "attachment")
    assert data.content == bytes(range(256)) * 3
    assert (logo.filename, logo.disposition, logo.content_id) == (
        "logo été.png", "inline", "logo@example.com")
    assert logo.content == b"\x89PNG\r\n\x1a\n"
    assert inner.content_type == "message/rfc822" and inner.filename is None
    assert parse_message(inner.content).subject == "Inner"
    # part_index counts every part depth-first: 0 mixed, 1 alternative, 2 plain, 3 html, ...
    assert [a.part_index for a in msg.attachments] == [4, 5, 6]


@pytest.mark.parametrize("encoding", ["base64", "quoted-printable"])
def test_an_attached_message_sent_encoded_is_stored_decoded(encoding: str) -> None:
    """RFC 2046 section 5.2.1 allows no encoding on message/rfc822, but mailers base64 it; the
    stored attachment was the base64 text (a forward then sent a message of no header; found by
    a new user on the kit's php-mime-mail-parser issue274.eml)."""
    import base64
    import quopri

    inner = (b"From: Inner <in@example.com>\r\nSubject: Inner =?utf-8?q?caf=C3=A9?=\r\n\r\n"
             b"Body with a long line " + b"x" * 90 + b" and caf\xc3\xa9.\r\n")
    encoded = (base64.encodebytes(inner) if encoding == "base64"
               else quopri.encodestring(inner))
    raw = (b"From: a@example.com\r\nSubject: fwd\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
           b"Content-Type: text/plain\r\n\r\nsee attached\r\n--b\r\n"
           b"Content-Type: message/rfc822; name=inner.eml\r\n"
           b"Content-Transfer-Encoding: " + encoding.encode() + b"\r\n\r\n"
           + encoded.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n") + b"--b--\r\n")
    [attached] = parse_message(raw).attachments
    assert attached.content_type == "message/rfc822"
    # (the line break before the boundary is the boundary's: RFC 2046 section 5.1.1)
    assert attached.content.replace(b"\r\n", b"\n").rstrip(b"\n") == \
        inner.replace(b"\r\n", b"\n").rstrip(b"\n")
    assert parse_message(attached.content).subject == "Inner café"


def test_an_attached_message_labelled_base64_that_is_not_is_kept_as_it_came() -> None:
    """binascii raised on it and the whole body was lost: no text, no attachment (a regression
    found by an attack)."""
    raw = (b"From: a@example.com\r\nSubject: s\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
           b"Content-Type: text/plain\r\n\r\nsee attached\r\n--b\r\n"
           b"Content-Type: message/rfc822\r\nContent-Transfer-Encoding: base64\r\n\r\n"
           b"abcde\r\n--b--\r\n")
    msg = parse_message(raw)
    assert msg.text == "see attached"
    [attached] = msg.attachments
    assert attached.content_type == "message/rfc822" and b"abcde" in attached.content


def test_an_encoded_word_is_one_token_of_a_display_name_never_an_address() -> None:
    """An encoded word whose text holds ":" and "@" (invalid in a phrase, so the default policy
    fails and the field is read as compat32) was split as a group and gave the sender
    "_x@evil.example?="; its decoded line break reached the stored From field, which showed an
    agent reading the headers a Bcc field (found by an attack)."""
    raw = (b"From: =?utf-8?q?Evil=0D=0ABcc:_x@evil.example?= <boss@partner.example>\r\n"
           b"To: me@here.example\r\nX-Note: =?utf-8?q?a=0D=0AB:_c?=\r\nSubject: s\r\n\r\nhi\r\n")
    msg = parse_message(raw)
    assert msg.from_ == Address(address="boss@partner.example", name="Evil  Bcc: x@evil.example")
    fields = dict(msg.headers)
    assert fields["From"] == "Evil  Bcc: x@evil.example <boss@partner.example>"
    assert fields["X-Note"] == "a  B: c"
    assert "X-Note: a line break or control character in its text, made a space" \
        in msg.defects
    # A quoted display name is left as it is.
    quoted = parse_message(b'From: "=?utf-8?q?A:b?=" <a@x.example>\r\n\r\nhi\r\n')
    assert quoted.from_ == Address(address="a@x.example", name="A:b")


def test_an_encoded_word_between_angle_brackets_is_no_address() -> None:
    """``<=?utf-8?q?boss@x.example?=>`` reads as the quoted local part ``"boss@x.example"`` with
    no domain, which passed for an address and showed an agent boss@x.example as the sender."""
    for field in (b"Boss <=?utf-8?q?boss@x.example?=>", b"<=?utf-8?q?boss=40x.example?=>"):
        msg = parse_message(b"From: " + field + b"\r\nTo: me@here.example\r\n\r\nhi\r\n")
        assert msg.from_ is None, field
        assert any(d.startswith("From: dropped") and "not an address" in d
                   for d in msg.defects), msg.defects
    # Quoted local parts, with "@" in them too, and domain literals are addresses.
    for written in ('"john doe"@x.example', '"a@b"@x.example', "a@[192.0.2.1]"):
        msg = parse_message(f"From: {written}\r\n\r\nhi\r\n".encode())
        assert msg.from_ is not None and msg.from_.address == written, written


def test_an_encoded_word_the_default_policy_cannot_decode_is_read_as_compat32() -> None:
    """An iso-2022-jp word with a byte pair its codec refuses was kept as the encoded word and
    shown as the subject (found by a new user); it reads with a replacement character."""
    word = base64.b64encode(b"\x1b$B'('%-b\x1b(B41 \x1b$B'`'d\x1b(B 28.09.2016").decode()
    msg = parse_message(f"From: a@x.example\r\nSubject: =?iso-2022-jp?B?{word}?=\r\n\r\n"
                        "hi\r\n".encode())
    assert msg.subject == "\u0416\u0414\ufffd41 \u043e\u0442 28.09.2016"
    assert "Subject: an encoded word the default policy left undecoded; read as compat32" \
        in msg.defects
    # a word the default policy decodes is its reading, without a defect
    plain = parse_message(b"From: a@x.example\r\nSubject: =?utf-8?q?caf=C3=A9?=\r\n\r\nhi\r\n")
    assert plain.subject == "caf\u00e9" and not plain.defects


def test_without_a_usable_date_the_earliest_received_field_dates_the_message() -> None:
    """An archive's messages without Date were dated at their import and listed as the newest
    mail (77 of the kit's messages; found by a new user)."""
    received = datetime(2026, 12, 3, tzinfo=UTC)
    hops = (b"Received: from b by c; Tue, 03 Nov 2009 10:00:05 +0000\r\n"
            b"Received: from a by b; Tue, 03 Nov 2009 09:59:00 -0100\r\n"
            b"Received: from nowhere; not a date\r\n")
    for date in (b"", b"Date: yesterday-ish\r\n", b"Date: Mon, 02 Nov 2099 10:00:00 +0000\r\n"):
        msg = parse_message(hops + date + b"From: a@x.example\r\n\r\nhi\r\n",
                            received_at=received)
        assert msg.sent_at == datetime(2009, 11, 3, 10, 59, tzinfo=UTC), date
        assert "Date: none usable; the earliest Received field's date stands for it" \
            in msg.defects
    dated = parse_message(hops + b"Date: Tue, 03 Nov 2009 09:58:00 -0100\r\n\r\nhi\r\n",
                          received_at=received)
    assert dated.sent_at == datetime(2009, 11, 3, 10, 58, tzinfo=UTC) and not dated.defects
    assert parse_message(b"From: a@x.example\r\n\r\nhi\r\n").sent_at is None


def test_raw_line_breaks_in_a_field_become_spaces() -> None:
    """Unfolding removes CR LF only; a VT, FF, FS or U+2028 written in the raw field (or a CR LF
    in an RFC 2231 filename) stayed in the stored value, where a reader that breaks lines there
    shows an agent a field that was never sent."""
    raw = ("From: Boss\u2028Reply-To Evil <boss@partner.example>\r\n"
           "To: me@here.example\r\nSubject: Pay\x0bBcc: x@evil.example\r\n"
           "X-Note: a\x0cb\x1cc\r\nMIME-Version: 1.0\r\n"
           "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
           "Content-Type: text/plain\r\n\r\nhi\r\n--b\r\n"
           "Content-Type: application/pdf\r\n"
           "Content-Disposition: attachment; filename*=utf-8''a%0D%0AX-Evil%3A%20y.pdf\r\n"
           "\r\nJVBERi0=\r\n--b--\r\n").encode()
    msg = parse_message(raw)
    fields = dict(msg.headers)
    assert msg.subject == fields["Subject"] == "Pay Bcc: x@evil.example"
    assert fields["X-Note"] == "a b c"
    assert msg.from_ == Address(address="boss@partner.example", name="Boss Reply-To Evil")
    assert fields["From"] == "Boss Reply-To Evil <boss@partner.example>"
    assert msg.text.strip() == "hi"
    [attached] = msg.attachments
    assert attached.filename == "a  X-Evil: y.pdf"
    for field in ("Subject", "X-Note", "From", "filename"):
        assert f"{field}: a line break or control character in its text, made a space" \
            in msg.defects


def test_ids_that_are_not_msg_ids_become_defects(fixtures: Path) -> None:
    msg = _parse(fixtures / "reply_yes.eml")
    assert msg.in_reply_to == []
    assert msg.references == ["a@example.com", "b@example.com", "c@example.com"]
    assert msg.message_id == "no-brackets@example.com"  # bare but has an "@": accepted
    assert "In-Reply-To: '<yes>' is not a msg-id" in msg.defects
    assert "References: '<nope>' is not a msg-id" in msg.defects


def test_broken_date_is_none_with_defect(fixtures: Path) -> None:
    msg = _parse(fixtures / "reply_yes.eml")
    assert msg.sent_at is None
    assert "Date: unparseable 'not a date at all'" in msg.defects


def test_naive_date_is_utc_and_offsets_convert() -> None:
    naive = parse_message(b"Date: Mon, 11 Mar 2024 10:00:00 -0000\n\nx\n")
    assert naive.sent_at == datetime(2024, 3, 11, 10, 0, tzinfo=UTC)
    offset = parse_message(b"Date: Mon, 11 Mar 2024 10:00:00 +0530\n\nx\n")
    assert offset.sent_at == datetime(2024, 3, 11, 4, 30, tzinfo=UTC)


def test_8bit_headers_fall_back_to_utf8_then_windows_1252() -> None:
    msg = parse_message(
        b"From: \xc9milie <EMILIE@example.com>\nSubject: caf\xc3\xa9\nTo: Jos\xe9 <jose@example.com>\n\n"
    )
    assert msg.subject == "café"
    assert msg.from_ == Address(address="emilie@example.com", name="Émilie")
    assert msg.to == [Address(address="jose@example.com", name="José")]
    assert "From: undecodable text; read as compat32" in msg.defects


def test_unknown_charset_word_and_body() -> None:
    msg = parse_message(
        b"Subject: =?x-unknown?q?Mobilit=C3=A9?= ok\n"
        b"Content-Type: text/plain; charset=x-unknown\n\nEnvoy\xe9\n"
    )
    assert msg.subject == "Mobilité ok"
    assert msg.text == "Envoyé\n"


def test_charset_aliases_name_real_codecs() -> None:
    import codecs

    for label, codec in CHARSET_ALIASES.items():
        assert codec is None or codecs.lookup(codec), label
    assert CHARSET_ALIASES["ks_c_5601-1987"] == "cp949"
    assert CHARSET_ALIASES["iso-8859-8-i"] == "iso-8859-8"


def test_headers_are_kept_in_order_and_bounded() -> None:
    raw = b"".join(b"X-N: %d\n" % i for i in range(MAX_HEADERS + 5)) + b"X-Long: " + b"a" * 3000
    msg = parse_message(raw + b"\n\nbody\n")
    assert len(msg.headers) == MAX_HEADERS
    assert msg.headers[:2] == [("X-N", "0"), ("X-N", "1")]
    assert f"headers: kept the first {MAX_HEADERS} of {MAX_HEADERS + 6}" in msg.defects
    long = parse_message(b"X-Long: " + b"a" * 3000 + b"\n\nbody\n")
    assert long.headers == [("X-Long", "a" * MAX_HEADER_CHARS)]


def test_nul_is_replaced_in_text() -> None:
    msg = parse_message(b"Subject: a\x00b\n\nbinary \x00 byte\n")
    assert (msg.subject, msg.text) == ("a\ufffdb", "binary \ufffd byte\n")


def test_garbage_never_raises() -> None:
    for raw in (b"", b"\x00\xff" * 100, b"Content-Type: multipart/mixed\n\n--x\n", b":::\n\n",
                b"From: <>, @, \"\" <@>\nTo: ;;;\n\n"):
        msg = parse_message(raw)
        assert msg.from_ is None and msg.to == [] and msg.message_id is None


# The kit's corpus --------------------------------------------------------------------------------


def test_every_kit_single_parses(corpus: Path) -> None:
    parsed = 0
    for item in iter_sources([corpus / "singles"]):
        if item.raw is None:
            continue
        msg = parse_message(item.raw)
        assert not any(d.startswith("unparseable") for d in msg.defects), item.origin
        parsed += 1
    assert parsed == 504


def _single(corpus: Path, name: str) -> ParsedMessage:
    [item] = iter_sources([corpus / "singles" / name])
    assert item.raw is not None
    return parse_message(item.raw)


def test_kit_rfc2047_subjects_and_names(corpus: Path) -> None:
    msg = _single(corpus, "flanker/bilingual-simple.eml")
    assert msg.subject == "Simple text. How are you? Как ты поживаешь?"
    assert msg.text.startswith("This line is in English\nА эта линия по-русски.\n")
    base = _single(corpus, "imap_tools/base.eml")
    assert base.subject == "Соберите всю почту в этот ящик"
    assert base.from_ == Address(address="hello@yandex.ru", name="Яндекс")


def test_kit_ks_c_5601_body_matches_cp949_decode(corpus: Path) -> None:
    path = corpus / "singles/imap_tools/multi_charset/ks_c_5601-1987.eml"
    payload = email.message_from_bytes(path.read_bytes()).get_payload(decode=True)
    assert _parse(path).text == payload.decode("cp949").replace("\r\n", "\n") == "스티해\n"


def test_kit_mislabelled_utf8_bodies(corpus: Path) -> None:
    # Labelled gb2312 and x-mac-cyrillic, both actually UTF-8.
    assert _single(corpus, "spamscope-mail-parser/mail_test_12.eml").text.startswith("你好！我公司")
    assert "ACADEMIC NEWSLETTER #11 | March 2019" in _single(
        corpus, "php-mime-mail-parser/issue230.eml").text
    assert "–" in _single(corpus, "php-mime-mail-parser/issue230.eml").text


def test_kit_x_unknown_body(corpus: Path) -> None:
    text = _single(corpus, "imap_tools/plain_emails/raw_email10.eml").text
    assert "Envoyé par le service de messagerie texte de Bell Mobilité." in text


def test_kit_html_only_is_rendered(corpus: Path) -> None:
    text = _single(corpus, "imap_tools/base.eml").text
    # Its <title> sits in the body, where browsers do not show it; neither do we.
    assert text.startswith("Здравствуйте!\n\nЕсли у Вас уже есть почтовые ящики")
    assert "настройте сбор почты <https://mail.yandex.ru/neo2/#setup/collectors>" in text
    assert "<div" not in text and "<td" not in text


def _stdlib_attachments(path: Path) -> dict[str, bytes]:
    msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.compat32)
    return {p.get_filename(): p.get_payload(decode=True) for p in msg.walk() if p.get_filename()}


def test_kit_pdf_attachment_is_byte_exact(corpus: Path) -> None:
    path = corpus / "singles/flanker/attached-pdf.eml"
    [pdf] = _parse(path).attachments
    assert (pdf.filename, pdf.content_type, len(pdf.content)) == ("test.pdf", "application/pdf", 6940)
    assert pdf.content.startswith(b"%PDF-")
    expected = _stdlib_attachments(path)["test.pdf"]
    assert hashlib.sha256(pdf.content).hexdigest() == hashlib.sha256(expected).hexdigest()


def test_kit_many_attachments_and_rfc2231_names(corpus: Path) -> None:
    path = corpus / "singles/php-mime-mail-parser/issue408.eml"
    msg = _parse(path)
    assert len(msg.attachments) == 328
    assert {a.filename: a.content for a in msg.attachments} == _stdlib_attachments(path)
    korean = _single(corpus, "php-mime-mail-parser/m0018.eml")
    assert [a.filename for a in korean.attachments] == ["사진.JPG", "ATT00001.txt"]


def test_kit_lkml_maildir_and_mbox_agree(corpus: Path) -> None:
    folder = corpus / "mailboxes/notmuch-lkml"
    texts: list[dict[str | None, set[str]]] = []
    for source in (folder / "maildir", folder / "notmuch-lkml.mbox"):
        by_id: dict[str | None, set[str]] = defaultdict(set)
        count = 0
        for item in iter_sources([source]):
            assert item.raw is not None
            msg = parse_message(item.raw)
            by_id[msg.message_id].add(msg.text)
            count += 1
        assert (count, len(by_id)) == (210, 176)
        assert None not in by_id
        texts.append(by_id)
    # The mbox holds the maildir's bytes (LF, mboxrd-escaped), so every text is identical.
    assert texts[0] == texts[1]


def test_headers_are_kept_as_written_and_unfolded() -> None:
    raw = (b"From: a@x.example\r\nDate: Mon, 01 Sep 2026 09:12:00 +0100\r\n"
           b"Subject: lib/message: Add function to get maildir\r\n\tflags.\r\n"
           b"Content-Type: text/plain; charset=utf-8\r\n\r\nbody\r\n")
    parsed = parse_message(raw)
    headers = dict(parsed.headers)
    assert headers["Date"] == "Mon, 01 Sep 2026 09:12:00 +0100"  # 1 Sep 2026 is a Tuesday
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert parsed.subject == "lib/message: Add function to get maildir flags."
    assert parsed.sent_at is not None and parsed.sent_at.hour == 8


# Reading what a message says (issue 11) ------------------------------------------------------------

HEAD = b"From: Ann <ann@x.example>\r\nTo: desk@acme.example\r\nSubject: s\r\nMIME-Version: 1.0\r\n"


def _alternative(plain: str, html: str) -> bytes:
    return (HEAD + b"Content-Type: multipart/alternative; boundary=alt\r\n\r\n--alt\r\n"
            b"Content-Type: text/plain; charset=utf-8\r\n\r\n" + plain.encode() + b"\r\n--alt\r\n"
            b"Content-Type: text/html; charset=utf-8\r\n\r\n" + html.encode() + b"\r\n--alt--\r\n")


def test_a_placeholder_plain_part_gives_way_to_the_html() -> None:
    html = "<p>Your <b>order 4411</b> has shipped.</p><p>Track it <a href='https://t.example/4411'>here</a>.</p>"
    for stub in ("View this email in your browser", "See HTML version for full formatting",
                 "This message is in HTML format.", "Your email client does not support HTML",
                 "", "  \r\n  "):
        text = parse_message(_alternative(stub, html)).text
        assert text.startswith("Your order 4411 has shipped."), (stub, text)
        assert "here <https://t.example/4411>" in text


def test_a_real_plain_part_is_kept_even_when_it_mentions_the_browser() -> None:
    plain = ("Hi Ann,\r\n\r\nThe invoice is attached. If the portal does not open, view it in your"
             " browser at the usual address.\r\n\r\nJo")
    assert parse_message(_alternative(plain, "<p>Hi Ann</p>")).text.startswith("Hi Ann,\n\nThe invoice")


def test_a_header_the_parser_cannot_read_costs_that_header_only() -> None:
    raw = (b"From: Ann <ann@x.example>\r\nTo: \"unterminated <bob@y.example>\r\n"
           b"Cc: <<<@@@>>>, carl@z.example\r\nSubject: =?utf-8?q?broken=ZZ?= but kept\r\n"
           b"X-Bad\x00Name: nul\r\nThis line is no header at all\r\n"
           b"Date: Mon, 1 Jan 2024 00:00:00 +0000\r\n\r\nthe text\r\n")
    parsed = parse_message(raw)
    assert parsed.from_ == Address(address="ann@x.example", name="Ann")
    assert "but kept" in parsed.subject
    assert parsed.sent_at == datetime(2024, 1, 1, tzinfo=UTC)
    assert parsed.text.startswith("the text")
    assert any(d.startswith("header: dropped 2 line") for d in parsed.defects)  # NUL, no colon
    assert not any(d.startswith("unparseable") for d in parsed.defects)


def test_an_absurd_date_gives_way_to_the_received_time() -> None:
    received = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
    for date in ("Mon, 01 Jan 0102 00:00:00 +0000", "Sun, 31 Dec 1989 23:59:59 +0000",
                 "Wed, 04 Nov 2026 10:00:01 +0000"):
        parsed = parse_message(b"Date: " + date.encode() + b"\r\n\r\nx\r\n", received_at=received)
        assert parsed.sent_at is None, date
        assert any(d.startswith("Date: absurd") for d in parsed.defects), date
    for date, when in (("Mon, 01 Jan 1990 00:00:00 +0000", datetime(1990, 1, 1, tzinfo=UTC)),
                       ("Tue, 03 Nov 2026 09:59:00 +0000", datetime(2026, 11, 3, 9, 59, tzinfo=UTC))):
        parsed = parse_message(b"Date: " + date.encode() + b"\r\n\r\nx\r\n", received_at=received)
        assert parsed.sent_at == when and parsed.defects == []


async def test_an_absurd_date_is_stored_as_the_received_time(conn) -> None:
    from shared.ingest.pipeline import ingest_raw
    from shared.tenancy.store import create_identity, create_tenant

    tenant = await create_tenant(conn, "acme")
    identity = await create_identity(conn, tenant.id, "desk@acme.example")
    outcome, defects = await ingest_raw(conn, None, identity.id,
                                        b"Date: Mon, 01 Jan 0102 00:00:00 +0000\r\n\r\nx\r\n")
    row = await conn.fetchrow("SELECT sent_at, received_at, coalesce(sent_at, received_at) AS date"
                              " FROM messages WHERE id = $1", outcome.message_id)
    assert row["sent_at"] is None and row["date"] == row["received_at"]
    assert any(d.startswith("Date: absurd") for d in defects)


def _attachment_with(headers: bytes, body: bytes = b"xx") -> bytes:
    return (HEAD + b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
            b"Content-Type: text/plain\r\n\r\nsee attached\r\n--b\r\n" + headers + b"\r\n\r\n"
            + body + b"\r\n--b--\r\n")


def test_filenames_from_content_disposition_else_content_type_name() -> None:
    cases = {
        b"Content-Type: application/pdf; name=\"from-type.pdf\"\r\n"
        b"Content-Disposition: attachment; filename=\"from-disposition.pdf\"": "from-disposition.pdf",
        b"Content-Type: application/pdf; name=\"only-type.pdf\"": "only-type.pdf",
        b"Content-Type: application/pdf; name=\"=?utf-8?B?0KHRh9C10YIucGRm?=\"": "Счет.pdf",
        b"Content-Type: application/pdf\r\nContent-Disposition: attachment;"
        b" filename=\"=?iso-8859-1?Q?R=E9sum=E9.pdf?=\"": "Résumé.pdf",
        b"Content-Type: application/pdf\r\nContent-Disposition: attachment;"
        b" filename*=utf-8''%E2%82%AC%20rates.pdf": "€ rates.pdf",
        b"Content-Type: application/pdf\r\nContent-Disposition: attachment;\r\n"
        b" filename*0*=utf-8''Factura%20n%C2%BA%20;\r\n filename*1=\"12.pdf\"": "Factura nº 12.pdf",
        b"Content-Type: application/pdf; name*=iso-8859-1''Pr%E9vis.pdf": "Prévis.pdf",
    }
    for headers, filename in cases.items():
        [attachment] = parse_message(_attachment_with(headers)).attachments
        assert attachment.filename == filename, headers


def test_uuencoded_parts_are_kept_byte_exact() -> None:
    data = bytes(range(256)) * 3 + b"\x00tail\xff"
    for backtick in (False, True):
        encoded = b"".join(binascii.b2a_uu(data[i:i + 45], backtick=backtick)
                           for i in range(0, len(data), 45))
        body = b"begin 644 blob.bin\r\n" + encoded.replace(b"\n", b"\r\n") + b"`\r\nend"
        [attachment] = parse_message(_attachment_with(
            b"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: x-uuencode\r\n"
            b"Content-Disposition: attachment; filename=blob.bin", body)).attachments
        assert attachment.content == data


def test_obsolete_white_space_before_the_colon_is_read() -> None:
    # RFC 5322 section 4.5 (obs-optional); the feed parser alone ends the header block there.
    parsed = parse_message(b"From  : Ann <ann@x.example>\r\nSubject     : Saying Hello\r\n"
                           b"Date  : Fri, 21 Nov 1997 09:55:06 -0600\r\n\r\nhello\r\n")
    assert (parsed.from_.address, parsed.subject) == ("ann@x.example", "Saying Hello")
    assert parsed.sent_at == datetime(1997, 11, 21, 15, 55, 6, tzinfo=UTC)
    assert parsed.text == "hello\n"


def test_an_encoded_line_break_in_a_display_name_or_subject_forges_nothing() -> None:
    """A display name whose encoded word decodes to a line break and another address made that
    address the sender, dropping the real one (found by an attack): the sender is the
    angle-addr, the name stays a name on one line, and the subject is one line too."""
    def word(text: bytes) -> str:
        return f"=?utf-8?b?{base64.b64encode(text).decode()}?="

    parsed = parse_message(
        f"From: {word(b'Boss' + bytes([13, 10]) + b'ceo@acme.example')} <evil@attacker.example>"
        f"\r\nTo: {word(bytes([13, 10]) + b'z6@catch.example')} <desk@acme.example>\r\n"
        f"Subject: {word(b'Hello' + bytes([13, 10]) + b'Bcc: x@example.com')}\r\n"
        "Message-ID: <forged@attacker.example>\r\n\r\nPay now.\r\n".encode())
    assert parsed.from_ == Address(address="evil@attacker.example", name="Boss  ceo@acme.example")
    assert parsed.to == [Address(address="desk@acme.example", name="z6@catch.example")]
    assert parsed.subject == "Hello  Bcc: x@example.com"
    assert "Subject: a line break or control character in its text, made a space" \
        in parsed.defects


@pytest.mark.parametrize("display_name", [
    "=?utf-8?q?Bank=0D=0A?= security@bank.example",  # compat32 kept the words as the address
    "Bank security@bank.example",  # the default policy made it "bank security"@bank.example
])
def test_a_display_name_holding_an_address_does_not_become_the_sender(display_name) -> None:
    """A display name with an "@" and a space in it, before an angle-addr, was stored as the
    sender, so from:@bank.example and a mail_wait for that domain matched the attacker's mail
    (found by an attack): the sender is the angle-addr, with a defect saying what was dropped."""
    parsed = parse_message(
        f"From: {display_name} <attacker@evil.example>\r\nTo: desk@acme.example\r\n"
        "Subject: Your bank code\r\n\r\nYour code is 834211.\r\n".encode())
    assert parsed.from_ is not None and parsed.from_.address == "attacker@evil.example"
    assert any("a display name read as an address" in d for d in parsed.defects)
    assert not any(a.address.endswith("bank.example") for a in [parsed.from_, *parsed.to])


def test_an_address_with_a_space_and_no_angle_addr_is_kept_as_written() -> None:
    """Without an angle-addr, ``big bug bb@bug.com`` is all the sender wrote (SpamAssassin
    mail has such fields): it stays the sender, and a quoted local part is an address."""
    parsed = parse_message(b"From: big bug bb@bug.com\r\nTo: \"Jo Smith\"@example.com\r\n"
                           b"Subject: s\r\n\r\nbody\r\n")
    assert parsed.from_ is not None and parsed.from_.address == '"big bug bb"@bug.com'
    assert [a.address for a in parsed.to] == ['"jo smith"@example.com']


def test_a_utf8_address_of_smtputf8_mail_is_kept() -> None:
    """RFC 6532 lets a message carry UTF-8 addr-specs (the SMTP listener advertises SMTPUTF8);
    the sender was dropped as "not an address" (found by an attack)."""
    parsed = parse_message("From: Jösé <jösé@exämple.test>\r\nTo: desk@acme.example\r\n"
                           "Subject: hi\r\n\r\nbody\r\n".encode())
    assert parsed.from_ == Address(address="jösé@exämple.test", name="Jösé")


def test_an_attached_internationalised_message_is_an_attachment() -> None:
    """message/global (RFC 6532), how EAI mailers forward, was neither body nor attachment."""
    raw = (b"From: a@example.com\r\nSubject: fwd\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: multipart/mixed; boundary=B\r\n\r\n"
           b"--B\r\nContent-Type: text/plain\r\n\r\nSee below.\r\n"
           b"--B\r\nContent-Type: message/global\r\n\r\n"
           b"From: j\xc3\xb6rg@b\xc3\xbccher.example\r\nSubject: Gr\xc3\xbc\xc3\x9fe\r\n\r\nHallo.\r\n"
           b"--B--\r\n")
    [attached] = parse_message(raw).attachments
    assert attached.content_type == "message/global"
    assert b"Hallo." in attached.content and attached.content.startswith(b"From: ")


def test_base64_cut_short_is_decoded_as_far_as_it_goes_and_reported() -> None:
    """A message cut mid-attachment whose base64 was one character past a whole quantum: the
    stored "pdf" was the base64 text itself, and no defect said so (found by an attack)."""

    pdf = b"%PDF-1.4\n" + bytes(range(256)) * 8
    encoded = base64.b64encode(pdf).decode()
    cut = encoded[:len(encoded) - len(encoded) % 4 - 400 + 1]  # 1 more than whole quanta
    assert len(cut) % 4 == 1
    lines = "\r\n".join(cut[i:i + 76] for i in range(0, len(cut), 76))
    raw = (b"From: a@b.example\r\nSubject: cut\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\n"
           b"Content-Type: text/plain\r\n\r\nSee attached.\r\n--b\r\n"
           b"Content-Type: application/pdf; name=\"x.pdf\"\r\n"
           b"Content-Transfer-Encoding: base64\r\n\r\n" + lines.encode())
    parsed = parse_message(raw)
    [attachment] = parsed.attachments
    whole = len(cut) - 1
    assert attachment.content == pdf[:whole // 4 * 3]
    assert any("base64 cut short" in d for d in parsed.defects), parsed.defects
    assert parsed.text.strip() == "See attached."


def test_a_text_part_with_broken_base64_says_so() -> None:
    raw = (b"From: a@b.example\r\nSubject: broken\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n"
           b"SGVsbG8g!!d29ybGQ=\r\n")
    parsed = parse_message(raw)
    assert "Hello" in parsed.text
    assert any("InvalidBase64CharactersDefect" in d for d in parsed.defects), parsed.defects
