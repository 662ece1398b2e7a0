"""The REST API's OpenAPI 3.1 document, generated from the same types as the tools' schemas.

Every operation is one :class:`~front.rest.endpoints.RestRoute`: its path and query parameters and
its JSON body are the tool's ``inputSchema`` properties (``shared.tools.schema``: the argument
Structs), split by where the route takes them from; its success response is the tool's
``outputSchema``, and every error is the spec section 5 envelope, with the statuses of DESIGN.md
section 5.5. JSON Schema 2020-12 is OpenAPI 3.1's own dialect, so the schemas go in unchanged.
Pure: no I/O; ``front.rest.routes`` serves the result at ``/v1/openapi.json``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from front.rest.endpoints import RestRoute
from shared.errors import ErrorEnvelope
from shared.tools.registry import ToolSpec
from shared.tools.schema import output_schema

__all__ = ["openapi_document", "ERROR_STATUSES"]

#: Error statuses every operation may answer (DESIGN.md section 5.5, and 405 for a method the
#: path does not serve).
ERROR_STATUSES = (400, 401, 402, 403, 404, 405, 409, 413, 429, 500, 503)

_PATH_PARAM = re.compile(r"\{(\w+):\w+\}")


def _operation(route: RestRoute, spec: ToolSpec) -> dict[str, Any]:
    schema = spec.rest_input_schema
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    bound = {*route.path_args.values(), *route.fixed,
             *(header.argument for header in route.headers.values())}
    parameters: list[dict[str, Any]] = [
        {"name": param, "in": "path", "required": True, "schema": properties[argument]}
        for param, argument in route.path_args.items()]
    parameters += [{"name": name, "in": "header", "required": True,
                    "schema": properties[header.argument],
                    "description": f"The tool's {header.argument} argument."}
                   for name, header in route.headers.items()]
    operation: dict[str, Any] = {
        "operationId": f"{route.method.lower()}_{route.tool}"
                       + ("_tenant" if "scope" in route.fixed else ""),
        "summary": route.summary, "description": spec.description, "tags": [spec.name],
    }
    free = {name: prop for name, prop in properties.items() if name not in bound}
    if route.method == "GET":
        query_names = {argument: param for param, argument in route.query.items()}
        parameters += [{"name": query_names.get(name, name), "in": "query",
                        "required": name in required, "schema": prop}
                       for name, prop in free.items()]
    else:
        body: dict[str, Any] = {key: value for key, value in schema.items()
                                if key not in ("properties", "required")}
        body["properties"] = free
        if needed := sorted(required - bound):
            body["required"] = needed
        if any(bound & set(branch.get("required", ())) for branch in body.get("oneOf", ())):
            del body["oneOf"]  # the path names the one (mail_update_labels' message or thread)
        if route.method == "PATCH":
            body["minProperties"] = 1  # a PATCH changes something (spec section 4.3)
        operation["requestBody"] = {"required": True,
                                    "content": {"application/json": {"schema": body}}}
    operation["parameters"] = parameters
    success: dict[str, Any] = {"application/json": {"schema": spec.output_schema or {}}}
    if spec.runs_on == "worker":
        success["text/event-stream"] = {"schema": {"type": "string"}}
    replay = {} if route.replay_status is None else {str(route.replay_status): {
        "description": "The original result, replayed for a repeated Idempotency-Key "
                       "(deduplicated: true).", "content": success}}
    operation["responses"] = {
        str(route.status): {"description": "The tool's result (MCP's structuredContent).",
                            "content": success},
        **replay,
        **{str(status): {"$ref": "#/components/responses/Error"} for status in ERROR_STATUSES},
    }
    return operation


def openapi_document(routes: Sequence[RestRoute], tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """The OpenAPI 3.1 document of ``routes`` (each calling one of ``tools``)."""
    by_name = {t.name: t for t in tools}
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        path = _PATH_PARAM.sub(r"{\1}", route.path)
        paths.setdefault(path, {})[route.method.lower()] = _operation(route, by_name[route.tool])
    if "mail_list_identities" in by_name:
        identity = output_schema(by_name["mail_list_identities"].result)["properties"]["data"]["items"]  # type: ignore[arg-type]
        paths["/v1/identities/lookup"] = {"get": {
            "operationId": "get_identity_lookup", "tags": ["mail_list_identities"],
            "summary": "The identity owning an address (identities:read).",
            "parameters": [{"name": "address", "in": "query", "required": True,
                            "schema": {"type": "string", "minLength": 1, "maxLength": 254}}],
            "responses": {"200": {"description": "The identity.",
                                  "content": {"application/json": {"schema": identity}}},
                          **{str(s): {"$ref": "#/components/responses/Error"}
                             for s in ERROR_STATUSES}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Pylota Mail API", "version": "1.0.0",
                 "description": "Business email for AI agents: the same tools as the MCP server "
                                "at POST /mcp, as REST endpoints. Authenticate with "
                                "'Authorization: Bearer pmk_live_…'."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"ErrorEnvelope": output_schema(ErrorEnvelope)},
            "responses": {"Error": {
                "description": "The error envelope (spec section 5).",
                "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}}},
        },
    }
