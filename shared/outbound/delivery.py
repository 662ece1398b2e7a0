"""Delivery of queued mail to the SMTP relay (RFC 5321), on workers, with ``aiosmtplib``.

:func:`deliver_due` takes due messages one at a time (``shared.outbound.outbox``), signs each
with DKIM when a signer is configured, and hands it to the relay in one SMTP transaction with the
identity's address as envelope sender (so bounces come back to the identity, and from there to
``shared.outbound.bounces``). Replies decide what happens next (RFC 5321 section 4.2.1):

- 2xx for a recipient: ``sent``.
- 5xx for a recipient, or for the whole transaction (MAIL, DATA): ``failed`` for good.
- 4xx, a refused or lost connection, a timeout, or refused credentials (an operator can fix
  those): the recipient stays pending and the message is ``deferred``, retried after
  ``retry_seconds``, then four times longer each time (at most :data:`MAX_RETRY_SECONDS`), until
  ``max_attempts`` attempts have been made; then the pending recipients are ``failed``.
- A recipient on the tenant's suppression list is ``suppressed`` and never offered.

**At-least-once.** A message is claimed with a lease before it is sent and marked ``sent`` after
the relay's 250. A worker killed in between leaves the claim, which lapses after the lease
(``lease_seconds``, by default four relay timeouts plus 30 s); the next worker sends the message
again with the same bytes and Message-ID (the DKIM-signed bytes of the first attempt are kept
and re-sent unchanged). If the relay had already accepted it, the recipient may get it twice:
the Message-ID, and the identical bytes, are the dedupe key relays, mail clients and our own
listener use for that. A kill before the relay's 250 (the common case: connecting, or the DATA
transfer) delivers exactly once.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Literal

import aiosmtplib
import asyncpg
import msgspec

from shared.db import Database
from shared.config import Settings
from shared.logs import get_logger
from shared.mail.store import raw_of
from shared.outbound.dkim_signing import DkimSigner
from shared.outbound.model import DeliveryStatus, RecipientStatus
from shared.outbound.outbox import Claim, claim_next, keep_signed, settle
from shared.outbound.suppression import suppressed

__all__ = ["MAX_RETRY_SECONDS", "RelayConfig", "retry_delay", "deliver_due"]

log = get_logger("shared.outbound.delivery")

#: Longest wait between two attempts (RFC 5321 section 4.5.4.1 asks for at least 30 minutes
#: between retries once the first few have failed, and for giving up after 4-5 days).
MAX_RETRY_SECONDS = 6 * 3600
SUPPRESSED_REPLY = "suppressed: an earlier message to this address bounced"


class RelayConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How to reach the relay and how long to keep trying.

    ``security``: ``none``, ``starttls`` (RFC 3207, required: the attempt fails temporarily when
    the relay does not offer it) or ``tls`` (implicit TLS, RFC 8314); the relay's certificate
    is verified, against ``ca_file`` when set. ``username`` empty means no AUTH. ``timeout`` is
    per SMTP command, in seconds. ``local_hostname`` is the EHLO name.
    """

    host: str
    port: int
    security: Literal["none", "starttls", "tls"] = "none"
    ca_file: str | None = None
    username: str = ""
    password: str = ""
    timeout: float = 30.0
    local_hostname: str | None = None
    max_attempts: int = 8
    retry_seconds: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RelayConfig:
        """The relay of ``PM_SMTP_RELAY_*``, with ``PM_API_HOST`` as EHLO name."""
        return cls(host=settings.pm_smtp_relay_host, port=settings.pm_smtp_relay_port,
                   security=settings.pm_smtp_relay_security,
                   ca_file=settings.pm_smtp_relay_ca_file or None,
                   username=settings.pm_smtp_relay_username,
                   password=settings.pm_smtp_relay_password,
                   timeout=settings.pm_smtp_relay_timeout, local_hostname=settings.pm_api_host,
                   max_attempts=max(1, settings.pm_smtp_max_attempts),
                   retry_seconds=max(0.0, settings.pm_smtp_retry_seconds))


