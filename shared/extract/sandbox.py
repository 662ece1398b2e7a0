"""Extracting one attachment in a sandbox process, so a hostile file costs a bounded time and
memory and never the worker.

:func:`extract` is the entry for one file: an oversize file is ``skipped`` (``too_large``) and a
type we do not read ``skipped`` (``unsupported_type``) without starting anything; every other
file is read by :func:`~shared.extract.formats.extract_pages` in a new Python process
(``python -m shared.extract.child``) that, before it reads a byte of the file, limits itself:

- ``RLIMIT_CPU`` to ``Limits.cpu_seconds`` (SIGXCPU ends it: ``cpu_time``), which also ends a
  sandbox whose worker died;
- ``RLIMIT_AS`` to ``Limits.memory_bytes`` (allocation fails: ``memory``);
- ``RLIMIT_CORE`` and ``RLIMIT_FSIZE`` to 0 (no core dumps, no files written);
- on Linux, ``PR_SET_PDEATHSIG`` so it is killed with its worker.

The worker waits at most ``Limits.wall_seconds`` for it, then kills it (``timeout``); a sandbox
that dies any other way (a crash in a C extension, a signal) is ``crashed``. Either way the
worker goes on with the next file. The file arrives on stdin, the limits and type on the command
line, and the :class:`~shared.extract.outcome.Outcome` leaves as msgpack on stdout; stderr is
discarded, since parsers' warnings can quote the file.

Called by ``shared.extract.store.extract_pending`` on the batch workers; never in the front.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import msgspec

from shared.extract.child import EXIT_MEMORY_ON_WRITE
from shared.extract.detect import AttachmentType, detect_type
from shared.extract.limits import DEFAULT_LIMITS, Limits
from shared.extract.outcome import Outcome, Reason
from shared.logs import get_logger

__all__ = ["extract", "run_sandboxed"]

_log = get_logger("extract")


async def extract(content: bytes, *, content_type: str | None, filename: str | None,
                  limits: Limits = DEFAULT_LIMITS) -> Outcome:
    """The text of one attachment, page by page.

    Args:
        content: the attachment's decoded bytes.
        content_type: its MIME type as stored, or None.
        filename: its filename, or None.
        limits: the limits to read it under.

    Returns:
        The outcome (``shared.extract.outcome``); this never raises for a bad file.
    """
    if len(content) > limits.max_input_bytes:
        return Outcome.failed(Reason.TOO_LARGE)
    kind = detect_type(content_type, filename, content)
    if kind is None:
        return Outcome.failed(Reason.UNSUPPORTED_TYPE)
    return await run_sandboxed(content, kind, limits)


async def run_sandboxed(content: bytes, kind: AttachmentType, limits: Limits) -> Outcome:
    """Read ``content`` as ``kind`` in a sandbox process under ``limits`` (module docstring).

    Cancelling the caller kills the sandbox.
    """
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "shared.extract.child", kind.value,
        msgspec.json.encode(limits).decode(), str(os.getpid()),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL)
    try:
        async with asyncio.timeout(limits.wall_seconds):
            output, _ = await process.communicate(content)
    except TimeoutError:
        outcome = Outcome.failed(Reason.TIMEOUT, kind)
    else:
        outcome = _outcome(process.returncode, output, kind)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    _log.info("attachment_extracted", kind=kind.value, status=outcome.status.value,
              reason=outcome.reason.value if outcome.reason else None, detail=outcome.detail,
              pages=len(outcome.pages), seconds=round(time.monotonic() - started, 3))
    return outcome


def _outcome(returncode: int | None, output: bytes, kind: AttachmentType) -> Outcome:
    if returncode == 0:
        try:
            return msgspec.msgpack.decode(output, type=Outcome)
        except msgspec.DecodeError:
            return Outcome.failed(Reason.CRASHED, kind, detail="unreadable result")
    if returncode == -signal.SIGXCPU:
        return Outcome.failed(Reason.CPU_TIME, kind)
    if returncode == EXIT_MEMORY_ON_WRITE:
        return Outcome.failed(Reason.MEMORY, kind)
    return Outcome.failed(Reason.CRASHED, kind, detail=f"exit {returncode}")
