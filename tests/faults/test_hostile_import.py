"""Issue 9, defects 7 and 8, through the real command: ``pylota import --json`` of hostile mail —
one message with 20,000 RFC 2231 continuation parameters (once 155 s and 284 MB), one with 10,000
attachments (23 s), one with 10,000 recipients (15 s, 233 MB), one with NUL bytes in its header
names — takes a few seconds and well under 100 MB more than importing one ordinary message,
keeps every message (what is over a limit is stored raw with a ``budget:`` defect), and prints
only JSON on stdout (the log lines go to stderr)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import msgspec

from tests.conftest import ROOT
from tests.e2e.transport_kit import keyed_identity
from tests.shared.mail.test_hostile import _attachments, _recipients, _rfc2231_continuations

#: Bound on the whole import of the hostile messages (each took 15 to 155 s before the budget).
IMPORT_SECONDS = 20.0
#: Most memory the hostile messages may add to the command's peak (RSS) over one ordinary one.
EXTRA_PEAK_MB = 100

#: Runs a command and prints, last on stderr, its peak RSS in KB (Linux ru_maxrss).
_MEASURED = ("import resource, subprocess, sys\n"
             "code = subprocess.run(sys.argv[1:]).returncode\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
             "sys.exit(code)\n")


def imported(db_url: str, folder: Path) -> tuple[dict, float, float]:
    """``pylota import --json`` of ``folder``: the summary, seconds taken, peak RSS in MB.

    Redis is unreachable on purpose (port 1): every stored message then logs the warning
    ``new_mail_not_announced``, so each import is known to write a log line, and it must be on
    stderr — a warning on stdout before the JSON was issue 9's defect 8."""
    env = {"DATABASE_URL": db_url, "REDIS_URL": "redis://127.0.0.1:1/0", "PM_DKIM_VERIFY": "false",
           "PATH": "/usr/bin:/bin"}
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", _MEASURED, sys.executable, "-m", "cli",
                           "import", "--identity", "desk@acme.example", "--no-progress", "--json",
                           str(folder)], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr[-3000:]
    try:
        summary = msgspec.json.decode(done.stdout)
    except msgspec.DecodeError:
        raise AssertionError(f"stdout is not one JSON document:\n{done.stdout[:1000]}") from None
    *logged, peak_kb = done.stderr.strip().splitlines()
    assert any(_event(line) == "new_mail_not_announced" for line in logged), \
        f"no warning on stderr:\n{done.stderr[-2000:]}"
    return summary, took, int(peak_kb) / 1024


def _event(line: str) -> str | None:
    """The ``event`` of a JSON log line, None for any other line."""
    try:
        value = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return None
    return value.get("event") if isinstance(value, dict) else None


async def test_hostile_mail_imports_in_bounded_time_and_memory_with_json_only_on_stdout(
        db_url, conn, tmp_path):
    await keyed_identity(conn, "desk@acme.example")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "one.eml").write_bytes(b"From: ann@x.example\r\nTo: desk@acme.example\r\n"
                                    b"Subject: hello\r\nMessage-ID: <plain@x>\r\n\r\nhi\r\n")
    _, _, baseline = imported(db_url, plain)

    hostile = tmp_path / "hostile"
    hostile.mkdir()
    for name, raw in (("params.eml", _rfc2231_continuations()), ("parts.eml", _attachments()),
                      ("recipients.eml", _recipients()),
                      ("nul.eml", b"From: ann@x.example\r\nX-Bad\x00Name: v\r\nTo: desk@acme."
                                  b"example\r\nSubject: nul\r\nMessage-ID: <nul@x>\r\n\r\nhi\r\n")):
        (hostile / name).write_bytes(raw)
    summary, took, peak = imported(db_url, hostile)
    assert summary["imported"] == 4, summary
    assert took <= IMPORT_SECONDS, f"took {took:.1f} s"
    assert peak - baseline <= EXTRA_PEAK_MB, f"peak {peak:.0f} MB, {baseline:.0f} MB for one"
    defects = await conn.fetch("SELECT parse_defects FROM messages WHERE subject IN"
                               " ('params', 'parts', 'recipients')")
    assert len(defects) == 3
    assert all(any(d.startswith("budget:") for d in row["parse_defects"]) for row in defects)
    assert await conn.fetchval("SELECT count(*) FROM raw_messages") == 5
