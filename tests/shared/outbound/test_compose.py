"""MIME composition (shared.outbound.compose): structure, headers, threading, subjects."""

from __future__ import annotations

import base64
import email
from datetime import UTC, datetime
from email import policy

import pytest

from shared.errors import ErrorCode, PylotaError
from shared.mail.model import Address
from shared.mail.parse import parse_message
from shared.mail.records import MessageRecord
from shared.outbound.addresses import Mailbox
from shared.outbound.compose import (MAX_REFERENCES, Draft, OutgoingPart, compose,
                                     forward_subject, forwarded_text, parts_of, quoted_reply,
                                     references_for, reply_subject)
from shared.outbound.model import Attachment

DESK = Mailbox(address="desk@xn--bcher-kva.de", name="Bücher Desk")
JO = Mailbox(address="jo@example.com", name="Jo")
PNG = b"\x89PNG\r\n\x1a\nfake"


def parent(**overrides: object) -> MessageRecord:
    values: dict[str, object] = dict(
        id="msg_01J9Z3AAAAAAAAAAAAAAAAAAAA", thread_id="thr_01J9Z3AAAAAAAAAAAAAAAAAAAA",
        identity_id="idn_01J9Z3AAAAAAAAAAAAAAAAAAAA", message_id="p@example.com",
        in_reply_to=["o@example.com"], references=["root@example.com", "o@example.com"],
        subject="Plan", from_=Address(address="jo@example.com", name="Jo"),
        to=[Address(address="desk@acme.example")], date=datetime(2026, 11, 2, 10, tzinfo=UTC),
        direction="inbound", status="received", labels=[], read=False,
        text="Line one\n\nLine two\n", triage=None, trust=None, refs=[])
    values.update(overrides)
    return MessageRecord(**values)  # type: ignore[arg-type]


def test_text_html_inline_and_attachment_structure():
    draft = Draft(sender=DESK, to=[JO], cc=[Mailbox(address="bo@example.net")],
                  subject="Grüße – the plan", text="Hello", html='<p>Hello <img src="cid:logo@x"></p>',
                  parts=[OutgoingPart(filename="logo.png", content_type="image/png", content=PNG,
                                      disposition="inline", content_id="logo@x"),
                         OutgoingPart(filename="plan.pdf", content_type="application/pdf",
                                      content=b"%PDF-1.4")],
                  headers=[("X-Campaign", "spring"), ("Importance", "high")],
                  in_reply_to="p@example.com", references=["root@example.com", "p@example.com"])
    composed = compose(draft, now=datetime(2026, 11, 3, 9, tzinfo=UTC))
    assert b"\r\n" in composed.raw and b"\n" not in composed.raw.replace(b"\r\n", b"")
    assert composed.message_id.endswith("@xn--bcher-kva.de")
    msg = email.message_from_bytes(composed.raw, policy=policy.default)
    assert msg.get_content_type() == "multipart/mixed"
    alternative, pdf = msg.get_payload()
    assert alternative.get_content_type() == "multipart/alternative"
    text, related = alternative.get_payload()
    assert text.get_content() == "Hello\r\n"
    assert related.get_content_type() == "multipart/related"
    html, logo = related.get_payload()
    assert html.get_content_type() == "text/html"
    assert logo["Content-ID"] == "<logo@x>" and logo.get_content() == PNG
    assert pdf.get_filename() == "plan.pdf" and pdf.get_content() == b"%PDF-1.4"
    assert msg["Message-ID"] == f"<{composed.message_id}>"
    assert msg["In-Reply-To"] == "<p@example.com>"
    assert msg["References"] == "<root@example.com> <p@example.com>"
    assert (msg["X-Campaign"], msg["Importance"]) == ("spring", "high")
    assert msg["Subject"] == "Grüße – the plan"
    assert "Bcc" not in msg
    parsed = parse_message(composed.raw)
    assert parsed.from_ == Address(address="desk@xn--bcher-kva.de", name="Bücher Desk")
    assert [a.address for a in parsed.cc] == ["bo@example.net"]
    assert parsed.defects == []
    assert {a.filename for a in parsed.attachments} == {"logo.png", "plan.pdf"}


def test_html_only_and_inline_parts_without_html():
    only_html = compose(Draft(sender=DESK, to=[JO], subject="x", html="<b>hi</b>"))
    assert email.message_from_bytes(only_html.raw).get_content_type() == "text/html"
    text_and_cid = compose(Draft(sender=DESK, to=[JO], subject="x", text="hi", parts=[
        OutgoingPart(filename="a.png", content_type="image/png", content=PNG,
                     disposition="inline", content_id="a@x")]))
    msg = email.message_from_bytes(text_and_cid.raw, policy=policy.default)
    assert [p.get_content_type() for p in msg.iter_parts()] == ["text/plain", "image/png"]


def test_an_auto_reply_says_so():
    composed = compose(Draft(sender=DESK, to=[JO], subject="x", text="away",
                             auto_submitted="auto-replied"))
    assert email.message_from_bytes(composed.raw)["Auto-Submitted"] == "auto-replied"


