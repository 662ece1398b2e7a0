"""The sandbox process: ``python -m shared.extract.child KIND LIMITS_JSON PARENT_PID``.

It limits itself (``shared.extract.sandbox`` lists the limits) before it reads a byte of the
file, reads the file from stdin, runs :func:`~shared.extract.formats.extract_pages` and writes
the :class:`~shared.extract.outcome.Outcome` as msgpack to stdout. It imports no more than that
needs (no asyncio, no logging set-up): it starts once per file.
"""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import signal
import sys
import warnings

import msgspec

from shared.extract.detect import AttachmentType
from shared.extract.formats import extract_pages
from shared.extract.limits import Limits
from shared.extract.outcome import Outcome, Reason

__all__ = ["EXIT_MEMORY_ON_WRITE", "main"]

#: Exit status when even writing the result ran out of memory.
EXIT_MEMORY_ON_WRITE = 3
_PR_SET_PDEATHSIG = 1
#: Seconds past RLIMIT_CPU's soft limit (SIGXCPU) until its hard limit (SIGKILL).
_CPU_GRACE_SECONDS = 1


def _confine(limits: Limits, parent_pid: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU,
                       (limits.cpu_seconds, limits.cpu_seconds + _CPU_GRACE_SECONDS))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    if sys.platform.startswith("linux"):
        # Sent when the thread that started us ends: the worker's event loop thread.
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The worker may have died before prctl took effect.
        if os.getppid() != parent_pid:
            os._exit(1)


def main(argv: list[str]) -> int:
    """Run one extraction; returns the exit status."""
    kind, limits_json, parent_pid = argv
    limits = msgspec.json.decode(limits_json, type=Limits)
    _confine(limits, int(parent_pid))
    # The result leaves on a copy of stdout; the parsers' own prints (odfpy prints "SAX FAILED
    # TO PARSE" and the file's content on fd 1) go to stderr, which the sandbox discards: on
    # stdout they corrupted the result, and a broken file ended "crashed" (found by an attack).
    result = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # Parsers warn about what they find in the file; nothing of the file may reach a log.
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    try:
        content = sys.stdin.buffer.read()
        outcome = extract_pages(content, AttachmentType(kind), limits)
        del content
    except MemoryError:
        outcome = Outcome.failed(Reason.MEMORY, kind)
    except RecursionError:
        outcome = Outcome.failed(Reason.CORRUPT, kind, detail="RecursionError")
    try:
        result.write(msgspec.msgpack.encode(outcome))
        result.flush()
    except MemoryError:
        return EXIT_MEMORY_ON_WRITE
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
