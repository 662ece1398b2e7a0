"""DKIM signatures (RFC 6376) verified at ingest, with dkimpy, through a resolver the caller gives.

:func:`verify_dkim` checks each ``DKIM-Signature`` field of a raw message. The keys are looked up
first, through a :class:`TxtResolver` (the DNS in production, :class:`DnsResolver`; a table in
tests), and dkimpy then verifies against those answers, so no lookup happens inside dkimpy and a
slow DNS costs at most one bounded wait per signature. Results, per RFC 8601 section 2.7.1:

- ``pass``: the signature verifies with the published key;
- ``fail``: a key was found and the signature or the body hash does not match it (the message was
  changed after signing, or the signature is forged);
- ``permerror``: the signature cannot be checked: malformed, no key published (typical of old
  mail whose keys were rotated away, so it is not evidence of forgery), a key too short
  (under 1,024 bits) or unreadable;
- ``temperror``: the DNS did not answer.

Called by ``shared.mail.trust`` before the message's transaction opens: never with a lock held.
"""

from __future__ import annotations

import logging
from typing import Literal, Protocol

import dkim
import dkim.util
import dns.asyncresolver
import dns.exception
import dns.resolver
import msgspec

__all__ = ["MAX_SIGNATURES", "DkimCheck", "DnsResolver", "TemporaryDnsError", "TxtResolver",
           "verify_dkim"]

#: Signatures checked per message; real mail carries one to three (author, ESP, list).
MAX_SIGNATURES = 5

# dkimpy logs its reasons through the logger it is given; they name selectors and domains of
# mail, which our logs never carry (spec section 7).
_DKIMPY_LOG = logging.getLogger("shared.mail.signatures.dkimpy")
_DKIMPY_LOG.addHandler(logging.NullHandler())
_DKIMPY_LOG.propagate = False


class TemporaryDnsError(Exception):
    """The DNS did not answer in time or failed on its side; the lookup may work later."""


class TxtResolver(Protocol):
    """Looks up DNS TXT records (``DnsResolver`` in production, a table in tests)."""

    async def txt(self, name: str) -> bytes | None:
        """The TXT record at ``name`` (its character-strings joined), or None when the name or
        its TXT record does not exist. Raises :class:`TemporaryDnsError` when the DNS fails."""
        ...


class DnsResolver:
    """:class:`TxtResolver` over the DNS with dnspython's asyncio resolver: the system's
    nameservers (``/etc/resolv.conf``) unless ``nameservers`` are given, ``timeout`` seconds per
    lookup in all, answers cached (by their TTL) in the process."""

    def __init__(self, *, timeout: float = 3.0, nameservers: list[str] | None = None,
                 port: int = 53) -> None:
        self._resolver = dns.asyncresolver.Resolver(configure=nameservers is None)
        if nameservers is not None:
            self._resolver.nameservers = nameservers
            self._resolver.port = port
        self._resolver.lifetime = timeout
        self._resolver.cache = dns.resolver.LRUCache(4096)

    async def txt(self, name: str) -> bytes | None:
        try:
            answer = await self._resolver.resolve(name, "TXT")
        except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
            return None
        except dns.exception.DNSException as exc:
            raise TemporaryDnsError(type(exc).__name__) from exc
        return b"".join(answer[0].strings)  # type: ignore[attr-defined]


class DkimCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One DKIM-Signature's outcome: the signing ``domain`` (``d=``), ``selector`` (``s=``) and
    ``result`` (module docstring)."""

    domain: str
    selector: str
    result: Literal["pass", "fail", "permerror", "temperror"]


def _text(value: bytes | None) -> str:
    return (value or b"").decode("ascii", "replace").strip().lower()


async def verify_dkim(raw: bytes, resolver: TxtResolver) -> list[DkimCheck]:
    """Check the first :data:`MAX_SIGNATURES` DKIM-Signature fields of ``raw``, top first.

    Returns one :class:`DkimCheck` per field; empty when the message has none or its header
    cannot be read. Never raises for bad mail or a failing DNS.
    """
    try:
        signer = dkim.DKIM(raw, logger=_DKIMPY_LOG, minkey=1024)
    except Exception:  # noqa: BLE001 - dkimpy raises IndexError and others on hostile headers
        return []
    fields = [v for n, v in signer.headers if n.lower() == b"dkim-signature"][:MAX_SIGNATURES]
    checks = []
    for idx, value in enumerate(fields):
        try:
            tags = dkim.util.parse_tag_value(value)
        except Exception:  # noqa: BLE001 - InvalidTagValueList, and dkimpy's own slips
            tags = {}
        domain, selector = _text(tags.get(b"d")), _text(tags.get(b"s"))
        checks.append(DkimCheck(domain=domain, selector=selector,
                                result=await _check(signer, idx, tags, resolver)))
    return checks


async def _check(signer: dkim.DKIM, idx: int, tags: dict[bytes, bytes],
                 resolver: TxtResolver) -> Literal["pass", "fail", "permerror", "temperror"]:
    try:
        # Malformed or expired (x=) signatures are permerror, not fail: nothing was forged.
        dkim.validate_signature_fields(tags)
    except dkim.DKIMException:
        return "permerror"
    name = f"{_text(tags[b's'])}._domainkey.{_text(tags[b'd'])}."
    try:
        record = await resolver.txt(name)
    except TemporaryDnsError:
        return "temperror"
    if not record:
        return "permerror"
    try:
        dkim.evaluate_pk(name.encode(), record)
    except Exception:  # noqa: BLE001 - a hostile record: DKIMException, or dkimpy slipping
        return "permerror"
    try:
        verified = signer.verify(idx, dnsfunc=lambda _name, timeout=0: record)
    except dkim.ValidationError:
        return "fail"  # the body hash does not match: changed after signing
    except Exception:  # noqa: BLE001 - DKIMException, and dkimpy's slips on hostile mail
        return "permerror"
    return "pass" if verified else "fail"
