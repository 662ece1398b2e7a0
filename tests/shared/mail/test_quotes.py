"""``shared.mail.quotes``: new text apart from quoted history, and list snippets."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared.mail.parse import parse_message
from shared.mail.quotes import new_text, snippet, strip_quotes


def test_quoted_lines_and_attribution_go() -> None:
    text = "Sounds good.\n\nOn Tue, Mar 5, 2024 at 10:00 AM Bob <bob@example.com> wrote:\n> Lunch?\n> \n"
    assert new_text(text) == "Sounds good."


def test_wrapped_attribution_goes() -> None:
    text = "Yes.\n\nOn Dec 16, 2011, at 12:47 PM, Corey\n<reply@example.com>\nwrote:\n\n> Was this fixed?\n"
    assert new_text(text) == "Yes."


def test_writes_attribution_and_inline_replies() -> None:
    text = "Alice writes:\n> one\nanswer one\n  >> two\nanswer two\n"
    assert new_text(text) == "answer one\nanswer two"


def test_pieces_of_quoted_lines_a_mailer_wrapped_go_and_inline_answers_stay() -> None:
    """Outlook quoted a message it had wrapped, leaving pieces of quoted lines unquoted (seen on
    LKML by a new user): they go; an answer between quotes, after a blank line or after a
    question, stays."""
    text = ("Fixed upstream.\n\n"
            "> -----Original Message-----\n"
            "> Cc: Alexandre Bounine; linuxppc-dev@lists.ozlabs.org;\n"
            "linux-kernel@vger.kernel.org;\n"
            "> Subject: Re: [PATCH v2 5/7] powerpc/85xx: Add MChk handler for SRIO\n"
            "port\n"
            "> arch/powerpc/sysdev/fsl_rio.c:248: error: 'MCSR_MASK' undeclared\n"
            "(first use in this function)\n"
            ">\n")
    assert new_text(text) == "Fixed upstream."
    inline = ("> Can you check the board setup code in the same driver as well, please?\n"
              "Done, it was fine.\n"
              "> And the interrupt handler at the end of the file while you are there\n"
              "\n"
              "Also done.\n"
              "> Short line\n"
              "Yes\n"
              "> more\n")
    assert new_text(inline) == "Done, it was fine.\n\nAlso done.\nYes"


def test_sentence_ending_with_colon_is_kept() -> None:
    text = "On your host run:\n\n    telnet 127.0.0.1 52698\n"
    assert new_text(text) == "On your host run:\n\n    telnet 127.0.0.1 52698"


def test_original_message_and_signature_cut() -> None:
    assert new_text("Fine.\r\n-----Original Message-----\r\nFrom: x\r\n\r\nold\r\n") == "Fine."
    # a forward's own words: the separator Gmail and mail_forward write went, the line stayed
    # ("fyi\n\n---------- Forwarded message ----------"; found by a new user)
    forward = ("fyi\n\n---------- Forwarded message ---------\nFrom: Jo <jo@example.com>\n"
               "Date: Mon, 30 Nov 2026\nSubject: Plan\nTo: desk@acme.example\n\nthe plan\n")
    assert new_text(forward) == "fyi"
    assert new_text("Fine.\n\n-- \nAlice\nACME\n") == "Fine."
    assert new_text("Fine.\n--\nAlice\n") == "Fine."
    assert new_text("a -- b\n") == "a -- b"  # "--" inside a line is not a separator


def test_nothing_new() -> None:
    assert new_text("> all quoted\n> here\n") == ""


QUOTES = "quote-stripping"


@pytest.mark.parametrize(
    ("name", "starts", "absent"),
    [
        ("email_1_2.txt", "Hi,\n\nYou can list the keys", "Abhishek Kona wrote"),
        # EXPECTED.md: "-A…" is a hidden signature fragment.
        ("email_1_3.txt", "Oh thanks.\n\nHaving the function would be great.", "-Abhishek Kona"),
        ("email_1_6.txt", "I get proper rendering as well.", "Corey Donohoe"),
        ("email_1_7.txt", ":+1:", "Steps 0-2"),
        ("greedy_on.txt", "On your remote host you can run:", "George Plymale wrote"),
        ("correct_sig.txt", "this is an email with a correct -- signature.", "rick"),
    ],
)
def test_kit_reply_parser_bodies(corpus: Path, name: str, starts: str, absent: str) -> None:
    text = (corpus / QUOTES / "github-email_reply_parser" / name).read_text(encoding="utf-8")
    result = new_text(text)
    assert result.startswith(starts)
    assert absent not in result


@pytest.mark.parametrize(
    "name",
    ["aol", "apple_mail", "apple_mail_2", "comcast", "gmail", "hotmail", "thunderbird", "yahoo"],
)
def test_kit_talon_standard_replies(corpus: Path, name: str) -> None:
    # Not yet handled (a later issue): android.eml's Russian attribution, outlook.eml's
    # From:/Sent: block without a separator, and sparrow.eml, whose signature talon keeps.
    raw = (corpus / QUOTES / "talon/standard_replies" / f"{name}.eml").read_bytes()
    assert new_text(parse_message(raw).text).strip() == "Hello"


def test_kit_talon_iphone(corpus: Path) -> None:
    folder = corpus / QUOTES / "talon/standard_replies"
    expected = (folder / "iphone_reply_text").read_text(encoding="utf-8").strip()
    # talon strips quotes only; the mobile signature is new_text's to drop.
    text = parse_message((folder / "iphone.eml").read_bytes()).text
    assert strip_quotes(text) == expected
    assert new_text(text) == "Hello"


def test_snippet() -> None:
    assert snippet("  short \n text ") == "short text"
    assert snippet("one two three four", chars=12) == "one two…"
    assert snippet("one two three", chars=13) == "one two three"
    assert snippet("abcdefghijkl", chars=5) == "abcd…"
    assert len(snippet("word " * 100)) <= 200
