"""The ``pylota`` command group (the console script of ``pyproject.toml``)."""

from __future__ import annotations

import click

from cli.admin import identities, keys, migrate_cmd, partners, reindex, signing_keys, tenants
from cli.mail import embeddings, import_cmd
from cli.processes import serve, smtp, worker

__all__ = ["main"]


@click.group()
def main() -> None:
    """Pylota Mail: business email for AI agents over MCP and REST."""


for command in (migrate_cmd, partners, tenants, identities, keys, signing_keys, reindex,
                import_cmd, embeddings, serve, worker, smtp):
    main.add_command(command)
