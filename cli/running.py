"""What every ``pylota`` command shares: running async work with settings, and printing."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg
import click
import msgspec

from shared.config import Settings, SettingsError
from shared.errors import ErrorCode, PylotaError, dependency_failure
from shared.logs import configure

__all__ = ["run", "emit"]

T = TypeVar("T")

#: Fixes worded for this command line where the domain's own fix speaks to an MCP client.
_CLI_FIX = {
    ErrorCode.IDENTITY_NOT_FOUND: "Check the id or address; `pylota identities create --tenant "
                                  "TENANT --address ADDRESS` makes a new identity.",
}


#: Exit status of a command that PostgreSQL or Redis failed (out of reach, or gone mid-way):
#: running it again may work.
EXIT_UNAVAILABLE = 1
#: Exit status of a command refused for its input or settings.
EXIT_REFUSED = 2


def run(work: Callable[[Settings], Awaitable[T]]) -> T:
    """Run ``work(settings)``; on a settings or Pylota error print it and its fix and exit
    :data:`EXIT_REFUSED`; when PostgreSQL or Redis cannot be reached or goes away mid-way, say
    so (no traceback) and exit :data:`EXIT_UNAVAILABLE`."""
    try:
        settings = Settings.from_env()
        # JSON lines on stderr: stdout carries only what the command prints (--json is JSON).
        configure(settings.pm_log_level)
        return asyncio.run(work(settings))
    except SettingsError as exc:
        click.echo(f"error: {exc}", err=True)
    except PylotaError as exc:
        click.echo(f"error: {exc.message}\nfix: {_CLI_FIX.get(exc.code, exc.fix)}", err=True)
        if exc.code is ErrorCode.UNAVAILABLE and exc.retryable:
            sys.exit(EXIT_UNAVAILABLE)
    except (asyncpg.UndefinedTableError, asyncpg.UndefinedColumnError) as exc:
        # A database made by hand, or by an older Pylota (each printed a traceback: found by a
        # new user).
        click.echo(f"error: The database has no Pylota tables, or older ones ({exc}).\n"
                   "fix: Run `pylota migrate` with the same DATABASE_URL.", err=True)
    except Exception as exc:
        if dependency_failure(exc) is None:
            raise
        click.echo(f"error: PostgreSQL or Redis stopped answering ({type(exc).__name__}).\n"
                   "fix: Check that both are running (DATABASE_URL, REDIS_URL) and run the "
                   "command again; an import counts what it already stored as duplicates.",
                   err=True)
        sys.exit(EXIT_UNAVAILABLE)
    sys.exit(EXIT_REFUSED)


def emit(obj: Any, as_json: bool, text: str) -> None:
    """Print ``obj`` as JSON with ``--json``, else ``text``."""
    click.echo(msgspec.json.encode(obj).decode() if as_json else text)