def test_every_message_id_is_new():
    draft = Draft(sender=DESK, to=[JO], subject="x", text="hi")
    assert compose(draft).message_id != compose(draft).message_id


def test_attachments_are_decoded_and_checked():
    parts = parts_of([Attachment(filename="a.txt", content_type="Text/Plain",
                                 content_base64=base64.b64encode(b"hi").decode(),
                                 disposition="inline", content_id="<a@x>")])
    assert parts == [OutgoingPart(filename="a.txt", content_type="text/plain", content=b"hi",
                                  disposition="inline", content_id="a@x")]
    bad = [Attachment(filename="a", content_type="text/plain", content_base64="***"),
           Attachment(filename="a", content_type="pdf", content_base64=""),
           Attachment(filename="a\r\nX: y", content_type="text/plain", content_base64=""),
           Attachment(filename="a", content_type="text/plain", content_base64="", content_id="a b"),
           # a final line break ended the part's header block: the file name was lost and the
           # PDF went out as text (found by an attack)
           Attachment(filename="a", content_type="application/pdf\n", content_base64="")]
    paths = []
    for item in bad:
        with pytest.raises(PylotaError) as caught:
            parts_of([item])
        assert caught.value.code is ErrorCode.INVALID_REQUEST
        paths.append(caught.value.details["path"])
    assert paths == ["attachments[0].content_base64", "attachments[0].content_type",
                     "attachments[0].filename", "attachments[0].content_id",
                     "attachments[0].content_type"]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize(("content_type", "content", "path", "says"), [
    ("message/delivery-status", b"Reporting-MTA: dns; x\r\n", "content_type",
     "cannot be attached"),
    ("multipart/mixed", b"hi", "content_type", "container of parts"),
    ("message/rfc822", b"%PDF-1.4\n%\xe2\xe3\n", "content_base64", "not an email"),
    ("message/rfc822", b"From: a@b.example\r\nSubject: x\r\n\r\n" + b"A" * 5000,
     "content_base64", "Line 4 of the attached email is longer than 998 octets"),
    ("message/rfc822", b"From: a@b.example\r\n\r\nx\0y", "content_base64", "NUL"),
])
def test_an_attachment_its_type_cannot_carry_is_refused(content_type, content, path, says):
    """A message/delivery-status part failed the composer (500), a multipart/mixed one went out
    without a boundary, and message/rfc822 bytes that are no email went out raw, failing at the
    relay after the send was accepted (found by an attack): each is invalid_request naming the
    field."""
    with pytest.raises(PylotaError) as caught:
        parts_of([Attachment(filename="x", content_type=content_type,
                             content_base64=b64(content))])
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["path"] == f"attachments[0].{path}"
    assert says in caught.value.message and caught.value.fix


def _nested(depth: int) -> bytes:
    inner = b"From: a@b.example\r\nSubject: x\r\n\r\nhello\r\n"
    for n in range(depth - 1):
        boundary = f"b{n}".encode()
        inner = (b"From: a@b.example\r\nSubject: x\r\nMIME-Version: 1.0\r\n"
                 b"Content-Type: multipart/mixed; boundary=\"" + boundary + b"\"\r\n\r\n--"
                 + boundary + b"\r\nContent-Type: message/rfc822\r\n\r\n" + inner
                 + b"\r\n--" + boundary + b"--\r\n")
    return inner


