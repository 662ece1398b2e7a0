"""The inbound SMTP listener (``pylota smtp``): mail for our identities arrives here (RFC 5321).

The session, rung by rung:

1. ``EHLO`` advertises ``SIZE`` (RFC 1870) with ``PM_SMTP_MAX_MESSAGE_BYTES``; a ``MAIL FROM``
   declaring more, or a DATA transfer growing past it, gets 552 (``aiosmtpd`` enforces both).
2. ``RCPT TO`` is accepted only for an address of an active or paused identity; anything else
   gets ``550 5.1.1`` at once, so the listener is never an open relay and nothing is stored for
   an unknown recipient. More than :data:`MAX_RECIPIENTS` get ``452`` (section 4.5.3.1.10).
   A client that named :data:`MAX_UNKNOWN_RECIPIENTS_PER_MINUTE` unknown addresses gets ``450``
   for every further recipient, known or not, until its minute clears: probing which addresses
   exist (a directory harvest) learns nothing more. The limit is per client address, so
   clients behind one address (a NAT, a smarthost) share it.
3. At the end of DATA the message is checked, before anything is stored: SPF (RFC 7208, pyspf) for
   the client's IP, HELO and MAIL FROM; DKIM (RFC 6376, dkimpy); DMARC (RFC 7489, authheaders)
   from both. Our verdict is prepended as ``Authentication-Results: <authserv-id>; spf=…;
   dkim=…; dmarc=…`` (RFC 8601) under a ``Received:`` trace field, and any
   Authentication-Results the message already carried under our authserv-id is removed, as
   section 5 requires, so only ours can be trusted.
4. The message goes to ``shared.ingest.pipeline.ingest_raw`` for each recipient identity, the path
   ``pylota import`` takes, which announces it on the identity's new-mail channel (``mail_wait``
   sees it at once); a delivery status notification about a message we sent also updates that
   message's delivery (``shared.outbound.bounces``). Then ``250``. A message delivered again
   with the same bytes (at-least-once senders, ours included) is recognised by those bytes, not
   by our trace fields, and stored once. A database or Redis failure
   answers ``451``, so the sending server keeps the message and retries.

DNS goes through a :class:`Resolver`; tests pass their own. pyspf has no per-call resolver, so its
module-level ``DNSLookup`` (the seam its own tests use) is routed through a context variable that
holds the resolver of the check in progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import re
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from datetime import UTC, datetime
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.utils import format_datetime
from typing import Any, Protocol

import asyncpg
import authheaders
import authres
import dns.exception
import dns.resolver
import spf
from aiosmtpd.smtp import SMTP, Envelope, Session
from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter
from redis.asyncio import Redis
from redis.exceptions import RedisError

from shared.config import Settings
from shared.db import Database, open_database
from shared.errors import PylotaError
from shared.logs import get_logger
from shared.ingest.pipeline import ingest_raw
from shared.mail.auth_results import parse_auth_results
from shared.mail.parse import bare_cr_in_header, header_block
from shared.mail.trust import TrustPolicy
from shared.outbound.bounces import absorb_report
from shared.tenancy.store import identity_of_address

__all__ = ["MAX_RECIPIENTS", "MAX_UNKNOWN_RECIPIENTS_PER_MINUTE", "CHECK_SECONDS", "CHECK_THREADS", "MAX_CHECKS_PER_CLIENT",
           "MAX_LINE_BYTES", "LARGE_MESSAGE_BYTES", "DnsTemporaryError", "Resolver",
           "SystemResolver", "authentication_results", "without_our_results", "smtp_listener",
           "serve_smtp"]

log = get_logger("front.smtp")

#: Recipients accepted in one transaction (RFC 5321 section 4.5.3.1.8 asks for at least 100).
MAX_RECIPIENTS = 100
#: Unknown recipients one client address may name in a minute (a moving window, counted by
#: each listener process). Past it, every RCPT from that address gets ``450 4.7.1``: a server
#: retrying real mail comes back later, a harvester learns nothing more. Postfix stops a
#: session after 20 errors (``smtpd_hard_error_limit``).
MAX_UNKNOWN_RECIPIENTS_PER_MINUTE = 20
#: Seconds of DNS one message's SPF, DKIM and DMARC checks may spend, all lookups together; a
#: lookup asked past it is a temporary error (``temperror``). A sender whose SPF chains slow
#: includes held a check for 40 s and more (found by an attack).
CHECK_SECONDS = 10.0
#: Threads that run the checks, apart from the event loop's default pool (which serves the
#: rest of the process): a check waits on the DNS, not the CPU.
CHECK_THREADS = 32
#: Messages of one client address checked at once; its next one is answered 451 (try again
#: later), so one sender cannot take every check thread from the others.
MAX_CHECKS_PER_CLIENT = 4
#: Longest line taken, in DATA or a command (aiosmtpd's own is RFC 5321 section 4.5.3.1.6's
#: 1,000 octets). Mail with longer lines exists (7 of the kit's 523 single messages): refused
#: with a 500, it bounced, while a malformed message is to be stored as far as it parses (found
#: by an attack). The message's own limit (PM_SMTP_MAX_MESSAGE_BYTES) still bounds the whole.
MAX_LINE_BYTES = 1024 * 1024
#: A message larger than this is checked and stored one at a time (smaller ones go on beside
#: it): at its peak that takes about 20 times its size in memory, and three messages of
#: 24 MiB at once would pass 1.4 GB (found by an attack: one took the listener from 148 to
#: 679 MB).
LARGE_MESSAGE_BYTES = 1024 * 1024
#: Identity statuses that receive mail (deleting and deleted identities do not).
_RECEIVING = frozenset({"active", "paused"})


class DnsTemporaryError(dns.exception.DNSException):
    """A lookup that could not be answered now (timeout, no server); the checks report
    ``temperror`` for it. A ``DNSException`` so that dkimpy and authheaders treat it as one."""


class Resolver(Protocol):
    """The DNS the checks use.

    ``lookup(name, rdtype)`` answers ``rdtype`` ``TXT`` (each record's strings joined), ``A`` and
    ``AAAA`` (addresses), ``MX`` (``"preference host"``) and ``PTR`` (host names) for ``name``
    (no trailing dot), ``[]`` when the name or the type does not exist, and raises
    :class:`DnsTemporaryError` when it cannot tell.
    """

    def lookup(self, name: str, rdtype: str) -> list[str]: ...


class SystemResolver:
    """:class:`Resolver` over the system's DNS servers (dnspython), read on first use."""

    def __init__(self, lifetime: float = 5.0) -> None:
        self._lifetime = lifetime
        self._resolver: dns.resolver.Resolver | None = None

    def lookup(self, name: str, rdtype: str) -> list[str]:
        try:
            if self._resolver is None:
                self._resolver = dns.resolver.Resolver()
                self._resolver.lifetime = self._lifetime
            answer = self._resolver.resolve(name, rdtype)
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return []
        except dns.exception.DNSException as exc:
            raise DnsTemporaryError(f"{type(exc).__name__}: {exc}") from exc
        if rdtype == "TXT":
            return [b"".join(r.strings).decode("utf-8", "replace") for r in answer]
        if rdtype == "MX":
            return [f"{r.preference} {r.exchange.to_text(omit_final_dot=True)}" for r in answer]
        if rdtype == "PTR":
            return [r.target.to_text(omit_final_dot=True) for r in answer]
        return [r.address for r in answer]


class _Budgeted:
    """``resolver`` until ``deadline`` (``time.monotonic()``), then a temporary error: what
    bounds one message's checks to :data:`CHECK_SECONDS` and one more lookup."""

    def __init__(self, resolver: Resolver, deadline: float) -> None:
        self._resolver, self._deadline = resolver, deadline

    def lookup(self, name: str, rdtype: str) -> list[str]:
        if time.monotonic() >= self._deadline:
            raise DnsTemporaryError("the message's DNS time is spent")
        return self._resolver.lookup(name, rdtype)


_SYSTEM = SystemResolver()
_checking: ContextVar[Resolver] = ContextVar("smtp_resolver", default=_SYSTEM)


def _spf_lookup(name: str, qtype: str, strict: bool = True, timeout: float = 20
                ) -> list[tuple[tuple[str, str], Any]]:
    """pyspf's ``DNSLookup`` contract over the resolver of the current check."""
    if qtype == "SPF":  # type 99 is obsolete (RFC 7208 section 3.1); nobody publishes it
        return []
    try:
        values = _checking.get().lookup(name, qtype)
    except DnsTemporaryError as exc:
        raise spf.TempError(f"DNS {exc}") from exc
    if qtype == "TXT":
        return [((name, qtype), [v.encode()]) for v in values]
    if qtype == "MX":
        pairs = (v.split(None, 1) for v in values)
        return [((name, qtype), (int(p), host)) for p, host in pairs]
    return [((name, qtype), v) for v in values]


spf.DNSLookup = _spf_lookup


def _txt_function(resolver: Resolver) -> Callable[..., str | None]:
    """The ``dnsfunc`` of dkimpy and authheaders: one TXT record for a name, or None."""

    def txt(name: str | bytes, timeout: float = 5) -> str | None:
        text = name.decode("ascii", "replace") if isinstance(name, bytes) else name
        records = resolver.lookup(text.rstrip("."), "TXT")
        dmarc = [r for r in records if r.startswith("v=DMARC1")]
        return (dmarc or records or [None])[0]

    return txt


_DKIM_FIELD = re.compile(rb"^DKIM-Signature:", re.IGNORECASE | re.MULTILINE)


def authentication_results(raw: bytes, *, authserv_id: str, ip: str, helo: str | None,
                           mail_from: str | None, resolver: Resolver) -> str:
    """Check SPF, DKIM and DMARC for one received message; return our
    ``Authentication-Results: <authserv_id>; spf=…; dkim=…; dmarc=…`` field (RFC 8601, without
    line end). Blocking (DNS), at most :data:`CHECK_SECONDS` of lookups and one more; the
    listener runs it on its own threads.

    ``mail_from`` is the envelope sender (``""`` or None for the null sender of bounces, when
    SPF checks the HELO identity, RFC 7208 section 2.3). A message without a DKIM signature
    gets ``dkim=none``; DNS that cannot answer gives ``temperror``.
    """
    resolver = _Budgeted(resolver, time.monotonic() + CHECK_SECONDS)
    token = _checking.set(resolver)
    try:
        sender = mail_from or ""
        try:
            result, _ = spf.check2(i=ip, s=sender, h=helo or "", querytime=20)
        except spf.PermError:  # a client address pyspf cannot read
            result = "permerror"
        signed = _DKIM_FIELD.search(_head_and_rest(raw)[0]) is not None

        def field(mailfrom: str, *, dkim: str | None) -> str:
            spf_result = (authres.SPFAuthenticationResult(result=result, smtp_mailfrom=mailfrom)
                          if sender else
                          authres.SPFAuthenticationResult(result=result, smtp_helo=helo or ""))
            known: list[Any] = [spf_result]
            if dkim is not None:
                known.append(authres.DKIMAuthenticationResult(result=dkim))
            return str(authres.AuthenticationResultsHeader(authserv_id=authserv_id,
                                                           results=known))

        # authheaders aligns DMARC on the whole MAIL FROM and then reports only its domain
        # (RFC 8601 section 2.7.2 lets the local part go); the fallbacks report the same.
        domain = sender.rpartition("@")[2].lower()
        unsigned = None if signed else "none"
        dnsfunc = _txt_function(resolver)
        try:
            full = _library_verdict(raw, authserv_id, field(sender, dkim=unsigned), dkim=signed,
                                    dmarc=True, dnsfunc=dnsfunc)
            dmarc = "permerror"  # what a message DMARC cannot be evaluated on gets (no From)
        except dns.exception.DNSException:
            full, dmarc = None, "temperror"  # the DMARC record could not be read
        if full is not None:
            return full
        partial = _library_verdict(raw, authserv_id, field(domain, dkim=unsigned), dkim=signed,
                                   dmarc=False, dnsfunc=dnsfunc)
        if partial is None:
            partial = field(domain, dkim="permerror" if signed else "none")
        return f"{partial}; dmarc={dmarc}"
    finally:
        _checking.reset(token)


def _library_verdict(raw: bytes, authserv_id: str, prev: str, *, dkim: bool, dmarc: bool,
                     dnsfunc: Callable[..., str | None]) -> str | None:
    """authheaders' field for ``raw``, or None when it fails on a malformed message.

    Raises:
        dns.exception.DNSException: a lookup could not be answered.
    """
    try:
        return authheaders.authenticate_message(raw, authserv_id, prev=prev, spf=False,
                                                dkim=dkim, dmarc=dmarc, dnsfunc=dnsfunc)
    except dns.exception.DNSException:
        raise
    except Exception:  # it has no error type of its own: a missing From, unparseable headers
        return None


def _head_and_rest(raw: bytes) -> tuple[bytes, bytes]:
    """The header fields (each with its line end) and the rest (the blank line and body)."""
    ends = [(i, n) for i, n in ((raw.find(b"\r\n\r\n"), 2), (raw.find(b"\n\n"), 1)) if i >= 0]
    if not ends:
        return raw, b""
    i, n = min(ends)
    return raw[:i + n], raw[i + n:]


def without_our_results(raw: bytes, authserv_id: str) -> bytes:
    """``raw`` without the Authentication-Results fields that claim ``authserv_id`` (RFC 8601
    section 5: a receiver removes those it did not add, or they could be forged), and without
    those holding bytes outside ASCII, which a reader decoding them otherwise could take for
    ours (a leading 0xA0 is a no-break space in windows-1252: found by an attack). Other fields
    and the body are left byte for byte."""
    head, rest = _head_and_rest(raw)
    fields: list[bytes] = []
    for line in head.splitlines(keepends=True):
        if fields and line[:1] in (b" ", b"\t"):
            fields[-1] += line  # a folded continuation (RFC 5322 section 2.2.3)
        else:
            fields.append(line)
    ours = authserv_id.lower()
    kept = []
    for field in fields:
        name, _, value = field.partition(b":")
        if name.strip().lower() == b"authentication-results" and (
                not value.isascii() or _claims(value, ours)):
            continue  # ours, or one that other readers could read as ours (a 0xA0 before it)
        kept.append(field)
    return b"".join(kept) + rest


def _claims(value: bytes, ours: str) -> bool:
    """Whether an Authentication-Results value names ``ours`` as its authserv-id, read as
    ingest's trust code reads it (comments dropped, ``shared.mail.auth_results``) or with its
    encoded words decoded: a comment before the id or an encoded id got past a comparison of
    the first token and was believed (found by an attack)."""
    text = value.decode("utf-8", "replace").replace("\r", " ").replace("\n", " ")
    readings = [text]
    with contextlib.suppress(HeaderParseError, LookupError, ValueError):
        readings.append(str(make_header(decode_header(text))))
    for reading in readings:
        parsed = parse_auth_results(reading)
        head = reading.split(";", 1)[0].split()
        if (parsed is not None and parsed.authserv_id == ours) or (
                head and head[0].lower() == ours):
            return True
    return False


class _Listener(SMTP):
    """aiosmtpd's SMTP session with :data:`MAX_LINE_BYTES` lines and a HELO/EHLO name checked:
    the name is written into the ``Received:`` field of stored mail, and one holding a CR made
    a field of its own there (a forged From, or Authentication-Results under our own id; found
    by an attack)."""

    line_length_limit = MAX_LINE_BYTES

    async def smtp_HELO(self, hostname: str) -> None:
        if not _printable(hostname):
            await self.push("501 5.5.2 Syntax: HELO hostname (no control characters)")
            return
        await super().smtp_HELO(hostname)

    async def smtp_EHLO(self, hostname: str) -> None:
        if not _printable(hostname):
            await self.push("501 5.5.2 Syntax: EHLO hostname (no control characters)")
            return
        await super().smtp_EHLO(hostname)


def _printable(hostname: str) -> bool:
    return hostname.isprintable() and len(hostname) <= 255


def _client_address(session: Session) -> str:
    """The client's IP address (aiosmtpd's peer is ``(host, port)`` on TCP)."""
    return session.peer[0] if isinstance(session.peer, tuple) else str(session.peer)


class _Handler:
    """aiosmtpd handler: the RCPT and DATA rungs of the module docstring."""

    def __init__(self, pool: Database, redis: Redis | None, *, authserv_id: str,
                 resolver: Resolver, trust_policy: TrustPolicy, namespace: str) -> None:
        self.pool = pool
        self.redis = redis
        self.namespace = namespace
        self.authserv_id = authserv_id
        self.resolver = resolver
        self.trust_policy = trust_policy
        self.checking: dict[str, int] = {}  # messages being checked, by client address
        self.checks = ThreadPoolExecutor(max_workers=CHECK_THREADS,
                                         thread_name_prefix="smtp-checks")
        self.large = asyncio.Lock()  # held while a message over LARGE_MESSAGE_BYTES is handled
        self.unknown = MovingWindowRateLimiter(MemoryStorage())
        self.unknown_per_minute = RateLimitItemPerMinute(MAX_UNKNOWN_RECIPIENTS_PER_MINUTE)

    async def handle_RCPT(self, server: SMTP, session: Session, envelope: Envelope,
                          address: str, rcpt_options: list[str]) -> str:
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            return "452 4.5.3 Too many recipients"
        client = _client_address(session)
        if not self.unknown.test(self.unknown_per_minute, client):
            return "450 4.7.1 Too many unknown recipients from this client, try again later"
        try:
            async with self.pool.acquire() as conn:
                identity = await identity_of_address(conn, address)
        except (asyncpg.PostgresError, OSError, PylotaError):
            return "451 4.3.0 Temporary failure, try again later"
        if identity is None or identity.status not in _RECEIVING:
            self.unknown.hit(self.unknown_per_minute, client)
            if not self.unknown.test(self.unknown_per_minute, client):
                log.warning("smtp_unknown_recipients_limited", client=client)
            return "550 5.1.1 No such mailbox here"
        identities: dict[str, str] = getattr(envelope, "identities", {})
        identities.setdefault(identity.id, address)
        envelope.identities = identities  # type: ignore[attr-defined]
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        ip = _client_address(session)
        # aiosmtpd gives the null reverse-path of MAIL FROM:<> as "<>"
        mail_from = "" if envelope.mail_from in (None, "", "<>") else envelope.mail_from
        if bare_cr_in_header(raw):
            # dkimpy reads a bare CR as part of a line, the email package as a line break:
            # fields hidden that way were shown unsigned under a DKIM pass (found by an attack)
            return "550 5.6.0 A bare CR in the header: lines must end with CRLF (RFC 5322 2.3)"
        # Checking and storing a message takes about 20 times its size in memory at its peak:
        # large ones take turns, so the listener's peak is one large message's, not several's.
        async with self.large if len(raw) > LARGE_MESSAGE_BYTES else contextlib.nullcontext():
            return await self._check_and_store(session, envelope, raw, ip, mail_from)

    async def _check_and_store(self, session: Session, envelope: Envelope, raw: bytes, ip: str,
                               mail_from: str) -> str:
        if self.checking.get(ip, 0) >= MAX_CHECKS_PER_CLIENT:
            return "451 4.7.0 Too many messages from this client at once, try again later"
        self.checking[ip] = self.checking.get(ip, 0) + 1
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self.checks, functools.partial(
                    authentication_results, raw, authserv_id=self.authserv_id, ip=ip,
                    helo=session.host_name, mail_from=mail_from, resolver=self.resolver))
        finally:
            self.checking[ip] -= 1
            if not self.checking[ip]:
                del self.checking[ip]
        protocol = "ESMTP" if session.extended_smtp else "SMTP"
        # A message without Message-ID gets one, as a receiving MTA may (RFC 5321 section
        # 6.3): without it a reply could not say what it answers, and the other side could not
        # thread it (found by a new user; Python's smtplib sends none). Made from the bytes, so
        # the same message delivered again gets the same id and is stored once.
        minted = "" if _MESSAGE_ID.search(header_block(raw)) else \
            f"Message-ID: <{_digest(raw)}@{self.authserv_id}>\r\n"
        trace = (f"Received: from {session.host_name or 'unknown'} ([{ip}])\r\n"
                 f"\tby {self.authserv_id} (Pylota Mail) with {protocol}"
                 f"{'S' if session.ssl else ''}; {format_datetime(datetime.now(UTC))}\r\n"
                 f"{results}\r\n{minted}").encode("utf-8", "replace")
        stored = trace + without_our_results(raw, self.authserv_id)
        identities: dict[str, str] = getattr(envelope, "identities", {})
        try:
            for identity_id in identities:
                async with self.pool.acquire() as conn:
                    outcome, _ = await ingest_raw(conn, self.redis, identity_id, stored,
                                                  original=raw, trust_policy=self.trust_policy,
                                                  namespace=self.namespace, arrived=True)
                    # A DSN is sent with the null reverse-path (RFC 5321 section 4.5.5); a
                    # "report" from an ordinary sender, such as another recipient of the same
                    # message, suppressed whoever it named (found by an attack).
                    bounced = await absorb_report(conn, identity_id, stored) \
                        if not mail_from else 0
                log.info("smtp_received", identity_id=identity_id, message_id=outcome.message_id,
                         duplicate=outcome.duplicate, bounces=bounced)
        except (asyncpg.PostgresError, OSError, RedisError, PylotaError) as exc:
            log.warning("smtp_not_stored", error=type(exc).__name__)
            return "451 4.3.0 Temporary failure, try again later"
        except Exception as exc:
            # A bug of ours on this message: a temporary failure, so the sender tries again and
            # no recipient's copy is lost (those stored already come back as duplicates).
            # aiosmtpd's own answer was a permanent 500 naming the exception (found by an
            # attack); only the type is logged, never the mail.
            log.error("smtp_store_failed", error=type(exc).__name__)
            return "451 4.3.0 Temporary failure, try again later"
        return "250 2.0.0 OK: stored"


