"""The HTTP front: knows HTTP and the MCP wire, and nothing about mail.

``front.mcp`` holds the MCP protocol types (:mod:`front.mcp.protocol`) and the pure request ladder
(:mod:`front.mcp.inbound`). The front imports ``shared``; ``shared`` never imports the front
(STYLE.md section 2).
"""

__all__: list[str] = []
