"""What long domain work gets from whoever runs it: a way to report progress and to be stopped.

Domain code (mail_wait's wait, deep search) takes a :class:`Control` and never knows whether it
runs inline in the front or as a job on a worker (``workers/runner.py``): it calls
:meth:`Control.progress` when it has something to say, and :meth:`Control.checkpoint` where
stopping is safe (between steps, and inside long steps). Spec section 2.6: "When the client closes
the stream, the server stops the work at its next checkpoint".
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Control", "Stopped", "UNSTOPPABLE"]


class Stopped(Exception):
    """Raised by :meth:`Control.checkpoint` when the caller cancelled the work; the work stops
    and nothing more is reported."""


class Control(Protocol):
    """How running work reports and learns that it must stop."""

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Report one step: ``progress`` increases from call to call (spec section 2.6)."""

    async def checkpoint(self) -> None:
        """Return when the work may go on.

        Raises:
            Stopped: the caller cancelled it.
        """

    def remaining(self) -> float:
        """Seconds left before the work's deadline (never negative)."""


class _Unstoppable:
    """The control of work nobody watches: reports go nowhere, it is never stopped."""

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        return None

    async def checkpoint(self) -> None:
        return None

    def remaining(self) -> float:
        return float("inf")


#: A :class:`Control` for work run directly (tests, the CLI).
UNSTOPPABLE: Control = _Unstoppable()
