"""The Litestar application factory.

``create_app(settings)`` builds the app: ``POST /mcp`` (``front.mcp``) and the REST API under
``/v1`` (``front.rest``), both on the one call pipeline (``shared.tools.call``), and the signing
keys' public documents under ``/.well-known`` (``front.wellknown``), behind load shedding
(``front.shedding``). Its lifespan opens the process's resources (``front.resources``), warms
them (``front.warm``) and closes them on exit. Tests pass their own ``tools`` and ``prompts``
(the conformance suite's fixtures); the product registers only the real registry.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from litestar import Litestar, Request, Response
from litestar.exceptions import MethodNotAllowedException

from front.mcp.prompts import PROMPTS, PromptSpec
from front.mcp.transport import MCP_PATH, mcp_routes, method_not_allowed
from front.resources import open_resources
from front.rest.routes import rest_routes
from front.rest.errors import EXCEPTION_HANDLERS
from front.shedding import Shedding
from front.warm import warm
from front.wellknown import wellknown_routes
from shared.config import Settings
from shared.logs import configure
from shared.tools.registry import TOOLS, ToolSpec

__all__ = ["create_app"]


def create_app(settings: Settings, *, tools: Sequence[ToolSpec] = TOOLS,
               prompts: Sequence[PromptSpec] = PROMPTS) -> Litestar:
    """Build the front for ``settings`` serving ``tools`` (MCP and REST) and ``prompts``."""
    configure(settings.pm_log_level)

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with open_resources(settings, tools) as resources:
            await warm(resources)
            app.state.resources = resources
            yield

    app = Litestar(route_handlers=[*mcp_routes(prompts), *rest_routes(tools),
                                   *wellknown_routes()],
                   lifespan=[lifespan],
                   exception_handlers={**EXCEPTION_HANDLERS,
                                       MethodNotAllowedException: _not_allowed},
                   openapi_config=None, debug=False, request_max_body_size=None)
    # Around the whole app rather than as Litestar middleware, which Litestar wraps around each
    # route with an exception middleware of its own: a second one per request, held by every
    # open stream for its life (about 0.5 KB each, issue 14). A refusal needs no route anyway.
    app.asgi_handler = Shedding(app.asgi_handler, settings.pm_max_in_flight,
                                settings.pm_max_in_flight_per_key)
    return app


def _not_allowed(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    """A method no route lists: the MCP endpoint's 405 on its path, the REST API's elsewhere."""
    if request.url.path == MCP_PATH:
        return method_not_allowed(request.method)
    return EXCEPTION_HANDLERS[MethodNotAllowedException](request, exc)
