"""``pylota smtp`` as an operator runs it: it listens where the settings say, greets, stops
cleanly on SIGTERM, and logs JSON lines on stderr as the front and workers do."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import smtplib
import subprocess
import sys

import pytest

from tests.conftest import REDIS_URL, ROOT, free_port
from tests.e2e.harness import pylota

WAIT = 30


def greeting(port: int) -> tuple[int, bytes]:
    with smtplib.SMTP("127.0.0.1", port, timeout=5) as client:
        return client.ehlo("mta.sender.example")


async def test_pylota_smtp_listens_greets_and_stops_on_sigterm(db_url):
    port = free_port()
    env = {**os.environ, "DATABASE_URL": db_url, "REDIS_URL": REDIS_URL,
           "PM_SMTP_LISTEN_HOST": "127.0.0.1", "PM_SMTP_LISTEN_PORT": str(port),
           "PM_API_HOST": "mail.pylota.test"}
    process = subprocess.Popen([sys.executable, "-m", "cli", "smtp", "--authserv-id",
                                "mx.pylota.test"], env=env, cwd=ROOT,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        async with asyncio.timeout(WAIT):
            while True:
                assert process.poll() is None, process.stderr.read()  # type: ignore[union-attr]
                try:
                    code, text = await asyncio.to_thread(greeting, port)
                    break
                except OSError:  # not listening yet
                    await asyncio.sleep(0.1)
        assert code == 250 and text.startswith(b"mx.pylota.test")
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(WAIT):
            assert await asyncio.to_thread(process.wait) == 0
        lines = process.stderr.read().decode().splitlines()  # type: ignore[union-attr]
        assert "smtp_listening" in [json.loads(line)["event"] for line in lines], lines
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["worker"], ["worker", "--batch"],
                                     ["smtp"]])
def test_a_database_url_of_another_scheme_stops_every_process_at_start(command):
    """pylota serve started with DATABASE_URL=postgresq://… and answered every request 500
    (found by a new user): every process now refuses to start, naming the variable."""
    done = pylota("postgresq://postgres:sekrit@127.0.0.1:5432/none", *command)
    assert done.returncode == 2, done.stderr
    assert "DATABASE_URL must start with postgresql://" in done.stderr
    assert "sekrit" not in done.stderr and "Traceback" not in done.stderr


def test_pylota_says_its_version():
    """There was no `pylota --version` (a new user's report)."""
    from importlib.metadata import version
    done = pylota("postgresql://postgres@127.0.0.1:1/none", "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"pylota, version {version('pylota-mail')}"
