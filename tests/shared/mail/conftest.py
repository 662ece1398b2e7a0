"""Fixtures for the mail tests: our own synthetic messages and the team kit's real-mail corpus.

The kit itself comes from the ``kit`` fixture in ``tests/conftest.py`` (``PYLOTA_KIT``), which
skips a test when the kit is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mail"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    """``tests/fixtures/mail``: small messages written for these tests."""
    return FIXTURES


@pytest.fixture(scope="session")
def corpus(kit: Path) -> Path:
    """The kit's ``corpus/`` folder (see its README.md)."""
    return kit / "corpus"
