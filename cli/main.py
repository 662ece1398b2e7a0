"""The ``pylota`` command group (the console script of ``pyproject.toml``).

Each subcommand's module is imported only when that command runs (click's lazy loading pattern):
``pylota import`` then loads the mail code it needs, not the front, its web framework and the
workers, which took about a second at every start (issue 14, ``bench.ingest``).
"""

from __future__ import annotations

import importlib

import click

__all__ = ["main"]

#: Command name → ``module:attribute`` of its click command.
COMMANDS = {
    "migrate": "cli.admin:migrate_cmd",
    "partners": "cli.admin:partners",
    "tenants": "cli.admin:tenants",
    "identities": "cli.admin:identities",
    "keys": "cli.admin:keys",
    "signing-keys": "cli.admin:signing_keys",
    "reindex": "cli.admin:reindex",
    "suppressions": "cli.suppressions:suppressions",
    "import": "cli.mail:import_cmd",
    "embeddings": "cli.mail:embeddings",
    "serve": "cli.processes:serve",
    "worker": "cli.processes:worker",
    "smtp": "cli.processes:smtp",
}


class _LazyGroup(click.Group):
    """A group whose commands (:data:`COMMANDS`) are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, attribute = where.split(":")
        return getattr(importlib.import_module(module), attribute)


@click.group(cls=_LazyGroup)
@click.version_option(package_name="pylota-mail", prog_name="pylota")
def main() -> None:
    """Pylota Mail: business email for AI agents over MCP and REST."""
