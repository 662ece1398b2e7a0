"""Fixtures for outbound mail: a pool on the test's database, a sending identity, DKIM keys, and
a real SMTP server on loopback standing in for the relay (aiosmtpd, in the test's event loop).

The relay stand-in is one of the parts we do not run ourselves (STYLE.md: stand-ins only for
those). It records every transaction it accepts, and can refuse recipients, answer DATA with a
chosen reply, or hold a transaction until the test lets it go.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import asyncpg
import pytest
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from shared.db import open_database
from shared.outbound.delivery import RelayConfig
from shared.outbound.dkim_signing import DkimSigner
from shared.outbound.model import Sender
from shared.tenancy.store import create_identity, create_tenant

OWN = "desk@acme.example"


@dataclass
class Received:
    """One transaction the relay accepted: ``secure`` when it came over TLS, ``login`` the
    AUTH user (None without AUTH)."""

    mail_from: str
    rcpt_tos: list[str]
    content: bytes
    secure: bool = False
    login: str | None = None


@dataclass
class Relay:
    """The stand-in relay's behaviour and what it received (``offered``: every DATA, accepted
    or not).

    ``refuse`` maps a recipient to the reply RCPT gets; ``data_reply`` answers DATA instead of
    ``250``; while ``hold`` is set, DATA waits for ``release`` (and ``entered`` tells the test
    that a transaction got that far).
    """

    port: int = 0
    received: list[Received] = field(default_factory=list)
    offered: list[bytes] = field(default_factory=list)
    refuse: dict[str, str] = field(default_factory=dict)
    data_reply: str | None = None
    hold: bool = False
    entered: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle_RCPT(self, server: SMTP, session: Session, envelope: Envelope,
                          address: str, rcpt_options: list[str]) -> str:
        if address in self.refuse:
            return self.refuse[address]
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        self.offered.append(envelope.original_content or b"")
        if self.hold:
            self.entered.set()
            await self.release.wait()
            return "421 4.3.0 going away"
        if self.data_reply is not None:
            return self.data_reply
        secure = server.transport is not None \
            and server.transport.get_extra_info("ssl_object") is not None
        login = session.auth_data.login.decode() if session.auth_data else None
        self.received.append(Received(mail_from=envelope.mail_from or "",
                                      rcpt_tos=list(envelope.rcpt_tos),
                                      content=envelope.original_content or b"",
                                      secure=secure, login=login))
        return "250 2.0.0 Ok: queued as TEST"

    def config(self, **overrides: object) -> RelayConfig:
        values: dict[str, object] = {"host": "127.0.0.1", "port": self.port, "timeout": 5.0,
                                     "max_attempts": 3, "retry_seconds": 0.0}
        values.update(overrides)
        return RelayConfig(**values)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def serving(relay: Relay, *, tls: ssl.SSLContext | None = None, implicit: bool = False,
                  password: str | None = None) -> AsyncIterator[Relay]:
    """Run ``relay`` on a free loopback port until the block ends: with ``tls``, offering
    STARTTLS and requiring it (or, ``implicit``, TLS from the first byte); with ``password``,
    requiring AUTH (user ``relay-user``) over TLS."""
    loop = asyncio.get_running_loop()

    def authenticate(server: SMTP, session: Session, envelope: Envelope, mechanism: str,
                     auth_data: LoginPassword) -> AuthResult:
        ok = auth_data.login == b"relay-user" and auth_data.password == (password or "").encode()
        # handled=False: aiosmtpd answers the failure itself (535)
        return AuthResult(success=ok, handled=False, auth_data=auth_data)

    def protocol() -> SMTP:
        return SMTP(relay, hostname="relay.test", loop=loop,
                    tls_context=None if implicit else tls, require_starttls=tls is not None
                    and not implicit, auth_required=password is not None,
                    auth_require_tls=True, authenticator=authenticate if password else None)

    server = await loop.create_server(protocol, "127.0.0.1", 0, ssl=tls if implicit else None)
    relay.port = server.sockets[0].getsockname()[1]
    try:
        yield relay
    finally:
        relay.release.set()
        server.close()
        await server.wait_closed()


@pytest.fixture
async def relay() -> AsyncIterator[Relay]:
    """A relay stand-in listening on loopback."""
    async with serving(Relay()) as running:
        yield running


@pytest.fixture
async def pool(db_url: str) -> AsyncIterator[Database]:
    """A pool on the test's own database."""
    created = await open_database(db_url, size=20, acquire_seconds=5)
    yield created
    await created.close()


@pytest.fixture
async def sender(conn: asyncpg.Connection) -> Sender:
    """``desk@acme.example`` (display name "Acme Desk") in tenant acme."""
    tenant = await create_tenant(conn, "acme")
    identity = await create_identity(conn, tenant.id, OWN, display_name="Acme Desk")
    return Sender.of(identity)


@dataclass(frozen=True)
class DkimKeys:
    signer: DkimSigner
    #: The TXT record published at <selector>._domainkey.<domain>.
    record: str

    @property
    def record_name(self) -> str:
        return f"{self.signer.selector}._domainkey.{self.signer.domain}"

    def dnsfunc(self, name: bytes | str, timeout: float = 5) -> str | None:
        """dkimpy's DNS lookup, answering only our selector."""
        text = name.decode() if isinstance(name, bytes) else name
        return self.record if text.rstrip(".") == self.record_name else None


def make_dkim_keys(domain: str, selector: str) -> DkimKeys:
    """A new 2048-bit RSA key for ``domain`` and ``selector``, with its TXT record."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.DER,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return DkimKeys(signer=DkimSigner(domain=domain, selector=selector, private_key=pem),
                    record="v=DKIM1; k=rsa; p=" + base64.b64encode(public).decode())


@pytest.fixture(scope="session")
def dkim_keys() -> DkimKeys:
    """A key for acme.example, selector s1."""
    return make_dkim_keys("acme.example", "s1")


@dataclass(frozen=True)
class Certificates:
    """A test CA (``ca_file``, PEM) and the relay's TLS context, for 127.0.0.1."""

    ca_file: str
    server: ssl.SSLContext


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A CA and a certificate it issued for 127.0.0.1, valid for a day."""
    folder = tmp_path_factory.mktemp("tls")
    now = datetime.datetime.now(datetime.UTC)

    def name(text: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = (x509.CertificateBuilder().subject_name(name("Test CA")).issuer_name(name("Test CA"))
          .public_key(ca_key.public_key()).serial_number(1).not_valid_before(now)
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False,
                                       False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (x509.CertificateBuilder().subject_name(name("relay.test")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(2).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_file, cert_file, key_file = folder / "ca.pem", folder / "relay.pem", folder / "relay.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    return Certificates(ca_file=str(ca_file), server=server)