def test_an_attached_email_nesting_too_deep_is_refused_and_one_within_is_composed():
    """400 levels ran the email generator out of stack: a 500 (found by an attack)."""
    from shared.outbound.compose import MAX_ATTACHED_DEPTH

    with pytest.raises(PylotaError) as caught:
        parts_of([Attachment(filename="m.eml", content_type="message/rfc822",
                             content_base64=b64(_nested(100)))])
    assert caught.value.details["path"] == "attachments[0].content_base64"
    assert f"more than {MAX_ATTACHED_DEPTH} levels" in caught.value.message
    # 1,000 levels ran the parser itself out of stack, and 10,000 unclosed multiparts took it
    # 6 s (a later attack): refused on the bytes, before parsing
    unclosed = (b"From: a@b.example\r\nSubject: x\r\n"
                + b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n--b\r\n' * 10_000)
    for content in (_nested(1000), unclosed):
        with pytest.raises(PylotaError) as caught:
            parts_of([Attachment(filename="m.eml", content_type="message/rfc822",
                                 content_base64=b64(content))])
        assert "declares more than 256 multipart or message parts" in caught.value.message
    # levels count parts: each nesting above is a multipart holding a message
    within = _nested(MAX_ATTACHED_DEPTH // 2)
    parts = parts_of([Attachment(filename="m.eml", content_type="message/rfc822",
                                 content_base64=b64(within))])
    composed = compose(Draft(sender=DESK, to=[JO], subject="Fwd", text="See it.",
                             parts=parts))
    assert composed.raw.count(b"Content-Type: message/rfc822") == MAX_ATTACHED_DEPTH // 2


def test_an_attached_email_and_a_forwarded_status_report_are_composed():
    """An email of lines within 998 octets is attached as a message; a forwarded part of a
    type the composer cannot carry as bytes (a bounce's message/delivery-status, which reaches
    compose from a stored message, not from parts_of) goes as application/octet-stream."""
    inner = b"From: a@b.example\r\nSubject: inner\r\n\r\nhello\r\n"
    parts = parts_of([Attachment(filename="m.eml", content_type="message/rfc822",
                                 content_base64=b64(inner))])
    status = OutgoingPart(filename="d.txt", content_type="message/delivery-status",
                          content=b"Reporting-MTA: dns; x.example\r\n")
    raw = compose(Draft(sender=DESK, to=[JO], subject="s", text="see", parts=[*parts, status])).raw
    sent = email.message_from_bytes(raw, policy=policy.default)
    kinds = [p.get_content_type() for p in sent.iter_attachments()]
    assert kinds == ["message/rfc822", "application/octet-stream"]
    assert b"Subject: inner" in raw and b"Reporting-MTA" not in raw  # the status is base64


def test_a_forwarded_message_part_that_is_no_email_goes_as_bytes():
    """A stored message/rfc822 part that does not start with a header field (one stored before
    ingest decoded base64-encoded attached messages: its base64 text) went out as a message
    with no header and that text for body (found by a new user's forward)."""
    stored = OutgoingPart(filename="m.eml", content_type="message/rfc822",
                          content=b"\nUmV0dXJuLVBhdGg6IGd1ZXN0QGxvY2FsaG9zdA0K\n")
    raw = compose(Draft(sender=DESK, to=[JO], subject="s", text="see", parts=[stored])).raw
    sent = email.message_from_bytes(raw, policy=policy.default)
    [attached] = sent.iter_attachments()
    assert attached.get_content_type() == "application/octet-stream"
    assert attached.get_content() == stored.content


@pytest.mark.parametrize(("subject", "reply", "forward"), [
    ("Plan", "Re: Plan", "Fwd: Plan"),
    ("Re: Plan", "Re: Plan", "Fwd: Re: Plan"),
    ("RE: Plan", "RE: Plan", "Fwd: RE: Plan"),
    ("Fwd: Plan", "Re: Fwd: Plan", "Fwd: Plan"),
    ("FW: Plan", "Re: FW: Plan", "FW: Plan"),
    ("[dev] Re: Plan", "[dev] Re: Plan", "Fwd: [dev] Re: Plan"),
    ("AW: Termin", "AW: Termin", "Fwd: AW: Termin"),
    ("", "Re:", "Fwd:"),
])
def test_re_and_fwd_are_added_once(subject, reply, forward):
    assert reply_subject(subject) == reply
    assert forward_subject(subject) == forward


def test_references_come_from_rfc_message_ids():
    assert references_for(parent()) == (
        "p@example.com", ["root@example.com", "o@example.com", "p@example.com"])
    # no References: the parent's In-Reply-To stands in (RFC 5322 section 3.6.4)
    assert references_for(parent(references=[])) == (
        "p@example.com", ["o@example.com", "p@example.com"])
    assert references_for(parent(message_id=None, references=[], in_reply_to=[])) == (None, [])
    long = parent(references=[f"r{i}@example.com" for i in range(50)])
    _, chain = references_for(long)
    assert len(chain) == MAX_REFERENCES
    assert chain[0] == "r0@example.com" and chain[-2:] == ["r49@example.com", "p@example.com"]
    # ids no header can carry as they are were written as encoded words nobody threads by
    # (found by an attack): left out
    odd = parent(message_id="t0\ufffd@x", references=["root@example.com", "a b@x", "n\x00@x"])
    assert references_for(odd) == (None, ["root@example.com"])
    composed = compose(Draft(sender=DESK, to=[JO], subject="Re: x", text="hi",
                             in_reply_to=None, references=references_for(odd)[1]))
    assert b"\r\nReferences: <root@example.com>\r\n" in composed.raw


def test_a_reply_quotes_its_parent():
    text = quoted_reply("Thanks!", parent(), as_html=False)
    assert text == ("Thanks!\n\nOn Mon, 02 Nov 2026 at 10:00 UTC, Jo <jo@example.com> wrote:\n"
                    "> Line one\n>\n> Line two\n")
    page = quoted_reply("<p>Thanks</p>", parent(text="a < b\n"), as_html=True)
    assert '<blockquote type="cite">a &lt; b</blockquote>' in page
    assert quoted_reply(None, parent(), as_html=True) is None


def test_a_forward_keeps_the_original():
    text = forwarded_text("FYI", parent(cc=[Address(address="bo@example.net")]))
    assert text.startswith("FYI\n\n---------- Forwarded message ----------\nFrom: Jo <jo@example.com>\n")
    assert "Subject: Plan\nTo: desk@acme.example\nCc: bo@example.net\n\nLine one\n\nLine two\n" in text
    assert forwarded_text(None, parent()).startswith("---------- Forwarded message")
