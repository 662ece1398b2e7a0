"""``shared.mail.htmltext``: HTML bodies as plain text, with quoted history marked and stripped."""

from __future__ import annotations

import time

from shared.mail.htmltext import html_to_text
from shared.mail.quotes import new_text, strip_quotes


def test_no_markdown_in_the_text() -> None:
    text = html_to_text(
        "<h1>Quarterly <i>report</i></h1><p><b>Revenue</b> rose <strong>12 %</strong>; see"
        " <a href='https://r.example/q3'>the figures</a> or <a href='https://r.example'>"
        "https://r.example</a>.</p><ul><li>one</li><li>two_three</li></ul>"
        "<p>1. not a list</p><img src='cid:logo' alt='Logo'>")
    assert text.startswith("Quarterly report\n")
    assert "Revenue rose 12 %; see the figures <https://r.example/q3> or https://r.example." in text
    assert "one" in text and "two_three" in text and "1. not a list" in text
    for markup in ("**", "__", "#", "](", "\\", "<https://r.example>"):
        assert markup not in text, markup


def test_gmail_quote_is_stripped() -> None:
    html = ('<div dir="ltr">Sounds good, Thursday then.</div><br><div class="gmail_quote">'
            '<div dir="ltr" class="gmail_attr">On Tue, 3 Mar 2026 at 10:00, Bob &lt;bob@x.example&gt;'
            ' wrote:<br></div><blockquote class="gmail_quote" style="margin:0 0 0 .8ex">Lunch on'
            ' Thursday?</blockquote></div>')
    text = html_to_text(html)
    assert "> Lunch on Thursday?" in text  # the whole text keeps the history, marked
    assert new_text(text) == "Sounds good, Thursday then."


def test_apple_cite_blockquote_and_its_attribution_are_stripped() -> None:
    html = ('<div>Yes, send it.</div><div><br><blockquote type="cite"><div>On 3 Mar 2026, at 10:00,'
            ' Bob wrote:</div><div>Shall I send the contract?</div></blockquote></div>')
    assert new_text(html_to_text(html)) == "Yes, send it."
    thunderbird = ('<p>Done.</p><div class="moz-cite-prefix">Am 03.03.2026 um 10:00 schrieb Bob:'
                   '</div><blockquote type="cite">Please confirm.</blockquote>')
    assert new_text(html_to_text(thunderbird)) == "Done."


def test_outlook_separators_in_several_languages_are_stripped() -> None:
    english = ('<div>Approved.</div><div style="border:none;border-top:solid #E1E1E1 1.0pt">'
               '<p><b>From:</b> Bob &lt;bob@x.example&gt;<br><b>Sent:</b> Tuesday, 3 March 2026'
               '<br><b>To:</b> Ann<br><b>Subject:</b> Budget</p></div><p>Can you approve?</p>')
    assert strip_quotes(html_to_text(english)) == "Approved."
    german = ('<p>Passt.</p><hr><p><b>Betreff:</b> Budget<br><b>Von:</b> Bob<br>'
              '<b>An:</b> Ann<br><b>Gesendet:</b> Dienstag</p><p>Passt das?</p>')
    assert strip_quotes(html_to_text(german)) == "Passt."
    french = ('<p>Oui.</p><div id="divRplyFwdMsg"><b>De :</b> Bob<br><b>Envoyé :</b> mardi<br>'
              '<b>À :</b> Ann<br><b>Objet :</b> Budget</div><p>On valide ?</p>')
    assert strip_quotes(html_to_text(french)) == "Oui."


def test_indentation_blockquote_is_not_a_quote() -> None:
    html = ('<p>Steps:</p><blockquote style="margin:0 0 0 40px; border: none; padding: 0px">'
            'Open the portal.</blockquote>')
    assert new_text(html_to_text(html)) == "Steps:\n\nOpen the portal."


def test_hostile_html_ends_quickly_with_what_it_could_read() -> None:
    assert html_to_text("") == "" and html_to_text("<p></p>") == ""
    # libxml2 stops reading past 256 levels; what came before is kept.
    deep = "<p>start</p>" + "<div>" * 100_000 + "deep" + "</div>" * 100_000
    started = time.monotonic()
    assert html_to_text(deep).startswith("start")
    assert time.monotonic() - started < 5
