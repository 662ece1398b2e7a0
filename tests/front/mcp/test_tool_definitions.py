"""Every tool's listing sets all four annotation hints (spec section 4.1) and publishes portable,
reference-free output schemas (section 4.2). The schemas themselves are compared with the spec
in tests/shared/tools/test_schema.py."""

from __future__ import annotations

import json

import pytest

from front.mcp.dispatch import tool_entry
from shared.tools.registry import TOOLS


@pytest.mark.parametrize("spec", TOOLS, ids=lambda t: t.name)
def test_all_four_hints_are_explicit_and_output_schema_is_an_object(spec):
    entry = tool_entry(spec)
    hints = entry.annotations
    assert None not in (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint,
                        hints.open_world_hint)
    assert entry.output_schema["type"] == "object"
    assert "$ref" not in json.dumps(entry.output_schema)


def _bare_booleans(schema: object, path: str = "$") -> list[str]:
    """Places where a schema is ``true``/``false`` instead of an object (legal in 2020-12, but
    clients that validate strictly, such as the Inspector's --strict, refuse them)."""
    if isinstance(schema, bool):
        return [path]
    if isinstance(schema, list):
        return [p for i, item in enumerate(schema) for p in _bare_booleans(item, f"{path}[{i}]")]
    if not isinstance(schema, dict):
        return []
    found = []
    for key, value in schema.items():
        if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
            found += [p for name, sub in value.items() for p in _bare_booleans(sub, f"{path}.{name}")]
        elif key in ("items", "additionalProperties", "not", "anyOf", "oneOf", "allOf",
                     "prefixItems") and not (key == "additionalProperties" and value is False):
            found += _bare_booleans(value, f"{path}.{key}")
    return found


@pytest.mark.parametrize("spec", TOOLS, ids=lambda t: t.name)
def test_output_schemas_are_portable(spec):
    assert _bare_booleans(tool_entry(spec).output_schema) == []
