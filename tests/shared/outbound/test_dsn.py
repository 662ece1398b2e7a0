"""Delivery status notifications (shared.outbound.dsn, RFC 3464)."""

from __future__ import annotations

from shared.outbound.dsn import parse_dsn


def dsn(*, original: str = "text/rfc822-headers", report_type: str = "delivery-status") -> bytes:
    returned = ("From: desk@acme.example\r\nMessage-ID: <abc@acme.example>\r\nSubject: hi\r\n"
                if original == "text/rfc822-headers" else
                "From: desk@acme.example\r\nMessage-ID: <abc@acme.example>\r\nSubject: hi\r\n"
                "\r\nbody\r\n")
    return (
        "From: MAILER-DAEMON@relay.example\r\nTo: desk@acme.example\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\nMIME-Version: 1.0\r\n"
        f'Content-Type: multipart/report; report-type={report_type}; boundary="B"\r\n\r\n'
        "--B\r\nContent-Type: text/plain\r\n\r\nYour message could not be delivered.\r\n"
        "--B\r\nContent-Type: message/delivery-status\r\n\r\n"
        "Reporting-MTA: dns; relay.example\r\n\r\n"
        "Final-Recipient: rfc822; Gone@Client.example\r\nAction: failed\r\nStatus: 5.1.1\r\n"
        "Diagnostic-Code: smtp; 550 5.1.1 <gone@client.example>:\r\n  Recipient address rejected\r\n"
        "\r\n"
        "Final-Recipient: rfc822; slow@client.example\r\nAction: delayed\r\nStatus: 4.4.1\r\n\r\n"
        "Original-Recipient: rfc822; soft@client.example\r\nAction: failed\r\n"
        "Status: 4.2.2 (mailbox full)\r\n\r\n"
        f"--B\r\nContent-Type: {original}\r\n\r\n{returned}--B--\r\n").encode()


def test_a_report_with_returned_headers():
    report = parse_dsn(dsn())
    assert report is not None
    assert report.reporting_mta == "relay.example"
    assert report.original_message_id == "abc@acme.example"
    assert [(r.address, r.action, r.status, r.hard_bounce) for r in report.recipients] == [
        ("gone@client.example", "failed", "5.1.1", True),
        ("slow@client.example", "delayed", "4.4.1", False),
        ("soft@client.example", "failed", "4.2.2", False)]
    assert report.recipients[0].diagnostic == \
        "550 5.1.1 <gone@client.example>: Recipient address rejected"


def test_a_report_with_the_returned_message():
    report = parse_dsn(dsn(original="message/rfc822"))
    assert report is not None and report.original_message_id == "abc@acme.example"


def test_fields_with_8bit_bytes_are_read_with_replacement_characters():
    raw = (dsn().replace(b"dns; relay.example", b"dns; r\xe9lay.example")
           .replace(b"rfc822; Gone@", b"rfc822; G\xf6ne@")
           .replace(b"Action: failed\r\nStatus: 5.1.1", b"Action: f\xe4iled\r\nStatus: 5.1.1 \xff")
           .replace(b"Recipient address rejected", b"Empf\xe4nger unbekannt"))
    report = parse_dsn(raw)
    assert report is not None and report.reporting_mta == "r\ufffdlay.example"
    first = report.recipients[0]
    assert (first.address, first.action, first.status) == (
        "g\ufffdne@client.example", "f\ufffdiled", "5.1.1")
    assert first.diagnostic is not None and first.diagnostic.endswith("Empf\ufffdnger unbekannt")


def test_other_mail_is_no_report():
    assert parse_dsn(dsn(report_type="disposition-notification")) is None
    assert parse_dsn(b"From: jo@example.com\r\nSubject: hi\r\n\r\nbody\r\n") is None
    assert parse_dsn(b"\xff\xfe garbage") is None


def test_real_reports_from_the_kit(kit):
    singles = kit / "corpus" / "singles"
    expected = {
        "flanker/bounce/mailbox-full.eml": ("4E326A95.3010907@example.com",
                                            [("user@aol.com", "5.2.2", True)]),
        "flanker/bounce/office365.eml": ("20171013111011.20866.254C2F3A4D7AA526@ninomail.com",
                                         [("noname@example.com", "5.1.10", True)]),
        "flanker/bounce/no-mx.eml": ("19E44CA63F984902B7D654F8FF40F89D@bo",
                                     [("user@example.com", "4.4.4", False)]),
        "nodemailer-mailparser/delivery-status.eml": ("xxxxx@email.amazonses.com",
                                                      [("xxxx@xxxx.com", "5.1.1", True)]),
    }
    for name, (original, recipients) in expected.items():
        report = parse_dsn((singles / name).read_bytes())
        assert report is not None, name
        assert report.original_message_id == original
        assert [(r.address, r.status, r.hard_bounce) for r in report.recipients] == recipients
    assert parse_dsn((singles / "flanker/disposition-notification.eml").read_bytes()) is None
