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


class TableResolver:
    """A ``TxtResolver`` that answers from a table instead of the DNS: ``records`` maps names
    (with their trailing dot) to TXT data; a name in ``failing`` raises TemporaryDnsError."""

    def __init__(self) -> None:
        self.records: dict[str, bytes] = {}
        self.failing: set[str] = set()
        self.asked: list[str] = []

    async def txt(self, name: str) -> bytes | None:
        from shared.mail.signatures import TemporaryDnsError

        self.asked.append(name)
        if name in self.failing:
            raise TemporaryDnsError("test: no answer")
        return self.records.get(name)


class DkimKey:
    """An RSA key made for one test run, to sign test mail and publish its public half."""

    def __init__(self, bits: int = 2048) -> None:
        import base64

        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=bits)
        self.private_pem = key.private_bytes(serialization.Encoding.PEM,
                                             serialization.PrivateFormat.TraditionalOpenSSL,
                                             serialization.NoEncryption())
        public = key.public_key().public_bytes(serialization.Encoding.DER,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
        self.txt = b"v=DKIM1; k=rsa; p=" + base64.b64encode(public)

    def sign(self, raw: bytes, domain: str, selector: str = "sel1") -> bytes:
        """``raw`` with a DKIM-Signature of ``domain`` on top (relaxed/simple, dkimpy)."""
        import dkim

        signature = dkim.sign(raw, selector.encode(), domain.encode(), self.private_pem,
                              include_headers=[b"from", b"to", b"subject", b"date"])
        return signature + raw

    def publish(self, resolver: TableResolver, domain: str, selector: str = "sel1") -> None:
        resolver.records[f"{selector}._domainkey.{domain}."] = self.txt


@pytest.fixture(scope="session")
def dkim_key() -> DkimKey:
    """A 2,048-bit signing key for this run (tests publish it in their own resolver)."""
    return DkimKey()


@pytest.fixture
def resolver() -> TableResolver:
    """A fresh DNS table for one test: no network."""
    return TableResolver()
