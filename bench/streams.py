"""How many ``mail_wait`` streams one front process holds, and what each costs (issue 14).

    python -m bench.streams [--streams 5000] [--heartbeat 10] [--timeout 60] [--workers 2]
                            [--batch 200]

Builds a throwaway database (``bench.stack``), starts one front (``pylota serve``, one uvicorn
process) and ``--workers`` interactive workers (``PM_WORKER_MAX_JOBS`` high enough for all
streams between them) on loopback, then opens ``--streams`` ``mail_wait`` calls (``tools/call``
answered as SSE, spec section 2.6, with a progressToken) from a raw-asyncio HTTP/1.1 client, in
batches of ``--batch`` connections at a time, retrying a 503 after its ``Retry-After``. No mail
arrives, so each stream carries progress (or ``: keep-alive``) every ``--heartbeat`` seconds
and ends with its timed-out result after ``--timeout`` seconds.

It prints the streams open at the peak, the gaps between events of every stream (lateness
against the heartbeat: p50, p99, max), the front's VmRSS before the first stream and at the peak
(KB per open stream; and the marginal KB, the RSS slope over the second half of the climb,
which leaves out what the front allocates once), how many streams got their final JSON-RPC
result, and the errors (a tool error by its code and message).

Targets (issue 14): >= 5,000 held at once, keep-alive lateness <= 1 s, <= 20 KB per stream.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from bench.stack import Stack, percentile

#: Lateness of an event past the heartbeat that still counts as on time (target, seconds).
LATENESS_TARGET_SECONDS = 1.0
#: Front memory per open stream the target allows (KB).
KB_PER_STREAM_TARGET = 20.0


@dataclass
class Tally:
    """What the client saw, over all streams."""

    open_now: int = 0
    peak: int = 0
    finals: int = 0
    gaps: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    retries: int = 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench.streams", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--streams", type=int, default=5000, help="streams to open (5000)")
    parser.add_argument("--heartbeat", type=float, default=10.0,
                        help="PM_STREAM_HEARTBEAT_SECONDS of the stack, seconds (10, the default)")
    parser.add_argument("--timeout", type=int, default=60,
                        help="mail_wait timeout_seconds, 1..60 (60)")
    parser.add_argument("--workers", type=int, default=2, help="interactive workers (2)")
    parser.add_argument("--batch", type=int, default=200,
                        help="connections being opened at once (200)")
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)
    if not 1 <= args.timeout <= 60:
        parser.error("--timeout: mail_wait takes 1..60 seconds; pass a value in that range")
    if args.streams < 1 or args.batch < 1 or args.workers < 1:
        parser.error("--streams, --batch and --workers must be at least 1")
    return args


def rss_kb(pid: int) -> int:
    """VmRSS of process ``pid`` in KB (``/proc/PID/status``)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def _request(host: str, port: int, token: str, number: int, timeout: int) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {
        "name": "mail_wait", "arguments": {"timeout_seconds": timeout},
        "_meta": {"progressToken": number}}}).encode()
    return (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "MCP-Protocol-Version: 2025-11-25\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def _code(message: dict[str, Any]) -> str:
    """The error of a final JSON-RPC message: the tool error's code and message, or the JSON-RPC
    code."""
    if "error" in message:
        return str((message["error"].get("data") or {}).get("error", {}).get(
            "code", message["error"]["code"]))
    # a tool error carries its envelope as the text content, no structuredContent (spec section 5)
    for block in message["result"].get("content") or ():
        try:
            error = json.loads(block.get("text", ""))["error"]
            return f"{error['code']} ({error['message']})"
        except (ValueError, KeyError, TypeError):
            continue
    return "isError"


async def _stream(host: str, port: int, request: bytes, tally: Tally, opening: asyncio.Semaphore,
                  deadline: float) -> None:
    """One mail_wait call: open (retrying 503s), then read its SSE events to the end."""
    async with opening:
        while True:
            try:
                reader, writer = await asyncio.open_connection(host, port)
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
            except (OSError, asyncio.IncompleteReadError) as exc:
                tally.errors[f"connect: {type(exc).__name__}"] += 1
                return
            status = int(head.split(b" ", 2)[1])
            if status == 503 and time.monotonic() < deadline:
                writer.close()
                tally.retries += 1
                retry = next((line.split(b":", 1)[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"retry-after:")), b"1")
                await asyncio.sleep(float(retry))
                continue
            break
    if status != 200 or b"text/event-stream" not in head.lower():
        tally.errors[f"HTTP {status} {'sse' if b'event-stream' in head else 'json'}"] += 1
        writer.close()
        return
    tally.open_now += 1
    tally.peak = max(tally.peak, tally.open_now)
    last = time.monotonic()
    buffer = b""
    try:
        while chunk := await reader.read(65536):
            buffer += chunk
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                now = time.monotonic()
                # chunked framing puts the chunk size on its own line before each event
                data = next((line[6:] for line in event.split(b"\n")
                             if line.startswith(b"data: ")), None)
                message = json.loads(data) if data else None
                if message is not None and "id" in message:
                    if "result" in message and not message["result"].get("isError"):
                        tally.finals += 1
                    else:
                        tally.errors[f"final error: {_code(message)}"] += 1
                else:
                    tally.gaps.append(now - last)
                last = now
    except OSError as exc:
        tally.errors[f"read: {type(exc).__name__}"] += 1
    finally:
        tally.open_now -= 1
        writer.close()


async def _run(stack: Stack, front_pid: int, token: str, args: argparse.Namespace) -> None:
    url = urlsplit(stack.url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    tally = Tally()
    before = rss_kb(front_pid)
    opening = asyncio.Semaphore(args.batch)
    started = time.monotonic()
    deadline = started + args.timeout  # stop retrying 503s once the first streams end
    tasks = [asyncio.create_task(_stream(host, port, _request(host, port, token, n, args.timeout),
                                         tally, opening, deadline))
             for n in range(1, args.streams + 1)]
    peak_rss, peak_open, ramp = before, 0, 0.0
    climb: list[tuple[int, int]] = []  # (streams open, front RSS) at each new peak
    while not all(task.done() for task in tasks):
        await asyncio.sleep(0.5)
        if tally.open_now > peak_open:
            peak_open, peak_rss = tally.open_now, rss_kb(front_pid)
            climb.append((peak_open, peak_rss))
            ramp = time.monotonic() - started
    await asyncio.gather(*tasks)
    lateness = [gap - args.heartbeat for gap in tally.gaps]
    per_stream = (peak_rss - before) / peak_open if peak_open else 0.0
    # The same without what the front allocates once (pools filling up, first-use caches),
    # which the average above spreads over the streams held: the RSS slope over the second
    # half of the climb.
    half = next(((n, kb) for n, kb in climb if n >= peak_open / 2 and n < peak_open), None)
    marginal = (peak_rss - half[1]) / (peak_open - half[0]) if half else 0.0
    late_p99 = percentile(lateness, 99)
    rows = [
        ("streams asked / held at peak", f"{args.streams} / {peak_open}"
         f" (peak reached after {ramp:.1f} s; {tally.retries} 503 retries)"),
        ("final results (timed_out)", str(tally.finals)),
        ("events between keep-alives", str(len(lateness))),
        ("lateness vs heartbeat p50 / p99 / max",
         f"{percentile(lateness, 50):+.3f} / {late_p99:+.3f} / {max(lateness, default=0):+.3f} s"),
        ("front VmRSS before / at peak", f"{before / 1024:.1f} / {peak_rss / 1024:.1f} MB"),
        ("front memory per open stream", f"{per_stream:.1f} KB (marginal, over the second half "
                                          f"of the climb: {marginal:.1f} KB)"),
        ("errors", ", ".join(f"{k}: {v}" for k, v in tally.errors.items()) or "none"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    held, on_time = peak_open >= 5000, late_p99 <= LATENESS_TARGET_SECONDS
    small = per_stream <= KB_PER_STREAM_TARGET
    print(f"targets: >= 5000 held: {'met' if held else 'NOT met'}; p99 lateness <= "
          f"{LATENESS_TARGET_SECONDS:g} s: {'met' if on_time else 'NOT met'}; <= "
          f"{KB_PER_STREAM_TARGET:g} KB/stream: {'met' if small else 'NOT met'}")


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark (see the module docstring)."""
    args = parse_args(argv)
    # the client holds one socket per stream, the front one more each
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 3 * args.streams + 100)), hard))
    with Stack(args.admin_dsn, embedder="hash") as stack:
        stack.env.update({
            "PM_STREAM_HEARTBEAT_SECONDS": str(args.heartbeat),
            "PM_WORKER_MAX_JOBS": str(-(-args.streams // args.workers) + 100),
            "PM_RL_API_PER_MINUTE": str(max(100_000, 10 * args.streams)),
            "PM_JOBS_PER_KEY": str(args.streams),  # every stream is this one key's
            "PM_LOG_LEVEL": "warning"})
        token = stack.mailbox("bench", "streams@bench.pylota.test")["token"]
        stack.start(batch_worker=False, interactive_worker=True)
        for n in range(2, args.workers + 1):
            stack._spawn(f"worker{n}", "worker")
        time.sleep(2)  # the extra workers beat before the first call counts capacity
        asyncio.run(_run(stack, stack.processes[0].pid, token, args))


if __name__ == "__main__":
    main()
