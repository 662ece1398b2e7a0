"""The MCP tool registry: each tool's name, texts, schemas, permission, bucket and handler.

The registry is data (``registry.TOOLS``); the front filters it by key and dispatches to handlers,
the workers run the handlers of tools that run on a worker. Handlers take a
:class:`~shared.tools.context.ToolContext` and a decoded argument Struct, and return a result
Struct or raise :class:`~shared.errors.PylotaError`.
"""

__all__: list[str] = []