def retry_delay(relay: RelayConfig, attempt: int) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first)."""
    return min(relay.retry_seconds * 4 ** (attempt - 1), MAX_RETRY_SECONDS)


class _Transmission(msgspec.Struct, kw_only=True):
    """What one SMTP transaction said: per-recipient acceptances and refusals, or a failure of
    the whole transaction (``error``, permanent when ``permanent``)."""

    accepted: list[str] = []
    reply: str | None = None
    refused: dict[str, tuple[int, str]] = {}
    error: str | None = None
    permanent: bool = False


def _reply(code: int, message: str) -> str:
    return f"{code} {' '.join(message.split())}"[:500]


async def _transmit(relay: RelayConfig, mail_from: str, recipients: list[str],
                    message: bytes) -> _Transmission:
    client = aiosmtplib.SMTP(
        hostname=relay.host, port=relay.port, use_tls=relay.security == "tls",
        start_tls=relay.security == "starttls", username=relay.username or None,
        password=relay.password or None, timeout=relay.timeout,
        local_hostname=relay.local_hostname, cert_bundle=relay.ca_file)
    try:
        # Bounded as a whole, so the attempt ends well within its lease.
        async with asyncio.timeout(relay.timeout * 3), client:
            refused, reply = await client.sendmail(mail_from, recipients, message)
    except aiosmtplib.SMTPRecipientsRefused as exc:
        return _Transmission(refused={r.recipient: (r.code, r.message) for r in exc.recipients})
    except aiosmtplib.SMTPAuthenticationError as exc:
        # Credentials are the deployment's to fix; the message is not at fault.
        return _Transmission(
            error=f"relay refused our credentials: {_reply(exc.code, exc.message)}")
    except aiosmtplib.SMTPResponseException as exc:
        return _Transmission(error=_reply(exc.code, exc.message), permanent=500 <= exc.code < 600)
    except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
        return _Transmission(error=f"relay unreachable: {type(exc).__name__}: {exc}"[:500])
    except UnicodeEncodeError:
        # An envelope address outside ASCII, which only SMTPUTF8 (RFC 6531) carries and we do
        # not ask for: no retry can send it. It failed the drain on every lease instead, the
        # message left "sending" (an identity made before addresses were checked; found by a
        # new user).
        return _Transmission(error="an envelope address is not ASCII, and the relay is not "
                                   "asked for SMTPUTF8", permanent=True)
    # sendmail returns only the text of DATA's reply; anything but 250 would have raised.
    return _Transmission(accepted=[r for r in recipients if r not in refused],
                         reply=_reply(250, reply),
                         refused={r: (resp.code, resp.message) for r, resp in refused.items()})


def _outcome(relay: RelayConfig, claim: Claim, targets: list[str], sent: _Transmission,
             outcomes: dict[str, tuple[RecipientStatus, str | None]]
             ) -> tuple[DeliveryStatus, str | None, datetime | None]:
    """Fill ``outcomes`` for ``targets`` and decide the message's status, last reply and retry."""
    for address in sent.accepted:
        outcomes[address] = ("sent", sent.reply)
    for address, (code, text) in sent.refused.items():
        outcomes[address] = ("failed" if 500 <= code < 600 else "pending", _reply(code, text))
    if sent.error is not None:
        for address in targets:
            outcomes[address] = ("failed" if sent.permanent else "pending", sent.error)
    last = sent.error or sent.reply or next((r for _, r in outcomes.values() if r), None)
    pending = [a for a, (state, _) in outcomes.items() if state == "pending"]
    if pending and claim.attempt < relay.max_attempts:
        retry = datetime.now(UTC) + timedelta(seconds=retry_delay(relay, claim.attempt))
        return "deferred", last, retry
    for address in pending:
        outcomes[address] = ("failed", f"gave up after {claim.attempt} attempts: "
                                       f"{outcomes[address][1]}")
    delivered = claim.delivered or any(state == "sent" for state, _ in outcomes.values())
    return ("sent" if delivered else "failed"), last, None


async def _deliver(pool: Database, relay: RelayConfig, dkim: DkimSigner | None,
                   claim: Claim) -> DeliveryStatus:
    async with pool.acquire() as conn:
        raw = claim.signed or await raw_of(conn, claim.message_id)
        blocked = await suppressed(conn, claim.tenant_id, claim.recipients)
        if raw is not None and claim.signed is None and dkim is not None:
            # Signed once and kept before it leaves: a retry, even after a crash, offers the
            # very same bytes, so receivers that dedupe by content see one message.
            raw = dkim.sign(raw)
            if not await keep_signed(conn, claim, raw):
                log.info("delivery", message_id=claim.message_id, attempt=claim.attempt,
                         stale=True)
                return "sending"  # another attempt holds it now; it sends, not this one
    outcomes: dict[str, tuple[RecipientStatus, str | None]] = {
        a: ("suppressed", SUPPRESSED_REPLY) for a in claim.recipients if a.lower() in blocked}
    targets = [a for a in claim.recipients if a.lower() not in blocked]
    if raw is None:
        sent = _Transmission(error="the stored message is gone", permanent=True)
    elif targets:
        sent = await _transmit(relay, claim.mail_from, targets, raw)
    else:
        sent = _Transmission()
    status, last_reply, retry_at = _outcome(relay, claim, targets, sent, outcomes)
    async with pool.acquire() as conn:
        held = await settle(conn, claim, recipients=outcomes, status=status,
                            last_reply=last_reply, retry_at=retry_at)
    log.info("delivery", message_id=claim.message_id, attempt=claim.attempt, status=status,
             recipients=len(claim.recipients), stale=not held)
    return status


async def deliver_due(pool: Database, relay: RelayConfig, *, dkim: DkimSigner | None = None,
                      limit: int = 50, lease_seconds: float | None = None) -> int:
    """Deliver up to ``limit`` due messages, one after another, each at most once per call
    (a message deferred by this call waits for the next), and return how many attempts were
    made (0 when nothing was due).

    ``lease_seconds`` is how long a claimed message stays claimed before another worker may
    take it again (default: four relay timeouts plus 30 s). Holds no pooled connection while
    talking to the relay. Raises nothing for relay trouble (it becomes the delivery state); a
    database failure propagates.
    """
    lease = lease_seconds if lease_seconds is not None else relay.timeout * 4 + 30
    tried: list[str] = []
    while len(tried) < limit:
        async with pool.acquire() as conn:
            claim = await claim_next(conn, lease_seconds=lease, skip=tried)
        if claim is None:
            break
        tried.append(claim.message_id)
        await _deliver(pool, relay, dkim, claim)
    return len(tried)
