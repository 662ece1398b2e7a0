"""``pylota serve``, ``pylota worker`` and ``pylota smtp``: the long-running processes."""

from __future__ import annotations

import asyncio
import signal
import sys

import click
import uvicorn

from front.app import create_app
from front.http_head import BoundedHead
from front.smtp import serve_smtp
from shared.config import Settings, SettingsError
from shared.errors import PylotaError
from shared.logs import configure
from workers.process import is_alive, serve as serve_worker

__all__ = ["serve", "worker", "smtp"]


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=int, help="Port to listen on.")
def serve(host: str, port: int) -> None:
    """Serve POST /mcp and the REST API (/v1) on uvicorn (run several behind a load balancer to
    scale out)."""
    app = create_app(_settings())
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False,
                http=BoundedHead)


def _settings() -> Settings:
    """The environment's settings, or the error and its fix and exit 2: a front started with a
    DATABASE_URL of a wrong scheme answered every request 500 (found by a new user)."""
    try:
        return Settings.from_env()
    except SettingsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


async def _run_worker(settings: Settings, batch: bool) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await serve_worker(settings, "batch" if batch else "interactive", stop)


@click.command()
@click.option("--check", is_flag=True,
              help="Exit 0 when this host's worker is alive (beating in Redis), else 1 (for "
                   "health checks).")
@click.option("--batch", is_flag=True,
              help="Serve the batch queue (embeddings, attachment text, delivery of sent mail, "
                   "purging spent idempotency keys) instead of the interactive one (mail_wait, "
                   "mail_deep_search).")
def worker(check: bool, batch: bool) -> None:
    """Run a worker (scale with more processes: `docker compose up --scale worker=N`): the
    interactive queue (mail_wait, mail_deep_search), or with --batch the background work. It
    reconnects when Redis restarts, and stops cleanly on SIGTERM."""
    settings = _settings()
    if check:
        sys.exit(0 if asyncio.run(is_alive(settings, "batch" if batch else "interactive"))
                 else 1)
    try:
        asyncio.run(_run_worker(settings, batch))
    except SettingsError as exc:  # a DKIM key that cannot sign, found at start-up
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)


async def _run_smtp(settings: Settings, authserv_id: str) -> None:
    listening = asyncio.create_task(serve_smtp(settings, authserv_id=authserv_id))
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, listening.cancel)
    try:
        await listening
    except asyncio.CancelledError:
        if not listening.cancelled():
            raise


@click.command()
@click.option("--authserv-id", default=None,
              help="This receiver's name in the Authentication-Results it adds (RFC 8601); "
                   "only results under it are trusted. Default: PM_API_HOST.")
def smtp(authserv_id: str | None) -> None:
    """Receive mail for the identities over SMTP on PM_SMTP_LISTEN_HOST:PM_SMTP_LISTEN_PORT
    (unknown recipients are refused with 550), check SPF, DKIM and DMARC, and store it as
    `pylota import` does. Stops cleanly on SIGTERM."""
    settings = _settings()
    configure(settings.pm_log_level)  # JSON lines on stderr, as the front's and workers'
    try:
        asyncio.run(_run_smtp(settings, authserv_id or settings.pm_api_host))
    except PylotaError as exc:
        click.echo(f"error: {exc.message}\nfix: {exc.fix}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"error: cannot listen on {settings.pm_smtp_listen_host}:"
                   f"{settings.pm_smtp_listen_port}: {exc.strerror or exc}", err=True)
        sys.exit(2)
