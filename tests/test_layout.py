"""The layout rules of STYLE.md section 2 and issue 8, checked on the source itself.

- dependencies point one way: ``cli`` → ``front`` → ``shared`` ← ``workers`` ← ``cli``; ``shared``
  imports none of them nor Litestar, arq or uvicorn; workers import no ``shared.tools``;
- no import circle, between modules or between packages;
- every table's SQL lives in its owner module; the one exception is the search read path,
  which reads the mail tables directly for speed (said once, in ``shared.mail.store``'s
  docstring) and never writes them;
- no grab-bag modules.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "front", "workers", "shared")

#: Table → the one module holding its SQL.
OWNERS = {
    "partners": "shared/tenancy/store.py",
    "tenants": "shared/tenancy/store.py",
    "identities": "shared/tenancy/store.py",
    "identity_addresses": "shared/tenancy/store.py",
    "api_keys": "shared/auth/keys.py",
    "threads": "shared/mail/store.py",
    "thread_refs": "shared/mail/store.py",
    "thread_aliases": "shared/mail/store.py",
    "messages": "shared/mail/store.py",
    "raw_messages": "shared/mail/store.py",
    "attachments": "shared/mail/store.py",
    "contacts": "shared/mail/contacts.py",
    "message_triage": "shared/mail/triage.py",
    "message_refs": "shared/mail/refs.py",
    "tenant_ref_patterns": "shared/mail/patterns.py",
    "message_embeddings": "shared/embeddings/store.py",
    "embedding_queue": "shared/embeddings/store.py",
    "schema_migrations": "shared/db/migrate.py",
    "attachment_texts": "shared/extract/store.py",
    "signing_keys": "shared/signing/keys.py",
    "send_requests": "shared/outbound/idempotency.py",
    "outbound_messages": "shared/outbound/outbox.py",
    "outbound_recipients": "shared/outbound/outbox.py",
    "suppressions": "shared/outbound/suppression.py",
    "message_trust": "shared/mail/trust.py",
    "tenant_plans": "shared/plans.py",
    "tenant_allowances": "shared/plans.py",
    "allowance_topups": "shared/plans.py",
}
#: The named exception: the search read path may read these tables (never write them).
SEARCH_READERS = ("shared/search/", "shared/embeddings/")
SEARCH_READS = {"messages", "attachments", "threads", "thread_aliases", "message_refs",
                "message_triage", "message_embeddings", "attachment_texts"}

# SQL keywords are written in capitals here, which tells SQL from prose ("come from tenants").
_SQL = re.compile(r"\b(FROM|JOIN|INTO|UPDATE|TABLE)\s+([a-z_]+)\b")
_WRITE = re.compile(r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+([a-z_]+)\b")


def _modules() -> dict[str, Path]:
    found = {}
    for top in PACKAGES:
        for path in (ROOT / top).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def _graph() -> dict[str, set[str]]:
    return {name: {m for m in _imports(path) if m in MODULES and m != name}
            for name, path in MODULES.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    if len(parts) >= 2 and (ROOT / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def offenders(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{name} imports {imported}" for name, path in MODULES.items()
            if name.split(".")[0] == package for imported in sorted(_imports(path))
            if any(imported == f or imported.startswith(f + ".") for f in forbidden)]


def test_shared_imports_neither_front_nor_workers_nor_the_cli_nor_their_frameworks():
    assert offenders("shared", ("cli", "front", "workers", "litestar", "arq", "uvicorn")) == []


def test_workers_import_neither_the_front_nor_tools_nor_mcp():
    assert offenders("workers", ("cli", "front", "litestar", "uvicorn", "shared.tools")) == []


def test_front_does_not_import_the_workers_or_the_cli():
    assert offenders("front", ("workers", "cli")) == []


def test_nothing_imports_the_cli():
    assert [o for p in ("front", "workers", "shared") for o in offenders(p, ("cli",))] == []


def test_no_import_circle_between_modules_or_packages():
    graph = _graph()
    assert _cycles(graph) == []
    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        for other in imported:
            if _package(module) != _package(other):
                packages.setdefault(_package(module), set()).add(_package(other))
    assert _cycles(packages) == []


def _sql_strings(path: Path) -> list[str]:
    return [node.value for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_every_tables_sql_lives_in_its_owner_module():
    misplaced = []
    for path in MODULES.values():
        where = str(path.relative_to(ROOT))
        reader = where.startswith(SEARCH_READERS)
        for text in _sql_strings(path):
            for _, table in _SQL.findall(text):
                owner = OWNERS.get(table.lower())
                if owner is None or owner == where:
                    continue
                if reader and table.lower() in SEARCH_READS:
                    continue
                misplaced.append(f"{where} names {table} (owner {owner})")
            if reader:
                misplaced += [f"{where} writes {table}" for _, table in _WRITE.findall(text)
                              if table.lower() in SEARCH_READS
                              and OWNERS[table.lower()] != where]
    assert sorted(set(misplaced)) == []


def test_every_table_of_the_migrations_has_an_owner():
    created = {name for path in (ROOT / "shared/db/migrations").glob("*.sql")
               for name in re.findall(r"CREATE TABLE (?:IF NOT EXISTS )?([a-z_]+)",
                                      path.read_text())}
    assert created - set(OWNERS) == set()


def test_the_search_exception_is_stated_by_the_owner():
    doc = ast.get_docstring(ast.parse((ROOT / "shared/mail/store.py").read_text()))
    assert "search" in doc and "directly" in doc


def test_no_grab_bag_modules():
    names = {p.stem for top in (*PACKAGES, "tests", "bench", "scripts")
             for p in (ROOT / top).rglob("*.py")}
    assert not names & {"utils", "helpers", "common", "misc"}
