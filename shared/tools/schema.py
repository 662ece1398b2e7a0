"""Tool JSON Schemas generated from the tools' msgspec types (spec sections 4.2 and 4.3).

The argument and result Structs are the one source: their ``Meta`` constraints, descriptions and
defaults drive both decoding (``shared.tools.call``) and the published ``inputSchema`` and
``outputSchema``; nothing restates them by hand. msgspec's generator is faithful but says some
things differently from the spec's text, so :func:`input_schema` normalises its output:

- every ``$ref`` is inlined (spec section 4.2: "with every $ref inlined so clients need no
  reference resolution"), and Struct ``title``\\s are dropped; so are the docstrings of argument
  Structs (msgspec publishes them as ``description``), nested ones included: they document the
  Python type, and the spec's input schemas describe fields only;
- an optional argument (``X | None = None``) is published as ``X``: leaving it out is how a
  client says "not given", and the spec's schemas never offer ``null``; likewise an empty list
  or object default (``= []``, ``= {}``) is left out, since leaving the argument out means the
  same;
- an ``enum`` of strings also says ``"type": "string"``;
- an ``anyOf`` whose branches have different types is a ``oneOf`` (the branches are disjoint,
  so the two mean the same; the spec writes ``oneOf`` for recipients);
- ``enum`` values keep the order the ``Literal`` declares them in (msgspec sorts them), so a
  fix such as "Use one of keyword, semantic, hybrid" reads as the spec does.

A tool whose arguments obey a rule no type can state (``mail_update_labels``' one-of
``message_id``/``thread_id``) adds it through ``extra``, and its handler checks the rule.

Pure: no I/O. Used by the registry (``tools/list``), the REST OpenAPI document and the tests that
compare every schema with the spec's text.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal, Union

import msgspec

__all__ = ["input_schema", "output_schema", "inline_refs"]


def inline_refs(schema: Any, defs: dict[str, Any]) -> Any:
    """``schema`` with every ``#/$defs/…`` reference replaced by its definition, and no ``$defs``.

    Keywords beside a ``$ref`` win over the definition's, as in the spec's
    ``{"$ref": "#/$defs/recipients", "minItems": 1}``.
    """
    if isinstance(schema, dict):
        if "$ref" in schema:
            target = defs[schema["$ref"].rsplit("/", 1)[-1]]
            merged = {**inline_refs(target, defs),
                      **{k: v for k, v in schema.items() if k != "$ref"}}
            return inline_refs(merged, defs)
        return {k: inline_refs(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [inline_refs(v, defs) for v in schema]
    return schema


def _generated(struct: type[msgspec.Struct], *, docstrings: bool = True) -> dict[str, Any]:
    raw = msgspec.json.schema(struct)
    defs = raw.get("$defs", {})
    if not docstrings:
        # A definition's own description is its Struct's docstring; a field's description
        # (``Meta(description=…)``) sits in the property, beside the ``$ref``, and stays.
        defs = {name: {k: v for k, v in d.items() if k != "description"}
                for name, d in defs.items()}
    return inline_refs(raw, defs)


def _is_null(schema: Any) -> bool:
    return schema == {"type": "null"}


def _normalise(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_normalise(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    # "properties" maps names to schemas: a property may be called "title" or "type".
    out = {k: _normalise(v) for k, v in schema.items() if k not in ("title", "properties")}
    if "properties" in schema:
        out["properties"] = {name: _normalise(_optional(prop))
                             for name, prop in schema["properties"].items()}
    if out.get("required") == []:
        del out["required"]
    if "enum" in out and "type" not in out and all(isinstance(v, str) for v in out["enum"]):
        out = {"type": "string", **out}
    branches = out.get("anyOf")
    if branches and len({b.get("type") for b in branches}) == len(branches) \
            and all("type" in b for b in branches):
        out["oneOf"] = out.pop("anyOf")
    return out


def _optional(prop: dict[str, Any]) -> dict[str, Any]:
    """An optional property's schema without its ``null`` branch and ``null`` default."""
    branches = prop.get("anyOf")
    if prop.get("default", ...) is None and branches and len(branches) == 2 \
            and any(_is_null(b) for b in branches):
        (kept,) = [b for b in branches if not _is_null(b)]
        extra = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
        return {**extra, **kept}
    if prop.get("default", ...) in ([], {}):
        return {k: v for k, v in prop.items() if k != "default"}
    return prop


def _declared_order(schema: Any, hint: Any) -> None:
    """Put each ``enum`` of ``schema`` in the order ``hint`` (the Python type) declares it."""
    origin = typing.get_origin(hint)
    if origin is Annotated:
        _declared_order(schema, typing.get_args(hint)[0])
    elif origin is Literal:
        if isinstance(schema, dict) and "enum" in schema:
            schema["enum"] = list(typing.get_args(hint))
    elif origin in (Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        branches = schema.get("oneOf") or schema.get("anyOf") if isinstance(schema, dict) else None
        if len(options) == 1:
            _declared_order(schema, options[0])
        elif branches and len(branches) == len(options):
            for branch, option in zip(branches, options):
                _declared_order(branch, option)
    elif origin in (list, set, frozenset, tuple) and isinstance(schema, dict) and "items" in schema:
        _declared_order(schema["items"], typing.get_args(hint)[0])
    elif origin is dict and isinstance(schema, dict) and \
            isinstance(schema.get("additionalProperties"), dict):
        _declared_order(schema["additionalProperties"], typing.get_args(hint)[1])
    elif isinstance(hint, type) and issubclass(hint, msgspec.Struct) and isinstance(schema, dict):
        hints = typing.get_type_hints(hint, include_extras=True)
        properties = schema.get("properties", {})
        for field in msgspec.structs.fields(hint):
            if field.encode_name in properties:
                _declared_order(properties[field.encode_name], hints[field.name])


def input_schema(args: type[msgspec.Struct], extra: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    """The ``inputSchema`` of a tool whose arguments decode into ``args``.

    Args:
        args: the tool's argument Struct (``forbid_unknown_fields=True`` gives
            ``additionalProperties: false``).
        extra: keywords merged into the top level, for rules no type states.

    Returns:
        A JSON Schema object with no ``$ref``, no titles and no top-level description.
    """
    schema = _normalise(_generated(args, docstrings=False))
    _declared_order(schema, args)
    schema.setdefault("properties", {})
    return {**schema, **(extra or {})}


def output_schema(result: type[msgspec.Struct]) -> dict[str, Any]:
    """The ``outputSchema`` of a tool returning ``result``: its msgspec JSON Schema with every
    ``$ref`` inlined (spec section 4.2). Nullable result fields stay nullable."""
    return _generated(result)
