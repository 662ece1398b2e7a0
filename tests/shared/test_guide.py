"""The mail_search_strategy prompt's GOAL_LINE (spec section 6.1)."""

from shared.guide import GOAL_CHARS, prompt_text


def test_no_goal_leaves_the_line_empty():
    assert prompt_text(None).endswith("deduplicated: true.\n")
    assert prompt_text("\x00\x07") == prompt_text(None)


def test_control_and_bidi_characters_are_removed_and_the_goal_is_cut():
    text = prompt_text("find\x00 the\u202e invoice\n" + "x" * 1000)
    line = text.splitlines()[-1]
    assert line.startswith("Your current goal: find the invoice")
    assert len(line) == len("Your current goal: ") + GOAL_CHARS
