"""``pylota serve``: run the front on uvicorn."""

from __future__ import annotations

import click
import uvicorn

from front.app import create_app
from shared.config import Settings

__all__ = ["serve"]


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=int, help="Port to listen on.")
def serve(host: str, port: int) -> None:
    """Serve POST /mcp on uvicorn (run several behind a load balancer to scale out)."""
    app = create_app(Settings.from_env())
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)
