"""Dependencies point one way: front -> shared <- workers (STYLE.md section 2)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[str(path.relative_to(ROOT))] = names
    return found


def offenders(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{path} imports {name}" for path, names in imported_modules(package).items()
            for name in sorted(names) if name.split(".")[0] in forbidden]


def test_shared_imports_neither_front_nor_workers_nor_their_frameworks():
    assert offenders("shared", ("front", "workers", "litestar", "arq", "uvicorn")) == []


def test_workers_do_not_import_the_front():
    assert offenders("workers", ("front", "litestar", "uvicorn")) == []


def test_front_does_not_import_the_workers():
    assert offenders("front", ("workers",)) == []


def test_no_grab_bag_modules():
    names = {p.stem for top in ("front", "workers", "shared", "tests", "bench", "scripts")
             for p in (ROOT / top).rglob("*.py")}
    assert not names & {"utils", "helpers", "common", "misc"}
