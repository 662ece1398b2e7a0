"""The tool registry is DESIGN.md section 5.2's table for every tool present (permission, key
levels, extra bucket, where it runs), read from the team kit's DESIGN.md."""

from __future__ import annotations

import re

import pytest

from shared.auth.permissions import KeyLevel
from shared.tools.registry import TOOLS
from tests.conftest import kit_path

DESIGN = None if kit_path() is None else (kit_path() / "DESIGN.md")


def design_rows() -> dict[str, dict[str, str]]:
    """Section 5.2's rows by tool name: permission, levels, bucket, runs."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text[text.index("### 5.2"):text.index("### 5.3")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`mail_"):
            continue
        for name in re.findall(r"`(mail_[a-z_]+)`", cells[0]):
            rows[name] = {"permission": cells[1].strip("`"), "levels": cells[2],
                          "bucket": cells[3], "runs": cells[4]}
    return rows


@pytest.mark.skipif(DESIGN is None, reason="team kit absent: set PYLOTA_KIT to check DESIGN.md")
@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t.name)
def test_registry_row_is_design_5_2s(tool):
    row = design_rows()[tool.name]
    assert tool.permission.value == row["permission"]
    levels = set(KeyLevel) if row["levels"] == "all" else {
        KeyLevel(level.strip()) for level in row["levels"].split(",")}
    assert tool.levels == levels
    assert tool.bucket == (None if row["bucket"] in ("–", "-") else row["bucket"])
    assert tool.runs_on == ("worker" if row["runs"].startswith("worker") else "inline")


@pytest.mark.skipif(DESIGN is None, reason="team kit absent: set PYLOTA_KIT to check DESIGN.md")
def test_the_table_is_read_whole():
    assert len(design_rows()) == 17  # the spec's 17 tools
