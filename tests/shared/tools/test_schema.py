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


@pytest.mark.parametrize(("tool", "field"), [("mail_search", "labels"),
                                             ("mail_sign_assertion", "ext"),
                                             ("mail_send", "metadata")])
def test_arguments_nested_past_the_limit_are_invalid_request_on_their_path(tool, field):
    """490 levels of arrays (which JSON parsing takes) ran the checks out of stack: an
    ``internal`` error, retryable (found by an attack). Now ``invalid_request`` naming the
    path; the limit leaves every schema's own depth room."""
    from shared.errors import ErrorCode, PylotaError
    from shared.tools.call import MAX_ARGUMENT_DEPTH, decode_arguments

    spec = next(t for t in TOOLS if t.name == tool)
    deep: object = "x"
    for _ in range(490):
        deep = [deep]
    with pytest.raises(PylotaError) as caught:
        decode_arguments(spec, {field: deep})
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["path"] == field + "[0]" * MAX_ARGUMENT_DEPTH
    assert f"deeper than {MAX_ARGUMENT_DEPTH}" in caught.value.message


_SEND = {"idempotency_key": "k", "to": ["a@b.com"], "subject": "s", "text": "t"}


@pytest.mark.parametrize(("extra", "path", "fix"), [
    # a map's bad value is named by its key (msgspec says only "metadata[...]")
    ({"metadata": {"ok": "1", "order_id": {"x": 1}}}, 'metadata["order_id"]',
     'Give metadata["order_id"] as a string of at most 512 characters.'),
    ({"headers": {"X-A": 5}}, 'headers["X-A"]',
     'Give headers["X-A"] as a string of 1 to 2048 characters.'),
    # an unknown field of a nested object lists that object's fields, not the tool's
    ({"to": [{"address": "a@b.com", "nam": "x"}]}, "to[0].nam",
     "Remove to[0].nam; to[0] takes only: address, name."),
    ({"attachments": [{"filename": "a.txt", "content_type": "text/plain",
                       "content_base64": "YQ==", "extra": 1}]}, "attachments[0].extra",
     "Remove attachments[0].extra; attachments[0] takes only: filename, content_type, "
     "content_base64, disposition, content_id."),
    # of an address or an object, the alternative msgspec expected
    ({"to": ["x" * 300]}, "to[0]", "Give to[0] as a string of at most 254 characters."),
])
def test_a_bad_nested_argument_is_named_with_the_fix_for_it(extra, path, fix):
    """Found by an attack: the fix listed mail_send's own arguments for ``to[0].nam`` and
    said "Correct metadata[...]" without naming the key."""
    from shared.errors import PylotaError
    from shared.tools.call import decode_arguments

    with pytest.raises(PylotaError) as caught:
        decode_arguments(next(t for t in TOOLS if t.name == "mail_send"), {**_SEND, **extra})
    assert (caught.value.details["path"], caught.value.fix) == (path, fix)


@pytest.mark.parametrize(("tool", "arguments", "path"), [
    ("mail_update_labels", {"message_id": "msg_" + "0" * 26, "labels_add": ["ok\n"]},
     "labels_add[0]"),
    ("mail_send", {**_SEND, "idempotency_key": "nl\n"}, "idempotency_key"),
    ("mail_get_message", {"message_id": "msg_" + "0" * 26 + "\n"}, "message_id"),
    ("mail_list_identities", {"tenant_id": "ten_" + "0" * 26 + "\n"}, "tenant_id"),
    ("mail_sign_assertion", {"audience": "https://x.example\n"}, "audience"),
    ("mail_sign_http_request", {"method": "GET\n", "url": "https://x.example/"}, "method"),
])
def test_a_final_line_break_does_not_pass_a_pattern(tool: str, arguments: dict, path: str):
    """Python's ``$`` also matches before a final newline; the schema's (ECMA-262) does not, so
    "ok\\n" was stored as a label and "GET\\n" signed (found by an attack)."""
    from shared.errors import ErrorCode, PylotaError
    from shared.tools.call import decode_arguments

    with pytest.raises(PylotaError) as caught:
        decode_arguments(next(t for t in TOOLS if t.name == tool), arguments)
    assert caught.value.code is ErrorCode.INVALID_REQUEST
    assert caught.value.details["path"] == path
    assert caught.value.fix == f"Remove the line break at the end of {path}."
    # the same value without it decodes
    fixed = {k: (v.rstrip("\n") if isinstance(v, str) else [x.rstrip("\n") for x in v]
                 if isinstance(v, list) and v and isinstance(v[0], str) else v)
             for k, v in arguments.items()}
    decode_arguments(next(t for t in TOOLS if t.name == tool), fixed)


