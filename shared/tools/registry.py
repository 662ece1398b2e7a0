"""The tool registry as data (spec section 4, DESIGN.md section 5.2).

One frozen :class:`ToolSpec` per implemented tool: the wire texts, the argument and result
Structs (which give ``inputSchema`` and ``outputSchema``, ``shared.tools.schema``), who may call
it (permission and key levels), the rate-limit bucket charged on top of RL_API, and where it runs.
An inline tool's handler returns its result; a worker tool's handler checks what it can in the
front (identity, scope) and returns the :class:`~shared.jobs.JobRequest` to enqueue. A tool that
is not implemented is not registered: there are no stubs on the wire.

A tool whose ``result`` is ``None`` returns MCP content blocks itself (a list of the front's
content Structs, such as images) and has no ``outputSchema`` and no ``structuredContent``. Every
product tool has a result Struct; the conformance suite's fixture tools, registered by its test
only, are the ones that return media.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from shared.auth.keys import Principal
from shared.auth.permissions import KeyLevel, Permission
from shared.outbound.model import ForwardRequest, ReplyRequest, SendRequest
from shared.ratelimit import Bucket
from shared.tools import (attachments, contacts, deep_search, identities, messages, related,
                          search, sending, sign_assertion, sign_http_request, threads, usage,
                          wait)
from shared.tools import labels
from shared.tools.schema import input_schema, output_schema

__all__ = ["Annotations", "READ_ONLY", "SIGNING", "SENDING", "ALL_LEVELS", "WORKSPACE_LEVELS",
           "ToolSpec", "TOOLS", "visible_to"]


@dataclass(frozen=True, slots=True)
class Annotations:
    """All four MCP hints, always explicit (spec section 4.1)."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


READ_ONLY = Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)
#: The signing tools change nothing a caller can see, and each call makes a new token, so a
#: repeat is not the same call; they reach no outside system (the caller's client does).
SIGNING = Annotations(read_only=True, destructive=False, idempotent=False, open_world=False)

