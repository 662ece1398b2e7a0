"""Every rate-limit bucket of DESIGN.md section 5.3, per key, on the real Redis: its limit comes
from its setting, two processes share one budget, and a refusal says when to retry."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import get_args

import pytest

from shared.errors import ErrorCode, PylotaError
from shared.ids import Prefix, new_id
from shared.ratelimit import Bucket, RateLimits
from tests.conftest import settings_for

#: The setting of each bucket (README configuration table).
SETTING = {"RL_API": "pm_rl_api_per_minute", "RL_SEARCH": "pm_rl_search_per_minute",
           "RL_AGENTIC": "pm_rl_agentic_per_minute", "RL_SEND": "pm_rl_send_per_minute",
           "RL_SIGN": "pm_rl_sign_per_minute"}


def test_every_bucket_has_a_setting():
    assert set(get_args(Bucket)) == set(SETTING)


@pytest.mark.parametrize("bucket", get_args(Bucket))
async def test_a_bucket_holds_its_configured_limit_per_key_across_processes(bucket):
    settings = settings_for("postgresql://unused", **{SETTING[bucket]: 3})
    front_a, front_b = RateLimits(settings), RateLimits(settings)
    key, other_key = new_id(Prefix.KEY), new_id(Prefix.KEY)
    for limits in (front_a, front_b, front_a):
        await limits.charge(bucket, key)
    before = datetime.now(timezone.utc)
    for limits in (front_b, front_a):
        with pytest.raises(PylotaError) as raised:
            await limits.charge(bucket, key)
        error = raised.value
        assert error.code is ErrorCode.RATE_LIMITED and error.details["bucket"] == bucket
        assert isinstance(error.details["retry_after"], int)
        assert 1 <= error.details["retry_after"] <= 60
        reset_at = datetime.fromisoformat(error.details["reset_at"].replace("Z", "+00:00"))
        assert error.details["reset_at"].endswith("Z")
        assert before - timedelta(seconds=1) <= reset_at <= before + timedelta(seconds=61)
    await front_a.charge(bucket, other_key)  # another key has its own budget
    for neighbour in set(get_args(Bucket)) - {bucket}:
        await front_a.charge(neighbour, key)  # and so does every other bucket
