"""The binding spec's tool definitions, read from its text in the team kit (seed section 4.3).

Each tool's section is ``name``, a blank line, ``Title “…”. Description: …``, then its input
schema as a JSON object, and for some tools ``Output:`` and the output schema. The spec writes
two shorthands, expanded here as it says: ``$defs`` are inlined ("The server inlines $defs
before publishing the schema"), and ``{"…": "as mail_send"}`` is mail_send's schema at the
same place.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from shared.tools.schema import inline_refs

__all__ = ["SpecTool", "spec_tools", "SEED_NAME"]

SEED_NAME = "000_210278c88de83c70.txt"
_HEADING = re.compile(r"\n(mail_[a-z_]+)\n\nTitle “([^”]+)”\. Description: (.*)\n")


class SpecTool:
    """One tool as the spec defines it."""

    def __init__(self, name: str, title: str, description: str, input_schema: dict[str, Any],
                 output_schema: dict[str, Any] | None) -> None:
        self.name, self.title, self.description = name, title, description
        self.input_schema, self.output_schema = input_schema, output_schema


def _json_at(text: str, start: int) -> tuple[dict[str, Any], int]:
    obj, end = json.JSONDecoder().raw_decode(text[start:])
    return obj, start + end


def _expand(schema: Any, tools: dict[str, dict[str, Any]], path: tuple[str, ...]) -> Any:
    if isinstance(schema, dict):
        if set(schema) == {"…"} and schema["…"].startswith("as "):
            source: Any = tools[schema["…"][3:]]
            for key in path:
                source = source[key]
            return source
        return {k: _expand(v, tools, (*path, k)) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_expand(v, tools, (*path, str(n))) for n, v in enumerate(schema)]
    return schema


def spec_tools(kit: Path) -> dict[str, SpecTool]:
    """Every tool of the spec, by name."""
    text = (kit / "seeds" / SEED_NAME).read_text(encoding="utf-8")
    headings = list(_HEADING.finditer(text))
    raw: dict[str, tuple[str, str, dict[str, Any], dict[str, Any] | None]] = {}
    for n, found in enumerate(headings):
        end_of_section = headings[n + 1].start() if n + 1 < len(headings) else len(text)
        schema, after = _json_at(text, text.index("{", found.end()))
        schema = inline_refs(schema, schema.get("$defs", {}))
        output = None
        marker = text.find("Output:", after, end_of_section)
        if marker >= 0 and text[marker + len("Output:"):].lstrip().startswith("{"):
            try:  # some outputs are prose such as "{ data: Identity[], next_cursor }"
                output, _ = _json_at(text, text.index("{", marker))
            except json.JSONDecodeError:
                output = None
        raw[found.group(1)] = (found.group(2), found.group(3), schema, output)
    inputs = {name: entry[2] for name, entry in raw.items()}
    return {name: SpecTool(name, title, description, _expand(schema, inputs, ()), output)
            for name, (title, description, schema, output) in raw.items()}
