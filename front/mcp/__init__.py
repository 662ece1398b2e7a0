"""The MCP server at ``POST /mcp`` (seed sections 1 and 2).

``protocol`` holds the wire types, codes and version facts; ``inbound`` is the pure request
ladder that turns headers and a body into a ``Route`` or a ``Rejection``.
"""

__all__: list[str] = []
