"""Tool schemas are generated from the tools' types (shared.tools.schema), and they are the
spec's (seed section 4.3) for every tool: the same titles, descriptions and input schemas."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import pytest

from shared.tools.registry import TOOLS
from shared.tools.schema import input_schema
from tests.conftest import kit_path
from tests.spec_text import spec_tools

SPEC = None if kit_path() is None else spec_tools(kit_path())


@pytest.mark.skipif(SPEC is None, reason="team kit absent: set PYLOTA_KIT to compare with the spec")
@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_title_description_and_generated_input_schema_are_the_specs(tool):
    defined = SPEC[tool.name]
    assert (tool.title, tool.description) == (defined.title, defined.description)
    assert tool.input_schema == defined.input_schema


class Recipient(msgspec.Struct, forbid_unknown_fields=True):
    address: Annotated[str, msgspec.Meta(max_length=254)]
    name: Annotated[str, msgspec.Meta(max_length=78)] | None = None


class Sample(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Docstrings are not published: the spec's input schemas have no top-level description."""

    q: Annotated[str, msgspec.Meta(max_length=9, description="words")]
    kind: Literal["b", "a"] = "b"
    to: list[Annotated[str, msgspec.Meta(max_length=254)] | Recipient] = []
    limit: Annotated[int, msgspec.Meta(ge=1, le=5)] | None = None


def test_generation_rules():
    schema = input_schema(Sample, {"oneOf": [{"required": ["q"]}]})
    assert schema == {
        "type": "object", "additionalProperties": False, "required": ["q"],
        "oneOf": [{"required": ["q"]}],
        "properties": {
            "q": {"type": "string", "maxLength": 9, "description": "words"},
            "kind": {"type": "string", "enum": ["b", "a"], "default": "b"},
            "to": {"type": "array", "items": {"oneOf": [
                {"type": "string", "maxLength": 254},
                {"type": "object", "additionalProperties": False, "required": ["address"],
                 "properties": {"address": {"type": "string", "maxLength": 254},
                                "name": {"type": "string", "maxLength": 78}}}]}},
            "limit": {"type": "integer", "minimum": 1, "maximum": 5},
        }}
