"""Prompts served by ``prompts/list`` and ``prompts/get`` (spec section 6.1).

A :class:`PromptSpec` is data, like a tool; the product registers one, ``mail_search_strategy``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from shared import guide

__all__ = ["PromptArg", "PromptSpec", "PROMPTS"]


@dataclass(frozen=True, slots=True)
class PromptArg:
    """One prompt argument."""

    name: str
    description: str
    required: bool = False


@dataclass(frozen=True, slots=True)
class PromptSpec:
    """A prompt: its listing and a function from arguments to the user message's text."""

    name: str
    title: str
    description: str
    arguments: tuple[PromptArg, ...]
    render: Callable[[Mapping[str, str]], str]


PROMPTS: tuple[PromptSpec, ...] = (
    PromptSpec(
        name=guide.PROMPT_NAME, title=guide.PROMPT_TITLE, description=guide.PROMPT_DESCRIPTION,
        arguments=(PromptArg(name="goal", description=guide.GOAL_DESCRIPTION),),
        render=lambda args: guide.prompt_text(args.get("goal")),
    ),
)
