"""Prompts served by ``prompts/list`` and ``prompts/get`` (spec section 6.1).

A :class:`PromptSpec` is data, like a tool; the product registers one, ``mail_search_strategy``,
whose one user message is :func:`shared.guide.prompt_text` of the ``goal`` argument (control
characters removed, cut to 500 characters). Tests register their own (the conformance fixtures).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from front.mcp.protocol import PromptMessage, TextContent
from shared import guide

__all__ = ["PromptArg", "PromptSpec", "PROMPTS", "user_text"]


@dataclass(frozen=True, slots=True)
class PromptArg:
    """One prompt argument."""

    name: str
    description: str
    required: bool = False


@dataclass(frozen=True, slots=True)
class PromptSpec:
    """A prompt: its listing and a function from its (string) arguments to its messages.

    Dispatch checks, before ``render`` runs, that every required argument is present and every
    value is a string (-32602 otherwise).
    """

    name: str
    title: str
    description: str
    arguments: tuple[PromptArg, ...]
    render: Callable[[Mapping[str, str]], Sequence[PromptMessage]]


def user_text(text: str) -> list[PromptMessage]:
    """One user message holding ``text``."""
    return [PromptMessage(role="user", content=TextContent(text=text))]


PROMPTS: tuple[PromptSpec, ...] = (
    PromptSpec(
        name=guide.PROMPT_NAME, title=guide.PROMPT_TITLE, description=guide.PROMPT_DESCRIPTION,
        arguments=(PromptArg(name="goal", description=guide.GOAL_DESCRIPTION),),
        render=lambda args: user_text(guide.prompt_text(args.get("goal"))),
    ),
)
