"""A world of partners, tenants and identities for the cross-level tests, and what each tool takes
as "another tenant's resource".

* :func:`build_world`: two partners, four tenants (one of ours, one of theirs, one with no
  partner, one of ours in test mode), an identity in each (and a sibling of ours), each with one
  message holding an attachment in its own thread, and a key of every level.
* :data:`FOREIGN_CASES`: per tool, the argument sets that name another world's resources (an
  identity, a tenant, a message, a thread, an attachment) while staying valid for the tool's
  inputSchema, so the call reaches the scope check. Every tool of the spec has an entry; a
  registered tool without one fails the tests that use the table.
* :func:`rest_call`: the REST request of a tool call, found from ``REST_ROUTES`` (the route whose
  path and fixed arguments the call has), so the same table drives both surfaces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import asyncpg

from front.rest.endpoints import REST_ROUTES, RestRoute
from shared.auth.keys import create_key, create_partner_key, create_platform_key
from shared.auth.permissions import FORBIDDEN_FOR_LEVEL, KeyLevel, Permission
from shared.ingest.pipeline import ingest_raw
from shared.tenancy.store import (create_identity, create_partner, create_tenant,
                                  set_tenant_policy)
from tests.shared.search.conftest import mail

__all__ = ["Place", "KeyRow", "World", "build_world", "FOREIGN_CASES", "rest_call",
           "ACCEPTED_CODES"]

#: What a call naming another world's resources may answer (spec section 3; DESIGN.md 5.5).
ACCEPTED_CODES = frozenset({"identity_not_found", "message_not_found", "thread_not_found",
                            "attachment_not_found", "scope_denied"})


@dataclass(frozen=True)
class Place:
    """One identity and its resources, and the strings that would betray a leak of them."""

    name: str
    tenant_id: str
    identity_id: str
    address: str
    message_id: str
    thread_id: str
    attachment_id: str
    secrets: tuple[str, ...]


@dataclass(frozen=True)
class KeyRow:
    """One row of the matrix: a key, the place it acts on, and the places it must not reach."""

    label: str
    level: KeyLevel
    token: str
    own: Place
    foreign: tuple[Place, ...]


@dataclass(frozen=True)
class World:
    places: dict[str, Place]
    keys: tuple[KeyRow, ...]

    def key(self, label: str) -> KeyRow:
        return next(k for k in self.keys if k.label == label)


async def _place(conn: asyncpg.Connection, name: str, tenant_id: str) -> Place:
    address = f"desk@{name}.example"
    secret_subject, display = f"SECRET-subject-of-{name}", f"Secret Person {name.title()}"
    identity = await create_identity(conn, tenant_id, address, display_name=display)
    outcome, _ = await ingest_raw(conn, None, identity.id, mail(
        f"{name}@x", to=address, subject=secret_subject, body=f"SECRET-body-of-{name}",
        attachment=(f"secret-{name}.txt", "text/plain", f"SECRET-file-of-{name}".encode())))
    row = await conn.fetchrow("SELECT m.thread_id, a.id AS attachment_id FROM messages m"
                              " JOIN attachments a ON a.message_id = m.id WHERE m.id = $1",
                              outcome.message_id)
    tenant_name = await conn.fetchval("SELECT name FROM tenants WHERE id = $1", tenant_id)
    return Place(name=name, tenant_id=tenant_id, identity_id=identity.id, address=address,
                 message_id=outcome.message_id, thread_id=row["thread_id"],
                 attachment_id=row["attachment_id"],
                 secrets=(secret_subject, display, f"SECRET-body-of-{name}",
                          f"SECRET-file-of-{name}", f"tenant-of-{name}", tenant_name))


def _allowed(level: KeyLevel) -> list[Permission]:
    return sorted(set(Permission) - FORBIDDEN_FOR_LEVEL[level])


async def build_world(conn: asyncpg.Connection) -> World:
    """The world described in the module docstring; every tenant allows signed requests, so a
    signing call is refused for scope, not for policy."""
    ours, theirs = await create_partner(conn, "ours"), await create_partner(conn, "theirs")
    tenants = {
        "home": await create_tenant(conn, "tenant-of-home", partner_id=ours.id),
        "rival": await create_tenant(conn, "tenant-of-rival", partner_id=theirs.id),
        "orphan": await create_tenant(conn, "tenant-of-orphan"),
        "sandbox": await create_tenant(conn, "tenant-of-sandbox", partner_id=ours.id,
                                       mode="test"),
    }
    for tenant in tenants.values():
        await set_tenant_policy(conn, tenant.id, allow_signed_requests=True)
    places = {name: await _place(conn, name, tenant.id) for name, tenant in tenants.items()}
    places["sibling"] = await _place(conn, "sibling", tenants["home"].id)
    home, p = places["home"], places
    tokens = {
        "platform": (await create_platform_key(conn, permissions=_allowed(KeyLevel.PLATFORM)))[1],
        "platform-test": (await create_platform_key(
            conn, permissions=_allowed(KeyLevel.PLATFORM), mode="test"))[1],
        "partner": (await create_partner_key(conn, partner_id=ours.id,
                                             permissions=_allowed(KeyLevel.PARTNER)))[1],
        "tenant": (await create_key(conn, tenant_id=home.tenant_id, identity_id=None,
                                    permissions=list(Permission)))[1],
        "identity": (await create_key(conn, tenant_id=home.tenant_id,
                                      identity_id=home.identity_id,
                                      permissions=list(Permission)))[1],
    }
    keys = (
        # L4: a live platform key never reaches a test tenant, a test one never a live tenant
        KeyRow("platform", KeyLevel.PLATFORM, tokens["platform"], home, (p["sandbox"],)),
        KeyRow("platform-test", KeyLevel.PLATFORM, tokens["platform-test"], p["sandbox"],
               (home, p["rival"], p["orphan"])),
        # a partner key: not another partner's tenant, not a tenant without partner, and not
        # its own test tenant
        KeyRow("partner", KeyLevel.PARTNER, tokens["partner"], home,
               (p["rival"], p["orphan"], p["sandbox"])),
        KeyRow("tenant", KeyLevel.TENANT, tokens["tenant"], home,
               (p["rival"], p["orphan"], p["sandbox"])),
        # an identity key: not even its own tenant's other identity
        KeyRow("identity", KeyLevel.IDENTITY, tokens["identity"], home,
               (p["sibling"], p["rival"], p["sandbox"])),
    )
    return World(places=places, keys=keys)


Cases = Callable[[Place, Place], list[dict[str, Any]]]


def _other_tenant(own: Place, foreign: Place) -> bool:
    return own.tenant_id != foreign.tenant_id


def _message_cases(**extra: Any) -> Cases:
    """Another identity's message named through our identity, and through theirs."""
    return lambda o, f: [{"message_id": f.message_id, "identity": o.identity_id, **extra},
                         {"message_id": f.message_id, "identity": f.identity_id, **extra}]