@pytest.mark.parametrize(("tool", "arguments", "path", "fix"), [
    ("mail_update_labels", {"message_id": "msg_" + "0" * 26, "labels_add": ["Vans"]},
     "labels_add[0]", "Give labels_add[0] as a label: 1 to 64 lower-case letters, digits, _, : "
                      "and -, starting with a letter or digit (vans, not Vans)."),
    ("mail_update_labels", {"message_id": "msg_" + "0" * 26, "read": "yes"}, "read",
     "Give read as true or false."),
    ("mail_get_attachment_text", {"message_id": "msg_" + "0" * 26,
                                  "attachment_id": "att_" + "0" * 26, "pages": "abc"}, "pages",
     "Give pages as a page or a range of pages from 1 to 999, such as 2 or 1-3."),
    ("mail_send", {**_SEND, "attachments": [{"filename": "a", "content_base64": ""}]},
     "attachments[0].content_type", "Pass attachments[0].content_type; attachments[0] requires: "
                                    "filename, content_type, content_base64."),
])
def test_a_fix_says_what_a_valid_value_is_in_words(tool: str, arguments: dict, path: str,
                                                   fix: str):
    """Found by a new user and an attack: mail_update_labels' fields got "Correct … to match the
    tool's inputSchema", pages a regular expression, and a nested object's missing field the
    tool's own required list."""
    from shared.errors import PylotaError
    from shared.tools.call import decode_arguments

    with pytest.raises(PylotaError) as caught:
        decode_arguments(next(t for t in TOOLS if t.name == tool), arguments)
    assert (caught.value.details["path"], caught.value.fix) == (path, fix)


def test_every_pattern_of_the_input_schemas_is_said_in_words():
    from shared.tools.call import _ID_PATTERN, _PATTERN_FIXES

    def patterns(schema: object) -> set[str]:
        if isinstance(schema, dict):
            own = {schema["pattern"]} if "pattern" in schema else set()
            return own.union(*(patterns(v) for v in schema.values()))
        return set().union(*(patterns(v) for v in schema)) if isinstance(schema, list) else set()

    found = set().union(*(patterns(t.input_schema) for t in TOOLS))
    assert found and not {p for p in found
                          if p not in _PATTERN_FIXES and not _ID_PATTERN.fullmatch(p)}


def test_a_rest_status_outside_its_values_lists_the_four_rest_takes():
    """GET /v1/identities?status=bogus listed only active and paused, though REST takes
    deleting and deleted too (spec section 4.3; found by an attack)."""
    from shared.errors import PylotaError
    from shared.tools.call import decode_arguments

    spec = next(t for t in TOOLS if t.name == "mail_list_identities")
    for rest, fix in ((False, 'Use one of "active", "paused" for status.'),
                      (True, 'Use one of "active", "paused", "deleting", "deleted" for status.')):
        with pytest.raises(PylotaError) as caught:
            decode_arguments(spec, {"status": "bogus"}, rest=rest)
        assert caught.value.fix == fix


def test_a_query_string_date_time_says_how_to_write_its_plus():
    """?after=2026-09-01T00:00:00+01:00 arrives with a space for the +, and the error said only
    "Invalid RFC3339 encoded datetime" (found by a new user)."""
    from shared.errors import PylotaError
    from shared.tools.call import decode_arguments

    spec = next(t for t in TOOLS if t.name == "mail_list_threads")
    with pytest.raises(PylotaError) as caught:
        decode_arguments(spec, {"after": "2026-09-01T00:00:00 01:00"}, from_query=True)
    assert caught.value.details == {"path": "after"}
    assert caught.value.fix.endswith("In a URL, write the offset's + as %2B: a bare + reads as a "
                                     "space.")
    with pytest.raises(PylotaError) as caught:
        decode_arguments(spec, {"after": "2026-09-01T00:00:00 01:00"})
    assert "%2B" not in caught.value.fix  # MCP arguments are JSON, with no URL in between
