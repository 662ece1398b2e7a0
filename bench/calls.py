"""``tools/call`` throughput of our front against the official MCP SDK server, side by side.

    python -m bench.calls [--rounds 3] [--seconds 2] [--concurrency 1,16,64]
                          [--eras legacy,modern] [--tools mail_get_message,...] [--messages 1000]

Builds a throwaway database (``bench.stack``) holding the first ``--messages`` SpamAssassin
messages, starts our front (``pylota serve``) and the peer (``bench.sdk_peer``: ``mcp``'s
``MCPServer``, stateless, JSON responses, hosting **our** domain functions, so the database work
is the same), then for every tool, era and concurrency runs the kit's closed-loop load generator
(``../shared/bench-peers/mcp_load.py``, raw HTTP/1.1 engine) interleaved: peer, ours, peer,
ours, ... for ``--rounds`` rounds, printing each round's requests/s, p99 and the ratio
ours / peer. Our server's CPU per call comes from the same runs; PostgreSQL and Redis round
trips per call are counted in-process (an app built by ``front.app.create_app`` with counters
on asyncpg and redis-py) over ``--trip-calls`` sequential calls per tool.

Target (issue 14): ours >= 2x the SDK server at c = 16 with p99 <= 25 ms, on every tool.
Only ratios inside one run count: absolute rates on these 2-core machines drift +-30 %.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.peers import KIT, load, machine, sa_maildir, wait_port
from bench.stack import ROOT, Stack, _free_port

TOOLS = ("mail_get_message", "mail_search", "mail_list_identities")
#: Keyword queries for mail_search: words and phrases of the SpamAssassin corpus.
QUERIES = ("razor", "mortgage", '"free software"', "linux kernel", "money", "python",
           "spamassassin rules", "perl", "click here", "debian package", "investment",
           "mailing list", "credit card", "red hat", "from:@example.com", "subject:re")


def _postmaster_pid() -> int | None:
    try:
        data = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-Atc",
                               "SHOW data_directory"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        return int(Path(data, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


def _first_calls(stack: Stack, token: str, ids: list[str]) -> None:
    """The first calls after the front started against the median of the next five."""
    def timed(tool: str, arguments: dict[str, Any]) -> float:
        started = time.perf_counter()
        stack.call(token, tool, arguments)
        return (time.perf_counter() - started) * 1000
    rnd = random.Random(2)
    for tool, make in (("mail_search", lambda: {"q": rnd.choice(QUERIES)}),
                       ("mail_get_message", lambda: {"message_id": rnd.choice(ids)})):
        first = timed(tool, make())
        warm = statistics.median(timed(tool, make()) for _ in range(5))
        print(f"first {tool} after start ({'hybrid' if tool == 'mail_search' else 'default'}):"
              f" {first:.0f} ms, warm median {warm:.0f} ms: {first / warm:.1f}x (target <= 2x)",
              flush=True)


def _cpu_ms(run: dict[str, Any]) -> float:
    """Server CPU milliseconds per successful call of one load run."""
    return run["cpu_pct"]["server"] * 10 / run["rps"] if run["rps"] else 0.0


def _tool_load(tool: str, ids_file: Path, queries_file: Path) -> tuple[dict[str, Any], list[str]]:
    """Fixed arguments and varied ones (mcp_load ``--vary``) of ``tool``."""
    if tool == "mail_get_message":
        return {}, [f"message_id=@{ids_file}"]
    if tool == "mail_search":
        return {"mode": "keyword"}, [f"q=@{queries_file}"]
    return {}, []


def _spy(out: Path, pid: int, name: str, seconds: float) -> subprocess.Popen[bytes]:
    """py-spy recording ``pid`` for ``seconds`` (started now, with the load's warm-up)."""
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([str(_py_spy()), "record", "-p", str(pid),
                             "-d", str(max(1, int(seconds))),
                             "-r", "250", "-f", "raw", "-o", str(out / f"{name}.txt")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _py_spy() -> str | None:
    """py-spy's path: ``$PY_SPY``, on ``PATH``, or beside this Python (a virtualenv's bin)."""
    return os.environ.get("PY_SPY") or shutil.which("py-spy") or shutil.which(
        "py-spy", path=str(Path(sys.executable).parent))


# --- round trips per call, in-process ---------------------------------------------------------


def count_trips(env: dict[str, str], token: str, calls: dict[str, list[dict[str, Any]]],
                era: str = "modern") -> dict[str, dict[str, Any]]:
    """PostgreSQL and Redis round trips per call of each tool, and the statements sent.

    Counts every asyncpg ``execute``/``fetch*``/``executemany`` (a transaction's BEGIN and
    COMMIT and the pool's reset on release included) and every redis-py command or pipeline,
    on an app built in this process with ``env`` as its environment.
    """
    import asyncpg.connection
    import redis.asyncio.client
    from litestar.testing import AsyncTestClient

    counts: collections.Counter[str] = collections.Counter()
    statements: collections.Counter[str] = collections.Counter()
    conn_cls = asyncpg.connection.Connection
    orig_execute, orig__execute = conn_cls.execute, conn_cls._execute
    orig_many = conn_cls.executemany
    orig_cmd = redis.asyncio.client.Redis.execute_command
    orig_pipe = redis.asyncio.client.Pipeline.execute

    def note(query: str) -> None:
        counts["pg"] += 1
        statements[" ".join(query.split())[:90]] += 1

    async def execute(self, query, *args, **kwargs):  # noqa: ANN001, ANN202
        if not args:
            note(query)
        return await orig_execute(self, query, *args, **kwargs)

    async def _execute(self, query, *args, **kwargs):  # noqa: ANN001, ANN202
        note(query)
        return await orig__execute(self, query, *args, **kwargs)

    async def executemany(self, command, args, **kwargs):  # noqa: ANN001, ANN202
        note(command)
        return await orig_many(self, command, args, **kwargs)

    async def execute_command(self, *args, **kwargs):  # noqa: ANN001, ANN202
        counts["redis"] += 1
        statements[f"redis {args[0]}"] += 1
        return await orig_cmd(self, *args, **kwargs)

    async def pipe_execute(self, *args, **kwargs):  # noqa: ANN001, ANN202
        counts["redis"] += 1
        statements["redis pipeline"] += 1
        return await orig_pipe(self, *args, **kwargs)

    async def run() -> dict[str, dict[str, Any]]:
        from front.app import create_app
        from shared.config import Settings
        app = create_app(Settings.from_env())
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
        out: dict[str, dict[str, Any]] = {}
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json"}
        async with AsyncTestClient(app, base_url="http://127.0.0.1") as client:
            for tool, argument_sets in calls.items():
                hdrs = dict(headers)
                params: dict[str, Any] = {"name": tool}
                if era == "modern":
                    hdrs.update({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                                 "Mcp-Name": tool})
                    params["_meta"] = {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {},
                        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}
                else:
                    hdrs["MCP-Protocol-Version"] = "2025-11-25"
                for warm in argument_sets[:3]:  # statement caches, buffers
                    await client.post("/mcp", headers=hdrs, json={
                        "jsonrpc": "2.0", "id": 0, "method": "tools/call",
                        "params": {**params, "arguments": warm}})
                await asyncio.sleep(0.2)
                counts.clear()
                statements.clear()
                for n, arguments in enumerate(argument_sets):
                    response = await client.post("/mcp", headers=hdrs, json={
                        "jsonrpc": "2.0", "id": n + 1, "method": "tools/call",
                        "params": {**params, "arguments": arguments}})
                    body = response.json()
                    if "error" in body or body["result"].get("isError"):
                        raise RuntimeError(f"{tool}: {response.text[:300]}")
                calls_made = len(argument_sets)
                out[tool] = {"pg": counts["pg"] / calls_made, "redis": counts["redis"] / calls_made,
                             "statements": {k: round(v / calls_made, 2)
                                            for k, v in statements.most_common()}}
        return out

    saved = dict(os.environ)
    os.environ.update(env)
    os.environ["PM_LOG_LEVEL"] = "warning"  # counting, not timing: keep the report readable
    conn_cls.execute, conn_cls._execute, conn_cls.executemany = execute, _execute, executemany
    redis.asyncio.client.Redis.execute_command = execute_command
    redis.asyncio.client.Pipeline.execute = pipe_execute
    try:
        return asyncio.run(run())
    finally:
        conn_cls.execute, conn_cls._execute, conn_cls.executemany = (orig_execute, orig__execute,
                                                                     orig_many)
        redis.asyncio.client.Redis.execute_command = orig_cmd
        redis.asyncio.client.Pipeline.execute = orig_pipe
        os.environ.clear()
        os.environ.update(saved)


# --- main --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds per run")
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--eras", default="legacy,modern")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--messages", type=int, default=1000,
                        help="SpamAssassin messages in the mailbox")
    parser.add_argument("--embedder", default="onnx", choices=("onnx", "hash", "off"),
                        help="PM_EMBEDDER of both servers (the load uses keyword search only)")
    parser.add_argument("--trip-calls", type=int, default=30,
                        help="sequential calls per tool for the round-trip count (0: skip)")
    parser.add_argument("--py-spy", metavar="DIR", type=Path,
                        help="record our front with py-spy (on PATH or $PY_SPY) during its first "
                             "run of each tool and era into DIR/TOOL-ERA.txt (collapsed stacks)")
    parser.add_argument("--kit", type=Path, default=KIT)
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    eras = args.eras.split(",")
    tools = args.tools.split(",")
    if args.py_spy and _py_spy() is None:
        parser.error("--py-spy needs py-spy: pip install py-spy (or set PY_SPY to its path)")
    print(f"bench.calls: {machine()}", flush=True)
    maildir = sa_maildir(args.kit, args.messages)
    work = Path(tempfile.mkdtemp(prefix="pylota-bench-calls-"))
    with Stack(args.admin_dsn, embedder=args.embedder) as stack:
        stack.env.update({"PM_RL_API_PER_MINUTE": "1000000000",
                          # the product's default: a request line and a tool_call line a call,
                          # written to a file, are part of what the ratio measures
                          "PM_RL_SEARCH_PER_MINUTE": "1000000000", "PM_LOG_LEVEL": "info",
                          "PM_API_HOST": "127.0.0.1",
                          # c = 64 from one key: the SDK server has no such share either
                          "PM_MAX_IN_FLIGHT_PER_KEY": "1000"})
        box = stack.mailbox("bench", "calls@bench.test", maildir)
        print(f"mailbox: {box['import'].get('imported')} messages", flush=True)
        stack.sql("VACUUM ANALYZE")
        ids = [r["id"] for r in stack.sql("SELECT id FROM messages ORDER BY id")]
        ids_file, queries_file = work / "ids.txt", work / "queries.txt"
        ids_file.write_text("\n".join(ids) + "\n")
        queries_file.write_text("\n".join(QUERIES) + "\n")
        stack.start(batch_worker=False)
        _first_calls(stack, box["token"], ids)
        ours_url = stack.url
        ours_pid = stack.processes[0].pid
        peer_port = _free_port()
        peer_log = open(stack.logs / "peer.log", "wb")  # noqa: SIM115 - closed at exit
        peer = subprocess.Popen([sys.executable, "-m", "bench.sdk_peer", "--port", str(peer_port)],
                                env={**stack.env, "PEER_TOKEN": box["token"]}, cwd=ROOT,
                                stdout=peer_log, stderr=peer_log)
        stack.processes.append(peer)
        wait_port(peer_port)
        peer_url = f"http://127.0.0.1:{peer_port}/mcp"
        pg = _postmaster_pid()
        results: list[dict[str, Any]] = []
        print("\n| tool | era | c | round | peer req/s | peer p99 ms | ours req/s | ours p99 ms"
              " | ours / peer | CPU ms/call peer | ours |", flush=True)
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
        for tool in tools:
            fixed, vary = _tool_load(tool, ids_file, queries_file)
            for era in eras:
                for c in concurrencies:
                    for r in range(1, args.rounds + 1):
                        common = dict(era=era, tool=tool, concurrency=c, seconds=args.seconds,
                                      warmup=args.warmup, args=fixed, vary=vary, kit=args.kit)
                        peer_run = load(peer_url, watch={"server": peer.pid}, label="peer",
                                        **common)
                        spy = _spy(args.py_spy, ours_pid, f"{tool}-{era}-c{c}", args.seconds
                                   ) if args.py_spy and r == 1 else None
                        ours_run = load(ours_url, token=box["token"], label="ours",
                                        watch={"server": ours_pid, **({"pg": pg} if pg else {})},
                                        **common)
                        if spy is not None:
                            spy.wait(timeout=60)
                        for run in (peer_run, ours_run):
                            if run["errors"] or not run["ok"]:
                                print(f"  {run['label']} errors: {run['error_kinds']}",
                                      file=sys.stderr)
                        ratio = ours_run["rps"] / peer_run["rps"] if peer_run["rps"] else 0.0
                        cpu_ms = _cpu_ms(ours_run)
                        results.append({"tool": tool, "era": era, "c": c, "ratio": ratio,
                                        "ours_p99": ours_run["p99_ms"], "cpu_ms": cpu_ms})
                        print(f"| {tool} | {era} | {c} | {r} | {peer_run['rps']:.0f} | "
                              f"{peer_run['p99_ms']} | {ours_run['rps']:.0f} | "
                              f"{ours_run['p99_ms']} | {ratio:.2f}x | {_cpu_ms(peer_run):.2f} | {cpu_ms:.2f} |", flush=True)
        print("\nmedian ours / peer (and worst p99 of ours) per tool, era and concurrency:")
        groups: dict[tuple[str, str, int], list[dict[str, Any]]] = collections.defaultdict(list)
        for row in results:
            groups[(row["tool"], row["era"], row["c"])].append(row)
        for (tool, era, c), rows in groups.items():
            print(f"  {tool:22} {era:7} c={c:<3} {statistics.median(r['ratio'] for r in rows):.2f}x"
                  f"  p99 <= {max(r['ours_p99'] or 0 for r in rows):.1f} ms"
                  f"  CPU {statistics.median(r['cpu_ms'] for r in rows):.2f} ms/call")
        if args.trip_calls:
            rnd = random.Random(1)
            calls = {"mail_get_message": [{"message_id": rnd.choice(ids)}
                                          for _ in range(args.trip_calls)],
                     "mail_search": [{"q": rnd.choice(QUERIES), "mode": "keyword"}
                                     for _ in range(args.trip_calls)],
                     "mail_list_identities": [{} for _ in range(args.trip_calls)]}
            trips = count_trips(stack.env, box["token"], {t: calls[t] for t in tools})
            print("\nround trips per call (in-process, sequential):")
            for tool, found in trips.items():
                print(f"  {tool}: PostgreSQL {found['pg']:.2f}, Redis {found['redis']:.2f}")
                for statement, n in found["statements"].items():
                    print(f"      {n:5.2f}  {statement}")
        print(f"\nload average at the end: {machine()}")


if __name__ == "__main__":
    main()
