"""One tool call, whatever surface it came in on (DESIGN.md section 2, "One call, two surfaces").

:func:`call_tool` does the whole call once, in this order:

1. find the tool among those the key may use (spec section 3); any other name, existing or not,
   is :class:`UnknownTool`, so a missing permission is never a tool error;
2. decode the arguments strictly into the tool's argument Struct (the same types that publish
   the ``inputSchema``: ``shared.tools.schema``), and range-check date-times, which no schema
   can bound but PostgreSQL refuses past its range; a failure is one ``invalid_request`` naming
   the field and what a valid value looks like;
3. charge the tool's own bucket (RL_SEARCH, RL_AGENTIC, RL_SEND, RL_SIGN; RL_API was charged
   when the request was admitted, ``front/admission.py``);
4. run an inline tool within ``pm_request_deadline_seconds``, or take a worker tool's
   :class:`~shared.jobs.JobRequest` and hand back a :class:`Job`;
5. log one ``tool_call`` line (spec section 7): surface, method, tool, key id, identity id,
   request id, duration, outcome, error code and, for a call with a string ``q`` or
   ``question`` (:data:`QUERY_ARGUMENTS`), its ``query_hash`` — never the arguments. A job's
   line is written when its caller reports how it ended (:meth:`Job.finish`).

It returns an :class:`Answer`, a :class:`~shared.errors.PylotaError`, a :class:`Job` or an
:class:`UnknownTool`; the MCP transport and the REST routes only render that. Failures of
PostgreSQL or Redis become ``unavailable`` (``shared.errors.dependency_failure``); anything else
unexpected is ``internal``, logged with the exception's type and where it was raised.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
import time
import traceback
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

import msgspec
from redis.asyncio import Redis

from shared.auth.keys import Principal
from shared.config import Settings
from shared.control import UNSTOPPABLE, Control
from shared.db import Database
from shared.errors import ErrorCode, PylotaError, dependency_failure, invalid
from shared.jobs import JobRequest
from shared.logs import get_logger, query_hash
from shared.ratelimit import RateLimits
from shared.tools.context import ToolContext
from shared.tools.registry import ToolSpec, visible_to
from shared.tools.scope import acting_identity

__all__ = ["CallEnv", "Answer", "Job", "UnknownTool", "Outcome", "call_tool", "Surface",
           "QUERY_ARGUMENTS", "MAX_ARGUMENT_DEPTH"]

log = get_logger("shared.tools.call")

#: Arguments whose text is logged as ``query_hash`` (spec section 7): mail_search's ``q`` and
#: mail_deep_search's ``question`` (the REST ``q``).
QUERY_ARGUMENTS = ("q", "question")

Surface = Literal["mcp", "rest"]


@dataclass(frozen=True, slots=True)
class CallEnv:
    """What a tool call may use, built once per front process."""

    db: Database
    redis: Redis
    limits: RateLimits
    settings: Settings
    tools: Sequence[ToolSpec]


@dataclass(frozen=True, slots=True)
class Answer:
    """An inline tool's result: its result Struct, or content blocks for a content tool."""

    tool: ToolSpec
    value: Any


@dataclass(frozen=True, slots=True)
class UnknownTool:
    """The key may not call ``name``, or no such tool exists (the same answer, spec section 3)."""

    name: object


@dataclass(slots=True)
class Job:
    """A worker tool's call, checked and charged, ready for the job runner.

    ``request`` names the job, its payload and its seconds; the surface relays the job's events
    and calls :meth:`finish` once, however the call ended.
    """

    tool: ToolSpec
    request: JobRequest
    request_id: str
    _fields: dict[str, Any]
    _started: float
    _finished: bool = field(default=False)

    @property
    def key_id(self) -> str:
        """The API key that made the call."""
        return self._fields["key_id"]

    def finish(self, outcome: Literal["ok", "error", "cancelled"],
               error_code: str | None = None) -> None:
        """Write the call's ``tool_call`` line (once; later calls do nothing)."""
        if not self._finished:
            self._finished = True
            _log(self._fields, self._started, outcome, error_code)


Outcome = Answer | PylotaError | Job | UnknownTool


