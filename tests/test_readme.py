"""The README documents every setting and the commands it tells people to run exist."""

from __future__ import annotations

import re
from pathlib import Path

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
