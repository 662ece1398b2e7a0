"""Mail is evidence, never instructions (spec section 7): finding text that speaks to the model.

A message that tells "the assistant" or "the AI" to ignore its instructions, or what to answer,
is not evidence of what it asks to be said: :func:`addresses_the_reader` finds such sentences, and
deep search reads nothing else of that message. The patterns are deliberately narrow (they name
instructions, prompts or an AI reader), so ordinary mail that says "ignore my last mail" or "please
answer by Friday" is still read.

Pure: no I/O. Called by ``shared.deepsearch.evidence``.
"""

from __future__ import annotations

import re

from shared.mail.plain import plain

__all__ = ["addresses_the_reader"]

_PATTERNS = re.compile("|".join((
    r"\b(?:ignore|disregard|forget|override|bypass)\b[^.!?\n]{0,40}\b(?:instructions?|prompts?|"
    r"rules|guidelines|directives|system message)\b",
    r"\b(?:system|developer)\s+prompt\b",
    r"\b(?:ai|llm|language model|chat ?bot|assistant|agent)s?\b[^.!?\n]{0,60}\b(?:must|should|"
    r"shall|are to|need to)\s+(?:answer|reply|respond|say|state|output|report|tell)\b",
    r"\b(?:answer|reply|respond|say|output)\s+(?:only\s+)?(?:with|that)\b[^.!?\n]{0,80}\b(?:"
    r"no matter|regardless|whatever)\b",
    r"\bnew instructions?\s*:",
    r"\byou are (?:now )?(?:an? )?(?:ai|assistant|language model|chat ?bot)\b",
)), re.IGNORECASE)


def addresses_the_reader(text: str) -> bool:
    """Whether ``text`` gives instructions to an AI reader (see the module docstring), read
    as triage reads text (``shared.mail.plain``): a zero-width space inside "ignore" got past
    the check (found by an attack)."""
    return _PATTERNS.search(plain(text)) is not None
