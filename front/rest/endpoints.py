"""The REST API v1's endpoints as data: each maps an HTTP method and path to one tool.

Paths are the spec's where it names them (``GET /v1/identities``, ``GET /v1/identities/lookup``,
``POST /v1/tenants/{tenant_id}/search``, ``GET /v1/usage``), and the same resource style for the
rest. Read by ``front.rest.routes`` (the handlers) and ``front.rest.openapi`` (the document).

The send endpoints take ``idempotency_key`` as the ``Idempotency-Key`` header (spec section 4.3:
the argument has "the pattern of the REST Idempotency-Key header"), never in the body, and answer
201 for a new message and 200 when the call replays an earlier one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["RestHeader", "RestRoute", "REST_ROUTES", "IDEMPOTENCY_KEY"]


@dataclass(frozen=True, slots=True)
class RestHeader:
    """A request header that carries a tool argument: the ``argument``, and the ``fix`` of the
    error a request without the header gets."""

    argument: str
    fix: str


@dataclass(frozen=True, slots=True)
class RestRoute:
    """One endpoint: ``method`` and ``path`` (Litestar syntax), the ``tool`` it calls, and how
    its arguments are gathered (see the module docstring). ``query`` names the query parameters
    renamed to arguments (``timeout`` → ``timeout_seconds``); ``headers`` the required request
    headers that carry arguments. ``status`` is the success status, and ``replay_status`` the
    one of a result that replays an earlier call (``deduplicated: true``), when it differs."""

    method: Literal["GET", "POST", "PATCH", "DELETE"]
    path: str
    tool: str
    summary: str
    path_args: Mapping[str, str] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, RestHeader] = field(default_factory=dict)
    status: int = 200
    replay_status: int | None = None


#: The send endpoints' ``Idempotency-Key`` header (spec section 4.3).
IDEMPOTENCY_KEY: Mapping[str, RestHeader] = {"Idempotency-Key": RestHeader(
    argument="idempotency_key",
    fix="Send an Idempotency-Key header of 1-255 printable ASCII characters: a new unique value "
        "for each new message, and the same value when you retry that message.")}


REST_ROUTES: tuple[RestRoute, ...] = (
    RestRoute("GET", "/v1/identities", "mail_list_identities",
              "List the identities (mailboxes) this key can use."),
    RestRoute("POST", "/v1/identities/{identity_id:str}/search", "mail_search",
              "Search one identity's mail.", path_args={"identity_id": "identity"}),
    RestRoute("POST", "/v1/tenants/{tenant_id:str}/search", "mail_search",
              "Search every identity of a tenant (or the identity_ids given).",
              path_args={"tenant_id": "tenant_id"}, fixed={"scope": "tenant"}),
    RestRoute("GET", "/v1/identities/{identity_id:str}/threads", "mail_list_threads",
              "List an identity's threads, newest first, with filters.",
              path_args={"identity_id": "identity"}),
    RestRoute("GET", "/v1/threads/{thread_id:str}", "mail_get_thread",
              "Read a thread, oldest message first.", path_args={"thread_id": "thread_id"}),
    RestRoute("PATCH", "/v1/threads/{thread_id:str}", "mail_update_labels",
              "Add or remove labels on every message of a thread, and mark it read or unread.",
              path_args={"thread_id": "thread_id"}),
    RestRoute("GET", "/v1/messages/{message_id:str}", "mail_get_message", "Read a message.",
              path_args={"message_id": "message_id"}),
    RestRoute("PATCH", "/v1/messages/{message_id:str}", "mail_update_labels",
              "Add or remove labels on a message, and mark it read or unread.",
              path_args={"message_id": "message_id"}),
    RestRoute("GET", "/v1/messages/{message_id:str}/attachments/{attachment_id:str}/text",
              "mail_get_attachment_text", "Read an attachment's extracted text, page by page.",
              path_args={"message_id": "message_id", "attachment_id": "attachment_id"}),
    RestRoute("GET", "/v1/messages/{message_id:str}/related", "mail_find_related",
              "Find messages in other threads about the same thing.",
              path_args={"message_id": "message_id"}),
    RestRoute("GET", "/v1/identities/{identity_id:str}/contacts", "mail_search_contacts",
              "Search the people and organisations an identity exchanged mail with.",
              path_args={"identity_id": "identity"}),
    RestRoute("GET", "/v1/identities/{identity_id:str}/wait", "mail_wait",
              "Wait for a new matching message (SSE with Accept: text/event-stream, else long "
              "poll).", path_args={"identity_id": "identity"},
              query={"timeout": "timeout_seconds"}),
    RestRoute("POST", "/v1/identities/{identity_id:str}/assertions", "mail_sign_assertion",
              "Sign an agent assertion (a JWT) for a third-party service.",
              path_args={"identity_id": "identity"}, status=201),
    RestRoute("POST", "/v1/identities/{identity_id:str}/http-signatures",
              "mail_sign_http_request", "Sign one HTTP request with Web Bot Auth headers.",
              path_args={"identity_id": "identity"}),
    RestRoute("GET", "/v1/usage", "mail_get_usage",
              "The key's workspace: its plan and every allowance's grant, use and reset."),
    RestRoute("POST", "/v1/identities/{identity_id:str}/messages", "mail_send",
              "Send a new email from an identity (201; 200 when it replays the Idempotency-Key).",
              path_args={"identity_id": "identity"}, headers=IDEMPOTENCY_KEY, status=201,
              replay_status=200),
    RestRoute("POST", "/v1/messages/{message_id:str}/reply", "mail_reply",
              "Reply to a message (201; 200 when it replays the Idempotency-Key).",
              path_args={"message_id": "message_id"}, headers=IDEMPOTENCY_KEY, status=201,
              replay_status=200),
    RestRoute("POST", "/v1/messages/{message_id:str}/forward", "mail_forward",
              "Forward a message (201; 200 when it replays the Idempotency-Key).",
              path_args={"message_id": "message_id"}, headers=IDEMPOTENCY_KEY, status=201,
              replay_status=200),
    RestRoute("POST", "/v1/identities/{identity_id:str}/deep-search", "mail_deep_search",
              "Answer a question from one identity's mail, with checked citations (SSE with "
              "Accept: text/event-stream, else long poll).",
              path_args={"identity_id": "identity"}),
    RestRoute("POST", "/v1/tenants/{tenant_id:str}/deep-search", "mail_deep_search",
              "Answer a question from every identity of a tenant (or the identity_ids given), "
              "with checked citations (SSE with Accept: text/event-stream, else long poll).",
              path_args={"tenant_id": "tenant_id"}, fixed={"scope": "tenant"}),
)
