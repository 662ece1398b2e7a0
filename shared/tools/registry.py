"""The tool registry as data (spec section 4, DESIGN.md section 5.2).

One frozen :class:`ToolSpec` per implemented tool. ``inputSchema`` is the spec's schema text for
the tool (with ``$defs`` inlined); ``outputSchema`` is generated from the result Struct. A tool
that is not implemented is not registered: there are no stubs on the wire.

A tool whose ``result`` is ``None`` returns MCP content blocks itself (a list of the front's
content Structs, such as images) and has no ``outputSchema`` and no ``structuredContent``. Every
product tool has a result Struct; the conformance suite's fixture tools, registered by its test
only, are the ones that return media.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from shared.auth.keys import Principal
from shared.auth.permissions import KeyLevel, Permission
from shared.tools import contacts, identities, messages, related, search, threads, wait

__all__ = ["Annotations", "ToolSpec", "TOOLS", "visible_to", "output_schema"]


@dataclass(frozen=True, slots=True)
class Annotations:
    """All four MCP hints, always explicit (spec section 4.1)."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


READ_ONLY = Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)
ALL_LEVELS = frozenset(KeyLevel)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool: wire texts and schemas, who may call it, and what runs it.

    ``result`` is the Struct the handler returns (its schema is the ``outputSchema``), or
    ``None`` for a handler that returns a list of content blocks (see the module docstring).
    """

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    args: type[msgspec.Struct]
    result: type[msgspec.Struct] | None
    permission: Permission
    annotations: Annotations
    handler: Callable[..., Awaitable[msgspec.Struct | list[msgspec.Struct]]]
    levels: frozenset[KeyLevel] = ALL_LEVELS
    bucket: Literal["RL_SEARCH", "RL_AGENTIC", "RL_SEND", "RL_SIGN"] | None = None
    runs_on: Literal["inline", "worker"] = "inline"


def _inline_refs(schema: Any, defs: dict[str, Any]) -> Any:
    if isinstance(schema, dict):
        if "$ref" in schema:
            target = defs[schema["$ref"].rsplit("/", 1)[-1]]
            merged = {**_inline_refs(target, defs), **{k: v for k, v in schema.items() if k != "$ref"}}
            return _inline_refs(merged, defs)
        return {k: _inline_refs(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline_refs(v, defs) for v in schema]
    return schema


def output_schema(result: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema of ``result`` with every ``$ref`` inlined (spec section 4.2)."""
    generated = msgspec.json.schema(result)
    return _inline_refs(generated, generated.get("$defs", {}))


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(name="mail_list_identities", title="List mail identities",
             description=identities.DESCRIPTION, input_schema=identities.INPUT_SCHEMA,
             args=identities.ListIdentitiesArgs, result=identities.ListIdentitiesResult,
             permission=Permission.IDENTITIES_READ, annotations=READ_ONLY,
             handler=identities.run),
    ToolSpec(name="mail_search", title="Search mail", description=search.DESCRIPTION,
             input_schema=search.INPUT_SCHEMA, args=search.SearchArgs, result=search.SearchResult,
             permission=Permission.SEARCH_READ, annotations=READ_ONLY, bucket="RL_SEARCH",
             handler=search.run),
    ToolSpec(name="mail_get_thread", title="Read a thread", description=threads.DESCRIPTION,
             input_schema=threads.INPUT_SCHEMA, args=threads.GetThreadArgs,
             result=threads.ThreadResult, permission=Permission.MESSAGES_READ,
             annotations=READ_ONLY, handler=threads.run),
    ToolSpec(name="mail_get_message", title="Read a message", description=messages.DESCRIPTION,
             input_schema=messages.INPUT_SCHEMA, args=messages.GetMessageArgs,
             result=messages.MessageResult, permission=Permission.MESSAGES_READ,
             annotations=READ_ONLY, handler=messages.run),
    ToolSpec(name="mail_find_related", title="Find related messages",
             description=related.DESCRIPTION, input_schema=related.INPUT_SCHEMA,
             args=related.FindRelatedArgs, result=related.FindRelatedResult,
             permission=Permission.SEARCH_READ, annotations=READ_ONLY, bucket="RL_SEARCH",
             handler=related.run),
    ToolSpec(name="mail_search_contacts", title="Search contacts",
             description=contacts.DESCRIPTION, input_schema=contacts.INPUT_SCHEMA,
             args=contacts.SearchContactsArgs, result=contacts.SearchContactsResult,
             permission=Permission.CONTACTS_READ, annotations=READ_ONLY,
             handler=contacts.run),
    ToolSpec(name="mail_wait", title="Wait for a message", description=wait.DESCRIPTION,
             input_schema=wait.INPUT_SCHEMA, args=wait.WaitArgs, result=wait.WaitResult,
             permission=Permission.MESSAGES_READ, annotations=READ_ONLY, runs_on="worker",
             handler=wait.run),
)

def visible_to(principal: Principal, tools: Sequence[ToolSpec] = TOOLS) -> list[ToolSpec]:
    """The tools ``principal`` may see and call: it holds the tool's permission and its key level
    is allowed (spec section 3, DESIGN.md section 5.2). Registry order, so lists are stable."""
    return [t for t in tools
            if t.permission in principal.permissions and principal.level in t.levels]
