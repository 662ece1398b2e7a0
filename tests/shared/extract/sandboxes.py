"""Finding the sandbox processes a process started, from ``/proc`` (Linux): each sandbox's
command line names the pid of the worker that started it."""

from __future__ import annotations

from pathlib import Path


def sandbox_pids(parent_pid: int) -> list[int]:
    """Pids of the live sandbox processes that ``parent_pid`` started."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"shared.extract.child" in argv and str(parent_pid).encode() in argv:
            found.append(int(proc.name))
    return found
