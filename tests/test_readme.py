"""The README documents every setting and the commands it tells people to run exist."""

from __future__ import annotations

import re
from pathlib import Path

from front.rest.endpoints import REST_ROUTES
from shared.config import Settings

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_every_setting_is_documented():
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", README, re.M))
    assert documented == {f.upper() for f in Settings.__struct_fields__}


def test_the_two_set_up_commands_exist_and_ci_runs_the_test_one():
    for script in ("scripts/demo", "scripts/test"):
        assert f"\n{script}" in README
        assert (ROOT / script).stat().st_mode & 0o111
    assert "scripts/test" in (ROOT / ".ci/run").read_text()


def test_settings_reject_a_malformed_variable_by_name():
    import pytest

    from shared.config import SettingsError

    with pytest.raises(SettingsError, match="PM_RL_API_PER_MINUTE"):
        Settings.from_env({"PM_RL_API_PER_MINUTE": "lots"})
    assert Settings.from_env({"PM_RL_API_PER_MINUTE": "5"}).pm_rl_api_per_minute == 5


def test_the_limits_and_failure_section_names_every_limit_with_its_value():
    """The "Limits and failure behaviour" tables follow the code (issue 9): every limit setting
    with its default, and the constants of the pool, the relay, the runner and the budget."""
    from front.body import BODY_READ_SECONDS
    from front.http_head import HEAD_SECONDS, MAX_HEAD_BYTES
    from front.relay import MARGIN_SECONDS, START_SECONDS
    from front.resources import REDIS_WAIT_SECONDS
    from front.shedding import RETRY_AFTER_SECONDS
    from shared.db.pool import CONNECT_SECONDS
    from shared.jobs import DEADLINE_GRACE_SECONDS
    from shared.mail import budget
    from shared.pubsub import WAKE_GRID_SECONDS
    from workers.process import MAX_JOBS_BATCH, RECONNECT_DELAYS
    from workers.runner import CALL_RESULT_SECONDS

    section = README.split("## Limits and failure behaviour\n", 1)[1].split("\n## ", 1)[0]
    defaults = Settings()
    for name in ("pm_db_pool_size", "pm_db_acquire_seconds", "pm_db_statement_timeout_seconds",
                 "pm_redis_pool_size", "pm_max_in_flight", "pm_max_in_flight_per_key",
                 "pm_request_deadline_seconds",
                 "pm_worker_max_jobs", "pm_jobs_per_key", "pm_job_heartbeat_seconds",
                 "pm_stream_heartbeat_seconds"):
        assert f"`{name.upper()}` = {getattr(defaults, name):g}" in section, name
    for seconds in (CONNECT_SECONDS, REDIS_WAIT_SECONDS, BODY_READ_SECONDS, START_SECONDS,
                    DEADLINE_GRACE_SECONDS, MARGIN_SECONDS, CALL_RESULT_SECONDS,
                    WAKE_GRID_SECONDS):
        assert f"{seconds:g} s" in section, seconds
    assert f"Retry-After: {RETRY_AFTER_SECONDS}" in section
    assert f"| {MAX_HEAD_BYTES // 1024} KiB, then 431" in section
    assert f"within {HEAD_SECONDS:g} s of the connection opening" in section
    assert f"runs {MAX_JOBS_BATCH} job at a time" in section
    assert ", ".join(f"{d:g}" for d in RECONNECT_DELAYS[:-1]) in section
    assert f"every {RECONNECT_DELAYS[-1]:g} s" in section
    assert (f"header block {budget.MAX_HEADER_BYTES // 1024} KiB and "
            f"{budget.MAX_HEADER_FIELDS:,} fields, {budget.MAX_PARAMS} parameters and "
            f"{budget.MAX_MIME_FIELD_BYTES // 1024} KiB per MIME field, {budget.MAX_RECIPIENTS} "
            f"recipients per address field, {budget.MAX_PARTS} MIME parts, {budget.MAX_DEPTH} "
            f"levels of nesting, {budget.MAX_HTML_CHARS:,} characters of HTML") in section


def test_the_import_section_names_the_importers_limits():
    from shared.ingest import importer

    section = README.split("## Import your own mail\n", 1)[1].split("\n## ", 1)[0]
    assert (f"{importer.CHUNK_MESSAGES} messages per worker task, at most "
            f"{importer.CHUNKS_IN_FLIGHT} tasks per worker and "
            f"{importer.BYTES_IN_FLIGHT // 2**20} MiB of raw mail handed out ahead of the store, "
            f"at most {importer.BATCH_BYTES // 2**20} MiB of raw mail per batch") in " ".join(
        section.split())
    assert f"`PM_IMPORT_BATCH` messages ({importer.DEFAULT_BATCH})" in section


def test_the_rest_table_lists_every_endpoint():
    section = README.split("## REST API", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(GET|POST|PATCH|DELETE) (/v1/[^`?]*)", section, re.MULTILINE))
    served = {(r.method, re.sub(r":\w+}", "}", r.path)) for r in REST_ROUTES}
    assert served <= listed, sorted(served - listed)