#: The send tools: they write (a message leaves), nothing is destroyed, a retry with the same
#: idempotency_key does nothing more, and the mail reaches the world outside.
SENDING = Annotations(read_only=False, destructive=False, idempotent=True, open_world=True)
ALL_LEVELS = frozenset(KeyLevel)
#: Keys bound to one workspace (DESIGN.md section 5.2: the signing tools, mail_get_usage).
WORKSPACE_LEVELS = frozenset({KeyLevel.TENANT, KeyLevel.IDENTITY})


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool: wire texts and types, who may call it, and what runs it.

    ``input_extra`` holds schema keywords no type can state (merged into ``input_schema``; the
    handler checks them). ``rest_args``, when set, is the REST API's wider form of ``args`` (a
    subclass the handler reads the same way): mail_list_identities' REST status filter also
    takes deleting and deleted (spec section 4.3). ``input_schema``, ``rest_input_schema`` and
    ``output_schema`` are computed from the types once, when the spec is made.
    """

    name: str
    title: str
    description: str
    args: type[msgspec.Struct]
    result: type[msgspec.Struct] | None
    permission: Permission
    annotations: Annotations
    handler: Callable[..., Awaitable[Any]]
    levels: frozenset[KeyLevel] = ALL_LEVELS
    bucket: Bucket | None = None
    runs_on: Literal["inline", "worker"] = "inline"
    input_extra: dict[str, Any] | None = None
    rest_args: type[msgspec.Struct] | None = None
    input_schema: dict[str, Any] = field(init=False)
    rest_input_schema: dict[str, Any] = field(init=False)
    output_schema: dict[str, Any] | None = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "input_schema", input_schema(self.args, self.input_extra))
        object.__setattr__(self, "rest_input_schema", self.input_schema
                           if self.rest_args is None
                           else input_schema(self.rest_args, self.input_extra))
        object.__setattr__(self, "output_schema",
                           None if self.result is None else output_schema(self.result))


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(name="mail_list_identities", title="List mail identities",
             description=identities.DESCRIPTION, args=identities.ListIdentitiesArgs,
             rest_args=identities.RestListIdentitiesArgs, result=identities.ListIdentitiesResult, permission=Permission.IDENTITIES_READ,
             annotations=READ_ONLY, handler=identities.run),
    ToolSpec(name="mail_list_threads", title="List threads", description=threads.LIST_DESCRIPTION,
             args=threads.ListThreadsArgs, result=threads.ListThreadsResult,
             permission=Permission.MESSAGES_READ, annotations=READ_ONLY, handler=threads.run_list),
    ToolSpec(name="mail_search", title="Search mail", description=search.DESCRIPTION,
             args=search.SearchArgs, result=search.SearchResult,
             permission=Permission.SEARCH_READ, annotations=READ_ONLY, bucket="RL_SEARCH",
             handler=search.run),
    ToolSpec(name="mail_get_thread", title="Read a thread", description=threads.DESCRIPTION,
             args=threads.GetThreadArgs, result=threads.ThreadResult,
             permission=Permission.MESSAGES_READ, annotations=READ_ONLY, handler=threads.run),
    ToolSpec(name="mail_get_message", title="Read a message", description=messages.DESCRIPTION,
             args=messages.GetMessageArgs, result=messages.MessageResult,
             permission=Permission.MESSAGES_READ, annotations=READ_ONLY, handler=messages.run),
    ToolSpec(name="mail_get_attachment_text", title="Read attachment text",
             description=attachments.DESCRIPTION, args=attachments.GetAttachmentTextArgs,
             result=attachments.AttachmentTextResult, permission=Permission.MESSAGES_READ,
             annotations=READ_ONLY, handler=attachments.run),
    ToolSpec(name="mail_find_related", title="Find related messages",
             description=related.DESCRIPTION, args=related.FindRelatedArgs,
             result=related.FindRelatedResult, permission=Permission.SEARCH_READ,
             annotations=READ_ONLY, bucket="RL_SEARCH", handler=related.run),
    ToolSpec(name="mail_search_contacts", title="Search contacts",
             description=contacts.DESCRIPTION, args=contacts.SearchContactsArgs,
             result=contacts.SearchContactsResult, permission=Permission.CONTACTS_READ,
             annotations=READ_ONLY, handler=contacts.run),
    ToolSpec(name="mail_wait", title="Wait for a message", description=wait.DESCRIPTION,
             args=wait.WaitArgs, result=wait.WaitResult, permission=Permission.MESSAGES_READ,
             annotations=READ_ONLY, runs_on="worker", handler=wait.run),
    ToolSpec(name="mail_sign_assertion", title="Sign an agent assertion",
             description=sign_assertion.DESCRIPTION, args=sign_assertion.SignAssertionArgs,
             result=sign_assertion.AssertionResult, permission=Permission.IDENTITIES_SIGN,
             annotations=SIGNING, levels=WORKSPACE_LEVELS, bucket="RL_SIGN",
             handler=sign_assertion.run),
    ToolSpec(name="mail_sign_http_request", title="Sign an HTTP request",
             description=sign_http_request.DESCRIPTION, args=sign_http_request.SignHttpRequestArgs,
             result=sign_http_request.SignedRequest, permission=Permission.IDENTITIES_SIGN,
             annotations=SIGNING, levels=WORKSPACE_LEVELS, bucket="RL_SIGN",
             handler=sign_http_request.run),
    ToolSpec(name="mail_get_usage", title="Check plan allowances", description=usage.DESCRIPTION,
             args=usage.GetUsageArgs, result=usage.Usage, permission=Permission.USAGE_READ,
             levels=frozenset({KeyLevel.TENANT, KeyLevel.IDENTITY}), annotations=READ_ONLY,
             handler=usage.run),
    ToolSpec(name="mail_send", title="Send an email", description=sending.SEND_DESCRIPTION,
             args=SendRequest, result=sending.SendResult, permission=Permission.MESSAGES_SEND,
             annotations=SENDING, bucket="RL_SEND", handler=sending.run_send),
    ToolSpec(name="mail_reply", title="Reply to an email", description=sending.REPLY_DESCRIPTION,
             args=ReplyRequest, result=sending.SendResult, permission=Permission.MESSAGES_SEND,
             annotations=SENDING, bucket="RL_SEND", handler=sending.run_reply),
    ToolSpec(name="mail_forward", title="Forward an email",
             description=sending.FORWARD_DESCRIPTION, args=ForwardRequest,
             result=sending.SendResult, permission=Permission.MESSAGES_SEND,
             annotations=SENDING, bucket="RL_SEND", handler=sending.run_forward),
    ToolSpec(name="mail_deep_search", title="Answer a question from mail",
             description=deep_search.DESCRIPTION, args=deep_search.DeepSearchArgs,
             result=deep_search.DeepSearchResult, permission=Permission.SEARCH_READ,
             annotations=READ_ONLY, bucket="RL_AGENTIC", runs_on="worker",
             handler=deep_search.run),
    # Labels and read state: a write that destroys nothing (a removed label can be added back),
    # and the same call twice leaves the same state.
    ToolSpec(name="mail_update_labels", title="Label or mark mail", description=labels.DESCRIPTION,
             args=labels.UpdateLabelsArgs, result=labels.LabelState,
             permission=Permission.MESSAGES_WRITE, input_extra=labels.INPUT_EXTRA,
             annotations=Annotations(read_only=False, destructive=False, idempotent=True,
                                     open_world=False), handler=labels.run),
)


def visible_to(principal: Principal, tools: Sequence[ToolSpec] = TOOLS) -> list[ToolSpec]:
    """The tools ``principal`` may see and call: it holds the tool's permission and its key level
    is allowed (spec section 3, DESIGN.md section 5.2). Registry order, so lists are stable."""
    return [t for t in tools
            if t.permission in principal.permissions and principal.level in t.levels]
