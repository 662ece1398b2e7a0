"""Issue 9, defect 4: PostgreSQL down. Every request — ``ping`` included, in both eras, on MCP
and REST — is answered at once with a JSON-RPC error (503, ``Retry-After``, -32603 with the
``unavailable`` envelope) or the REST envelope, never Litestar's plain 500, and writes its
``request`` log line; once PostgreSQL is back the front serves normally within a few seconds.
PostgreSQL lost under running searches ends each of them the same way (a transaction's rollback
on the dead connection once made that ``internal``). PostgreSQL stuck — every pooled connection
held by a statement that does not end — costs a request the acquire timeout, not the wait for a
statement to end: admission reads a key it does not hold from PostgreSQL, so an unbounded
acquire hung every such request, even one with a key that does not exist.

PostgreSQL is "down" for the front only: it reaches it through a relay the test cuts
(``tests/faults/kit.py``), so the machine's server stays up for everyone else."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter

import msgspec
import pytest

from tests.conftest import ROOT
from tests.e2e.transport_kit import Wire, keyed_identity
from tests.faults.kit import STOPPED, eventually, no_traceback, stack_env

#: Bound on one answer while PostgreSQL is down: a refused connection fails at once; the
#: acquire timeout (PM_DB_ACQUIRE_SECONDS, 2 s here) bounds every other case.
ACQUIRE_SECONDS = 2.0
#: Bound on the front noticing that its connection listening for key changes was cut.
NOTICE_SECONDS = 0.5
#: Bound on the front serving again after PostgreSQL's return.
RECOVERY_SECONDS = 5.0


def unavailable_rpc(response, messages, request_ids: list[str]) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.headers["content-type"].startswith("application/json")
    [message] = messages
    assert message["jsonrpc"] == "2.0" and message["error"]["code"] == -32603, message
    envelope = message["error"]["data"]["error"]
    assert envelope["code"] == "unavailable" and envelope["retryable"] is True, envelope
    request_ids.append(envelope["request_id"])


async def test_postgresql_down_every_request_gets_a_json_rpc_error_and_its_log_line(
        db_url, conn, own_redis, relay, services, http):
    _, identity_id, key_id, token = await keyed_identity(conn, "desk@acme.example")
    env = stack_env(relay.dsn(db_url), own_redis.url,
                    PM_DB_ACQUIRE_SECONDS=str(ACQUIRE_SECONDS))
    front, base = await services.front(env)
    wire = Wire(http, f"{base}/mcp", token)
    response, _ = await wire.legacy("ping")
    assert response.status_code == 200  # the front works through the relay

    await relay.cut()
    request_ids: list[str] = []
    # The key is held in memory (shared.auth.cache) only while the front's listening
    # connection lives: a ping in the moment before the front reads that connection's cut may
    # still be answered; from then on the key is read from PostgreSQL like any other.
    began = time.monotonic()
    while True:
        response, messages = await wire.legacy("ping")
        if response.status_code != 200 or time.monotonic() - began > NOTICE_SECONDS:
            break
        await asyncio.sleep(0.01)
    unavailable_rpc(response, messages, request_ids)
    for ask in (lambda: wire.legacy("ping"), lambda: wire.modern("ping"),
                lambda: wire.legacy("tools/call", {"name": "mail_list_identities",
                                                   "arguments": {}}),
                lambda: wire.modern("tools/call", {"name": "mail_wait",
                                                   "arguments": {"timeout_seconds": 5}})):
        began = time.monotonic()
        response, messages = await ask()
        took = time.monotonic() - began
        unavailable_rpc(response, messages, request_ids)
        assert took <= ACQUIRE_SECONDS + 1, f"answered after {took:.2f} s"
    began = time.monotonic()
    rest = await http.get(f"{base}/v1/identities", headers={"authorization": f"Bearer {token}"})
    assert time.monotonic() - began <= ACQUIRE_SECONDS + 1
    assert rest.status_code == 503 and rest.headers["retry-after"] == "1", rest.text
    body = msgspec.json.decode(rest.content)
    assert body["error"]["code"] == "unavailable" and body["error"]["retryable"] is True
    request_ids.append(body["error"]["request_id"])

    # one request line per request, with its status, written while PostgreSQL is still down
    logged = {line["request_id"]: line for line in front.events("request")}
    for request_id in request_ids:
        assert request_id in logged, f"no request line for {request_id}"
        assert logged[request_id]["status"] == 503, logged[request_id]
    no_traceback(front)

    await relay.start()
    began = time.monotonic()

    async def serves() -> bool:
        response, messages = await wire.legacy("tools/call", {
            "name": "mail_list_identities", "arguments": {}})
        return response.status_code == 200 and not messages[0]["result"].get("isError")

    await eventually(serves, RECOVERY_SECONDS, "the front serves again after PostgreSQL's return",
                     every=0.2)
    assert time.monotonic() - began <= RECOVERY_SECONDS
    assert await front.stop() in STOPPED


async def test_postgresql_lost_mid_request_ends_each_call_cleanly(
        db_url, conn, own_redis, relay, services, http):
    """PostgreSQL goes away while searches are running on its connections: each call ends with
    the result (it finished first), the ``unavailable`` tool error, or the 503 JSON-RPC error —
    never a bare 500 — within the acquire timeout, and the front serves again after."""
    from tests.faults.test_overload import kind_of, mailbox

    token = await mailbox(conn)
    env = stack_env(relay.dsn(db_url), own_redis.url, PM_DB_POOL_SIZE="5",
                    PM_DB_ACQUIRE_SECONDS=str(ACQUIRE_SECONDS),
                    PM_RL_SEARCH_PER_MINUTE="1000", PM_RL_API_PER_MINUTE="1000",
                    PM_MAX_IN_FLIGHT_PER_KEY="1000")  # 60 at once, one key
    front, base = await services.front(env)
    wire = Wire(http, f"{base}/mcp", token)

    async def search() -> str:
        response, messages = await wire.legacy("tools/call", {
            "name": "mail_search", "arguments": {"q": "patch OR linux OR the"}})
        return kind_of(response, messages)

    calls = [asyncio.create_task(search()) for _ in range(60)]
    # cut once searches are answered: the others are then authenticating, resolving their
    # scope or searching, on connections that go away under them
    await eventually(lambda: any(call.done() for call in calls), 15, "a search is answered")
    await relay.cut()
    cut = time.monotonic()
    async with asyncio.timeout(ACQUIRE_SECONDS + 10):
        kinds = Counter(await asyncio.gather(*calls))
    took = time.monotonic() - cut
    # "shed" is any 503 JSON-RPC error: here, PostgreSQL unreachable outside the tool
    assert set(kinds) <= {"ok", "unavailable", "shed"} and kinds["ok"] < 60, kinds
    assert took <= ACQUIRE_SECONDS + 2, f"the calls ended {took:.2f} s after the cut"
    statuses = Counter(line["status"] for line in front.events("request")
                       if line.get("method") == "tools/call")
    assert sum(statuses.values()) == 60 and set(statuses) <= {200, 503}, statuses
    no_traceback(front)

    await relay.start()
    await eventually(lambda: _serves(search), RECOVERY_SECONDS,
                     "the front serves again after PostgreSQL's return", every=0.2)


async def _serves(search) -> bool:
    return await search() == "ok"


async def _waiting_for_a_lock(conn, count: int) -> bool:
    return await conn.fetchval(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock'") >= count


async def test_every_connection_stuck_a_request_is_refused_within_the_acquire_timeout(
        db_url, conn, own_redis, services, http):
    """Issue 9, defect 1: ``acquire`` had no timeout. Both connections of a pool of 2 are held
    by requests whose key lookups wait for a lock the test holds; a third request that must read
    its key is answered ``unavailable`` within PM_DB_ACQUIRE_SECONDS, and all three are answered
    once the lock goes. The requests carry a key that does not exist: a front never keeps those
    in memory (``shared.auth.cache``), so each one reads PostgreSQL."""
    _, _, _, token = await keyed_identity(conn, "desk@acme.example")
    env = stack_env(db_url, own_redis.url, PM_DB_POOL_SIZE="2",
                    PM_DB_ACQUIRE_SECONDS=str(ACQUIRE_SECONDS))
    front, base = await services.front(env)
    wire = Wire(http, f"{base}/mcp", token)
    response, _ = await wire.legacy("ping")
    assert response.status_code == 200
    unknown = Wire(http, f"{base}/mcp", "pmk_live_" + "0" * 40)

    async with conn.transaction():
        await conn.execute("LOCK TABLE api_keys IN ACCESS EXCLUSIVE MODE")
        stuck = [asyncio.create_task(unknown.legacy("ping")) for _ in range(2)]
        await eventually(lambda: _waiting_for_a_lock(conn, 2), 10,
                         "both pooled connections wait for the lock")
        began = time.monotonic()
        try:
            async with asyncio.timeout(ACQUIRE_SECONDS + 5):
                response, messages = await unknown.legacy("ping")
        except TimeoutError:
            raise AssertionError("a request waited for a pooled connection past"
                                 f" PM_DB_ACQUIRE_SECONDS ({ACQUIRE_SECONDS:g} s)") from None
        took = time.monotonic() - began
        unavailable_rpc(response, messages, [])
        assert took <= ACQUIRE_SECONDS + 1, f"answered after {took:.2f} s"
    for done in await asyncio.gather(*stuck):
        assert done[0].status_code == 401, done[0].text  # the key does not exist
    response, _ = await wire.legacy("ping")
    assert response.status_code == 200
    no_traceback(front)
    assert await front.stop() in STOPPED


#: Bound on ``pylota import`` ending after PostgreSQL is cut under it.
IMPORT_ENDS_SECONDS = 30.0


@pytest.mark.parametrize("loss", ["cut", "stalled"])
async def test_an_import_that_loses_postgresql_says_so_and_a_rerun_completes_it(
        db_url, conn, relay, tmp_path, loss):
    """``pylota import`` with PostgreSQL cut mid-way, or stalled (the connection kept open, no
    byte passed on), ends with a one-line error and exit status 1, not a traceback nor a wait
    for ever (found by an attack); run again, it stores the rest, each message once."""
    await keyed_identity(conn, "desk@acme.example")
    messages = 3000
    (tmp_path / "big.mbox").write_bytes(b"".join(
        b"From ann@x.example Mon Jan  1 00:00:00 2024\n"
        b"From: ann@x.example\nTo: desk@acme.example\nSubject: note %d\n"
        b"Message-ID: <n%d@x.example>\n\nbody of note %d\n\n" % (i, i, i) for i in range(messages)))
    env = {"REDIS_URL": "redis://127.0.0.1:1/0", "PM_DKIM_VERIFY": "false", "PATH": "/usr/bin:/bin",
           "PM_DB_STATEMENT_TIMEOUT_SECONDS": "2"}
    argv = [sys.executable, "-m", "cli", "import", "--identity", "desk@acme.example",
            "--no-progress", "--json", str(tmp_path / "big.mbox")]
    running = await asyncio.create_subprocess_exec(
        *argv, env={**env, "DATABASE_URL": relay.dsn(db_url)}, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    await eventually(lambda: _some_stored(conn), within=60, what="a first batch stored", every=0.02)
    if loss == "cut":
        await relay.cut()
    else:
        relay.stall()
    cut = time.monotonic()
    async with asyncio.timeout(IMPORT_ENDS_SECONDS):
        out, err = await running.communicate()
    assert time.monotonic() - cut <= IMPORT_ENDS_SECONDS
    assert running.returncode == 1, err.decode()[-2000:]
    assert "Traceback" not in err.decode(), err.decode()[-3000:]
    assert "error: PostgreSQL or Redis stopped answering" in err.decode()
    await relay.cut()  # a stalled import's transaction ends with its connection
    stored = await conn.fetchval("SELECT count(*) FROM messages")
    assert 0 < stored < messages

    again = subprocess.run([*argv], env={**env, "DATABASE_URL": db_url}, cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    summary = msgspec.json.decode(again.stdout)
    assert summary["imported"] + summary["duplicates"] == messages, summary
    assert await conn.fetchval("SELECT count(DISTINCT rfc_message_id) FROM messages") \
        == await conn.fetchval("SELECT count(*) FROM messages") == messages


async def _some_stored(conn) -> bool:
    return await conn.fetchval("SELECT count(*) FROM messages") > 0