def _log(fields: dict[str, Any], started: float, outcome: str, error_code: str | None,
         **extra: Any) -> None:
    log.info("tool_call", **fields, outcome=outcome, error_code=error_code,
             duration_ms=round((time.monotonic() - started) * 1000, 1), **extra)


def _where(exc: BaseException) -> str:
    """``file:line`` where ``exc`` was raised: enough to find a bug, with no values in it."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else "?"


async def call_tool(env: CallEnv, principal: Principal, name: object, arguments: object, *,
                    request_id: str, surface: Surface, method: str, from_query: bool = False,
                    control: Control = UNSTOPPABLE) -> Outcome:
    """Run the tool call ``name(arguments)`` for ``principal``; see the module docstring.

    Args:
        method: what the surface calls it, for the log line (``tools/call``, or the REST
            method and route).
        from_query: the arguments come from a URL query string, where every value is text:
            numbers, booleans and date-times are read from their text forms (REST ``GET``).
        control: where an inline tool reports progress (the MCP transport streams it).
    """
    visible = {t.name: t for t in visible_to(principal, env.tools)}
    spec = visible.get(name) if isinstance(name, str) else None
    if spec is None:
        return UnknownTool(name)
    started = time.monotonic()
    fields: dict[str, Any] = {"surface": surface, "method": method, "tool": spec.name,
                              "key_id": principal.key_id, "identity_id": principal.identity_id,
                              "request_id": request_id}
    if isinstance(arguments, dict):
        query = next((arguments[a] for a in QUERY_ARGUMENTS
                      if isinstance(arguments.get(a), str)), None)
        if query is not None:
            fields["query_hash"] = query_hash(env.settings.pm_hash_key, query)
    try:
        args = decode_arguments(spec, arguments, from_query=from_query,
                                rest=surface == "rest")
        if spec.bucket is not None:
            await env.limits.charge(spec.bucket, principal.key_id)
        ctx = ToolContext(db=env.db, redis=env.redis, settings=env.settings,
                          principal=principal, request_id=request_id, control=control)
        acting_identity.set(None)
        async with asyncio.timeout(env.settings.pm_request_deadline_seconds):
            try:
                value = await spec.handler(ctx, args)
            finally:
                # A key serving several identities: the identity the call acted for.
                fields["identity_id"] = fields["identity_id"] or acting_identity.get()
    except PylotaError as exc:
        _log(fields, started, "error", exc.code.value)
        return exc
    except TimeoutError:
        error = PylotaError(
            ErrorCode.UNAVAILABLE,
            f"The call took longer than {env.settings.pm_request_deadline_seconds:g} s.",
            fix="Retry; narrow the request (fewer items, a more specific query) if it keeps "
                "timing out.")
        _log(fields, started, "error", error.code.value)
        return error
    except Exception as exc:  # noqa: BLE001 - every failure is rendered, never raised
        error = dependency_failure(exc) or PylotaError(ErrorCode.INTERNAL,
                                                       "The tool failed unexpectedly.")
        _log(fields, started, "error", error.code.value, exception=type(exc).__name__,
             where=_where(exc))
        return error
    if isinstance(value, JobRequest):
        return Job(tool=spec, request=value, request_id=request_id, _fields=fields,
                   _started=started)
    _log(fields, started, "ok", None)
    return Answer(tool=spec, value=value)


# --- Decoding ---------------------------------------------------------------------------------

#: Deepest nesting of arrays and objects in a tool's arguments (``ext`` of mail_sign_assertion,
#: the deepest, allows 32 levels inside it).
MAX_ARGUMENT_DEPTH = 64


def decode_arguments(spec: ToolSpec, arguments: object, *, from_query: bool = False,
                     rest: bool = False) -> msgspec.Struct:
    """``arguments`` decoded into ``spec.args`` (``spec.rest_args``, where set, for ``rest``),
    strictly, as its inputSchema says ("5" is not an integer, 1 is not a date-time), except
    that JSON Schema's integer admits 10.0.

    Raises:
        PylotaError: ``invalid_request`` naming the field (``details.path``) and the fix.
    """
    if not isinstance(arguments, dict):
        raise invalid("arguments", "arguments must be an object.",
                      "Pass the tool's arguments as a JSON object.")
    if (where := _too_deep(arguments)) is not None:
        raise invalid(where, f"{where} nests deeper than {MAX_ARGUMENT_DEPTH} levels.",
                      f"Flatten {where}: no tool argument needs more than a few levels.")
    if (where := _nul_path(arguments)) is not None:
        raise invalid(where, f"{where} contains a NUL character.",
                      f"Remove the \\u0000 characters from {where}.")
    target = (rest and spec.rest_args) or spec.args
    try:
        args = msgspec.convert(_integral(arguments), target, strict=not from_query)
    except msgspec.ValidationError as exc:
        raise _validation_error(exc, spec, target, arguments, from_query=from_query) from None
    if (where := _end_anchor_path(arguments, spec.input_schema)) is not None:
        raise invalid(where, f"{where} ends with a line break, which its pattern does not allow.",
                      f"Remove the line break at the end of {where}.")
    _check_instants(args)
    _check_unique(spec, arguments)
    return args


@functools.lru_cache(maxsize=64)
def _anchored(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern)


def _end_anchor_path(value: Any, schema: dict[str, Any], path: str = "") -> str | None:
    """The path of the first string that matched its ``pattern`` only at Python's ``$``, which
    also matches before a final newline; JSON Schema's (ECMA-262) ``$`` is the end of the string
    only. msgspec checks patterns with Python's ``re``: ``"ok\n"`` was stored as a label and
    ``"GET\n"`` signed as a method (found by an attack). Walks ``properties`` and ``items``, where
    every pattern of the tools' input schemas is."""
    if isinstance(value, str):
        pattern = schema.get("pattern")
        return (path or "arguments") if pattern and _anchored(pattern).search(value) is None \
            else None
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key in properties and (found := _end_anchor_path(
                    item, properties[key], f"{path}.{key}".lstrip("."))) is not None:
                return found
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for n, item in enumerate(value):
            if (found := _end_anchor_path(item, schema["items"], f"{path}[{n}]")) is not None:
                return found
    return None


