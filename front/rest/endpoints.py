"""The REST API v1's endpoints as data: each maps an HTTP method and path to one tool.

Paths are the spec's where it names them (``GET /v1/identities``, ``GET /v1/identities/lookup``,
``POST /v1/tenants/{tenant_id}/search``), and the same resource style for the rest. Read by
``front.rest.routes`` (the handlers) and ``front.rest.openapi`` (the document).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["RestRoute", "REST_ROUTES"]


@dataclass(frozen=True, slots=True)
class RestRoute:
    """One endpoint: ``method`` and ``path`` (Litestar syntax), the ``tool`` it calls, and how
    its arguments are gathered (see the module docstring). ``query`` names the query parameters
    renamed to arguments (``timeout`` → ``timeout_seconds``)."""

    method: Literal["GET", "POST", "PATCH", "DELETE"]
    path: str
    tool: str
    summary: str
    path_args: Mapping[str, str] = field(default_factory=dict)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    status: int = 200


REST_ROUTES: tuple[RestRoute, ...] = (
    RestRoute("GET", "/v1/identities", "mail_list_identities",
              "List the identities (mailboxes) this key can use."),
    RestRoute("POST", "/v1/identities/{identity_id:str}/search", "mail_search",
              "Search one identity's mail.", path_args={"identity_id": "identity"}),
    RestRoute("POST", "/v1/tenants/{tenant_id:str}/search", "mail_search",
              "Search every identity of a tenant (or the identity_ids given).",
              path_args={"tenant_id": "tenant_id"}, fixed={"scope": "tenant"}),
    RestRoute("GET", "/v1/threads/{thread_id:str}", "mail_get_thread",
              "Read a thread, oldest message first.", path_args={"thread_id": "thread_id"}),
    RestRoute("GET", "/v1/messages/{message_id:str}", "mail_get_message", "Read a message.",
              path_args={"message_id": "message_id"}),
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
    RestRoute("POST", "/v1/identities/{identity_id:str}/deep-search", "mail_deep_search",
              "Answer a question from one identity's mail, with checked citations (SSE with "
              "Accept: text/event-stream, else long poll).",
              path_args={"identity_id": "identity"}),
    RestRoute("POST", "/v1/tenants/{tenant_id:str}/deep-search", "mail_deep_search",
              "Answer a question from every identity of a tenant (or the identity_ids given), "
              "with checked citations (SSE with Accept: text/event-stream, else long poll).",
              path_args={"tenant_id": "tenant_id"}, fixed={"scope": "tenant"}),
)
