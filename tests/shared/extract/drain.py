"""A batch worker in a process of its own, for the tests that kill one in the middle of a file:
``python -m tests.shared.extract.drain DSN`` extracts one pending attachment of that database."""

from __future__ import annotations

import asyncio
import sys

from shared.db import open_database
from shared.extract.store import extract_pending


async def main(dsn: str) -> None:
    pool = await open_database(dsn, size=1, acquire_seconds=5)
    try:
        await extract_pending(pool, limit=1)
    finally:
        await pool.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