def _check_unique(spec: ToolSpec, arguments: dict[str, Any]) -> None:
    """Each list whose schema says ``uniqueItems`` names an item once (msgspec does not check
    it; found by an attack: ``components: ["from", "from"]`` was signed)."""
    for name, schema in spec.input_schema.get("properties", {}).items():
        items = arguments.get(name)
        if schema.get("uniqueItems") and isinstance(items, list):
            seen: set[str] = set()
            for n, item in enumerate(items):
                key = json.dumps(item, sort_keys=True)
                if key in seen:
                    raise invalid(f"{name}[{n}]", f"{name} lists {key} twice.",
                                  f"List each item of {name} once.")
                seen.add(key)


def _too_deep(arguments: dict[str, Any]) -> str | None:
    """The path of the first value nested deeper than :data:`MAX_ARGUMENT_DEPTH` (arrays and
    objects), read without recursion: the checks after this one recurse, and ~490 levels (which
    JSON parsing allows) ran them out of stack, an ``internal`` error (found by an attack)."""
    stack: list[tuple[Any, str, int]] = [(arguments, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_ARGUMENT_DEPTH:
            return path.lstrip(".")
        if isinstance(value, dict):
            stack += [(v, f"{path}.{k}", depth + 1) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, f"{path}[{n}]", depth + 1) for n, v in enumerate(value)]
    return None


def _integral(value: Any) -> Any:
    """``value`` with every integral float (10.0) made an int, at any depth."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


def _nul_path(value: Any, path: str = "") -> str | None:
    """The path of the first string holding U+0000, which JSON allows and PostgreSQL text
    does not."""
    if isinstance(value, str):
        return (path or "arguments") if "\x00" in value else None
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and "\x00" in key:
            return f"{path}.{key!r}".lstrip(".")
        child = f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]"
        if (found := _nul_path(item, child)) is not None:
            return found.lstrip(".")
    return None


def _check_instants(value: Any, path: str = "") -> None:
    """Every date-time in the decoded arguments exists in UTC: ``0001-01-01T00:00:00+14:00``
    is a valid RFC 3339 string but a year-0 instant, which PostgreSQL and Python refuse."""
    if isinstance(value, datetime):
        try:
            value.astimezone(timezone.utc)
        except OverflowError:
            raise invalid(path, f"{path} is out of range once converted to UTC.",
                          f"Give {path} between years 0001 and 9999 in UTC, "
                          "e.g. 2026-09-01T00:00:00Z.") from None
    elif isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            _check_instants(getattr(value, name), f"{path}.{name}".lstrip("."))
    elif isinstance(value, list | tuple):
        for n, item in enumerate(value):
            _check_instants(item, f"{path}[{n}]")


_PATH_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+|\.\.\.|\"(?:[^\"\\\\]|\\\\.)*\")\]")


def _schema_at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    """The JSON Schema of the value at ``path`` (``to[0].name``, ``metadata["order_id"]``)
    inside ``schema``; an object alternative of a ``oneOf`` is taken for a field, and an
    unknown step gives ``{}``."""
    for step in _PATH_STEP.finditer("" if path == "arguments" else path):
        name, index = step.groups()
        if name is None and not index.isdigit():  # a map's key: [...] or ["key"]
            found = schema.get("additionalProperties")
            schema = found if isinstance(found, dict) else {}
            continue
        if index is not None:
            schema = schema.get("items", {})
            continue
        # a field of an object alternative (a recipient), or of the object itself when its
        # oneOf only names required fields (mail_update_labels: message_id or thread_id)
        objects = [s for s in (*schema.get("oneOf", ()), schema) if "properties" in s]
        schema = objects[0]["properties"].get(name, {}) if objects else {}
    return schema


def _map_key_path(path: str, target: type[msgspec.Struct], arguments: object) -> str:
    """``metadata[...]`` made ``metadata["order_id"]``: the first key of that top-level map
    whose value its type refuses (a model cannot fix "one of the values" it cannot find;
    found by an attack). ``path`` unchanged when it is no top-level map or no key is found."""
    name, _, rest = path.partition("[...]")
    value = arguments.get(name) if isinstance(arguments, dict) else None
    field = next((f for f in msgspec.structs.fields(target) if f.encode_name == name), None)
    kind = field.type if field is not None else None
    while typing.get_origin(kind) in (typing.Annotated, typing.Union, types.UnionType):
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    if "." in name or "[" in name or not isinstance(value, dict) \
            or typing.get_origin(kind) is not dict:
        return path
    for key, item in value.items():
        try:
            msgspec.convert(item, typing.get_args(kind)[1], strict=True)
        except msgspec.ValidationError:
            return f"{name}[{json.dumps(key)}]{rest}"
    return path


#: msgspec's name of a type in its messages, and JSON Schema's.
_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
               "object": "object", "array": "array"}


def _validation_error(exc: msgspec.ValidationError, spec: ToolSpec,
                      target: type[msgspec.Struct], arguments: object, *,
                      from_query: bool = False) -> PylotaError:
    """One ``invalid_request`` naming the argument and how to fix it (spec section 5)."""
    # msgspec says "... - at `$.limit`"; the path is what a model needs to fix its call.
    message, _, where = str(exc).partition(" - at `")
    path = where.rstrip("`").removeprefix("$.").removeprefix("$") or "arguments"
    # the schema of what was decoded: REST's wider form lists the status values it takes
    # (GET /v1/identities?status=bogus listed only active and paused; found by an attack)
    published = spec.rest_input_schema if target is spec.rest_args else spec.input_schema
    properties = published.get("properties", {})
    if "[...]" in path:  # msgspec does not say which key of a map holds the bad value
        path = _map_key_path(path, target, arguments)
    schema = _schema_at(published, path)
    if message.startswith("Object contains unknown field"):
        parent = path if path != "arguments" else ""
        path = ".".join(p for p in (parent, message.rsplit("`", 2)[-2]) if p)
        if parent:  # a field of a nested object: name that object's fields, not the tool's
            outer = _schema_at(published, parent)
            fields = next((s["properties"] for s in outer.get("oneOf", [outer])
                           if "properties" in s), {})
            fix = f"Remove {path}; {parent} takes only: {', '.join(fields)}."
        else:
            fix = (f"Remove {path}; {spec.name} takes only: {', '.join(properties)}."
                   if properties else f"Remove {path}; {spec.name} takes no arguments.")
    elif message.startswith("Object missing required field"):
        missing = message.rsplit("`", 2)[-2]
        parent = path if path != "arguments" else ""
        path = ".".join(p for p in (parent, missing) if p)
        owner = _schema_at(published, parent) if parent else published
        required = next((s.get("required", []) for s in (*owner.get("oneOf", ()), owner)
                         if "properties" in s), [])
        fix = f"Pass {path}; {parent or spec.name} requires: {', '.join(required)}."
    elif schema.get("format") == "date-time":
        fix = f"Give {path} as an RFC 3339 date-time with an offset, e.g. 2026-09-01T00:00:00Z."
        if from_query:  # "?after=…T00:00:00+01:00" arrives with a space (found by a new user)
            fix += " In a URL, write the offset's + as %2B: a bare + reads as a space."
    else:
        # Of alternatives (an address or an object), the one of the type msgspec expected.
        expected = next((json_type for py_type, json_type in _JSON_TYPES.items()
                         if message.startswith(f"Expected `{py_type}")), None)
        schema = next((s for s in schema.get("oneOf", []) if s.get("type") == expected), schema)
        fix = _schema_fix(path, schema)
    return PylotaError(ErrorCode.INVALID_REQUEST, f"Invalid argument {path}: {message}.",
                       fix=fix, details={"path": path})


def _span(schema: dict[str, Any], bound: str, unit: str) -> str:
    """``1 to 100 characters`` or ``at most 100 characters`` from ``minLength``/``maxLength``
    (``bound`` ``Length``) or ``minItems``/``maxItems`` (``Items``)."""
    low, high = schema.get(f"min{bound}", 0), schema[f"max{bound}"]
    return f"{low} to {high} {unit}" if low else f"at most {high} {unit}"


#: The pattern of an id argument (``shared.tools.arguments``: ``^msg_[0-9A-HJKMNP-TV-Z]{26}$``).
_ID_PATTERN = re.compile(r"\^([a-z]+)_\[0-9A-HJKMNP-TV-Z\]\{26\}\$")


#: Patterns of the input schemas said in words: a model fixes "lower case" faster than a
#: regular expression (found by a new user and an attack: "Vans" as a label).
_PATTERN_FIXES = {
    "^[a-z0-9][a-z0-9_:-]{0,63}$": "a label: 1 to 64 lower-case letters, digits, _, : and -, "
                                   "starting with a letter or digit (vans, not Vans)",
    "^[1-9][0-9]{0,2}(-[1-9][0-9]{0,2})?$": "a page or a range of pages from 1 to 999, "
                                             "such as 2 or 1-3",
    "^[\\x20-\\x7E]{1,255}$": "1 to 255 printable ASCII characters",
    "^[\\x20-\\x7E]{1,256}$": "1 to 256 printable ASCII characters",
    "^[\\x20-\\x7E]{1,128}$": "1 to 128 printable ASCII characters",
    "^[!#$%&'*+.^_`|~0-9A-Z-]+$": "an HTTP method in upper case, such as GET or POST",
    "^https://": "an https:// URL",
}


def _schema_fix(path: str, schema: dict[str, Any]) -> str:
    """What a valid value of ``path`` looks like, read from its JSON Schema."""
    if "enum" in schema:
        return f"Use one of {', '.join(json.dumps(v) for v in schema['enum'])} for {path}."
    kind = schema.get("type")
    if kind in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        noun = "a whole number" if kind == "integer" else "a number"
        span = (f" from {low} to {high}" if low is not None and high is not None
                else f" of at least {low}" if low is not None
                else f" of at most {high}" if high is not None else "")
        return f"Give {path} as {noun}{span}."
    if kind == "boolean":
        return f"Give {path} as true or false."
    if kind == "string" and (prefix := _ID_PATTERN.fullmatch(schema.get("pattern", ""))):
        return (f"Give {path} as an id as the API returned it ({prefix[1]}_ and 26 letters and "
                "digits), not a name or an address.")
    if kind == "string" and schema.get("pattern") in _PATTERN_FIXES:
        return f"Give {path} as {_PATTERN_FIXES[schema['pattern']]}."
    if kind == "string" and "pattern" in schema:
        return f"Give {path} as a string matching {schema['pattern']}."
    if kind == "string" and "maxLength" in schema:
        return f"Give {path} as a string of {_span(schema, 'Length', 'characters')}."
    if kind == "array" and "maxItems" in schema:
        return f"Give {path} as a list of {_span(schema, 'Items', 'items')}."
    return f"Correct {path} to match the tool's inputSchema."