_MESSAGE_ID = re.compile(rb"^message-id[ \t]*:", re.IGNORECASE | re.MULTILINE)


def _digest(raw: bytes) -> str:
    """32 hex digits of the message's bytes, line endings aside (as ingest's duplicate check)."""
    return hashlib.sha256(raw.replace(b"\r\n", b"\n").rstrip(b"\n")).hexdigest()[:32]


@contextlib.asynccontextmanager
async def smtp_listener(settings: Settings, pool: Database, redis: Redis | None, *,
                        authserv_id: str, resolver: Resolver | None = None,
                        host: str | None = None, port: int | None = None
                        ) -> AsyncIterator[tuple[str, int]]:
    """Listen on ``host``:``port`` (default ``PM_SMTP_LISTEN_HOST``:``PM_SMTP_LISTEN_PORT``;
    port 0 picks a free one) in this event loop; yields the bound ``(host, port)``.

    ``authserv_id`` names this receiver in Authentication-Results (and in its greeting); trust
    code downstream believes only results under that id. ``resolver`` defaults to the system's.
    """
    # Ingest believes the results this listener just wrote (and the configured border MTAs'); it
    # needs no DNS of its own, the listener checked DKIM already.
    trusted = TrustPolicy.from_settings(settings).trusted_authserv_ids
    handler = _Handler(pool, redis, authserv_id=authserv_id,
                       resolver=resolver if resolver is not None else _SYSTEM,
                       trust_policy=TrustPolicy(trusted_authserv_ids=trusted,
                                                own_authserv_id=authserv_id.lower()),
                       namespace=settings.pm_namespace)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Listener(handler, data_size_limit=settings.pm_smtp_max_message_bytes,
                          hostname=authserv_id, ident="Pylota Mail", enable_SMTPUTF8=True,
                          loop=loop),
        host if host is not None else settings.pm_smtp_listen_host,
        port if port is not None else settings.pm_smtp_listen_port)
    try:
        bound = server.sockets[0].getsockname()
        yield bound[0], bound[1]
    finally:
        server.close()
        await server.wait_closed()
        handler.checks.shutdown(wait=False, cancel_futures=True)


async def serve_smtp(settings: Settings, *, authserv_id: str,
                     resolver: Resolver | None = None) -> None:
    """Run the listener until cancelled, with its own PostgreSQL pool and Redis client (what
    ``pylota smtp`` and the compose service run).

    Raises:
        PylotaError: ``unavailable`` when PostgreSQL cannot be reached at start.
        OSError: the address cannot be bound.
    """
    pool = await open_database(settings.database_url, size=settings.pm_db_pool_size,
                               acquire_seconds=settings.pm_db_acquire_seconds,
                               statement_timeout_seconds=settings.pm_db_statement_timeout_seconds)
    redis = Redis.from_url(settings.redis_url)
    try:
        async with smtp_listener(settings, pool, redis, authserv_id=authserv_id,
                                 resolver=resolver) as (host, port):
            log.info("smtp_listening", host=host, port=port, authserv_id=authserv_id)
            await asyncio.Event().wait()
    finally:
        await redis.aclose()
        await pool.close()