def _search_cases(text_argument: str) -> Cases:
    def cases(o: Place, f: Place) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = [{text_argument: "secret", "identity": f.identity_id}]
        if _other_tenant(o, f):
            found.append({text_argument: "secret", "scope": "tenant", "tenant_id": f.tenant_id})
        found.append({text_argument: "secret", "scope": "tenant", "tenant_id": o.tenant_id,
                      "identity_ids": [f.identity_id]})
        return found
    return cases


#: Every tool of the spec (section 4.3) and the calls naming another world's resources.
FOREIGN_CASES: dict[str, Cases] = {
    "mail_list_identities": lambda o, f: (
        [{"tenant_id": f.tenant_id}] if _other_tenant(o, f) else []),
    "mail_list_threads": lambda o, f: [{"identity": f.identity_id}],
    "mail_search": _search_cases("q"),
    "mail_deep_search": _search_cases("question"),
    "mail_get_thread": lambda o, f: [{"thread_id": f.thread_id, "identity": o.identity_id},
                                     {"thread_id": f.thread_id, "identity": f.identity_id}],
    "mail_get_message": _message_cases(),
    "mail_get_attachment_text": lambda o, f: [
        {"message_id": f.message_id, "attachment_id": f.attachment_id, "identity": o.identity_id},
        {"message_id": o.message_id, "attachment_id": f.attachment_id, "identity": o.identity_id},
        {"message_id": f.message_id, "attachment_id": f.attachment_id,
         "identity": f.identity_id}],
    "mail_find_related": _message_cases(),
    "mail_search_contacts": lambda o, f: [{"q": "desk", "identity": f.identity_id},
                                          {"q": "desk", "identity": f.address}],
    "mail_wait": lambda o, f: [{"identity": f.identity_id, "timeout_seconds": 1},
                               {"identity": f.address, "timeout_seconds": 1}],
    # the workspace's own usage: nothing of another tenant can be named
    "mail_get_usage": lambda o, f: [],
    "mail_send": lambda o, f: [{"identity": f.identity_id, "to": ["someone@else.example"],
                                "subject": "hello", "text": "hi", "idempotency_key": "iso-1"}],
    "mail_reply": _message_cases(idempotency_key="iso-2", text="hi"),
    "mail_forward": _message_cases(idempotency_key="iso-3", to=["someone@else.example"]),
    "mail_update_labels": lambda o, f: [
        {"message_id": f.message_id, "identity": o.identity_id, "labels_add": ["seen"]},
        {"thread_id": f.thread_id, "identity": o.identity_id, "labels_add": ["seen"]},
        {"message_id": f.message_id, "identity": f.identity_id, "labels_add": ["seen"]}],
    "mail_sign_assertion": lambda o, f: [
        {"identity": f.identity_id, "audience": "https://service.example"},
        {"identity": f.address, "audience": "https://service.example"}],
    "mail_sign_http_request": lambda o, f: [
        {"identity": f.identity_id, "url": "https://service.example/"},
        {"identity": f.address, "url": "https://service.example/"}],
}


def _route_for(tool: str, arguments: dict[str, Any]) -> RestRoute:
    """The REST route of ``tool`` whose path and fixed arguments ``arguments`` supplies, the one
    taking most of them when several do."""
    fitting = [r for r in REST_ROUTES if r.tool == tool
               and set(r.path_args.values()) <= arguments.keys()
               and all(arguments.get(k) == v for k, v in r.fixed.items())]
    if not fitting:
        raise AssertionError(f"no REST route of {tool} takes {sorted(arguments)}")
    return max(fitting, key=lambda r: len(r.path_args) + len(r.fixed))


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return [_query_value(v) for v in value]
    return str(value)


def rest_call(tool: str, arguments: dict[str, Any]) -> tuple[RestRoute, str, dict[str, Any]]:
    """``(route, path, request keyword arguments for httpx)`` of the call ``tool(arguments)``."""
    route = _route_for(tool, arguments)
    path = route.path
    for param, argument in route.path_args.items():
        path = path.replace(f"{{{param}:str}}", str(arguments[argument]))
    rest = {k: v for k, v in arguments.items()
            if k not in route.fixed and k not in route.path_args.values()}
    for param, argument in route.query.items():
        if argument in rest:
            rest[param] = rest.pop(argument)
    headers = {name: str(rest.pop(header.argument)) for name, header in route.headers.items()
               if header.argument in rest}
    if route.method == "GET":
        return route, path, {"params": {k: _query_value(v) for k, v in rest.items()},
                             "headers": headers}
    return route, path, {"json": rest, "headers": headers}
