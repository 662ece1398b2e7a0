"""mail_sign_http_request's domain: Web Bot Auth headers, and the key directory verifiers fetch.

Follows RFC 9421 (HTTP Message Signatures) as profiled by draft-ietf-webbotauth-httpsig-protocol
("HTTP Message Signatures for automated traffic", the Web Bot Auth working group's draft):

- ``Signature-Agent`` is a Dictionary with one member, keyed by the signature's label, whose value
  is this deployment's origin ``https://{PM_API_HOST}``; with no ``type`` parameter it means
  ``directory``: a verifier fetches :data:`DIRECTORY_PATH` at that origin.
- ``Signature-Input`` carries ``created``, ``keyid`` (the key's RFC 7638 thumbprint), ``alg``
  (``ed25519``), ``expires``, a random ``nonce`` and ``tag="web-bot-auth"``, in the order of the
  draft's test vectors, over ``@authority``, ``"signature-agent";key="sig1"`` and ``from``, plus
  ``@method``, ``@path`` and ``@query`` on request.
- ``From`` (RFC 9110 section 10.1.2) is the identity's address.
- The directory is a JWK Set served as ``application/http-message-signatures-directory+json``,
  with one signature per published key over ``"@authority";req`` and ``content-digest``
  (``tag="http-message-signatures-directory"``), the draft's possession proof.

What this module does not decide: ``web_bot_auth_disabled`` (PM_WEB_BOT_AUTH off) and
``policy_denied`` (the tenant has not allowed signed requests) are checked by the caller before
:func:`sign_http_request`, as spec section 4.3 orders them. Nothing is stored; signatures are
never logged.
"""

from __future__ import annotations

import base64
import ipaddress
import re
import os
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Final
from urllib.parse import SplitResult, urlsplit

import asyncpg
import http_sf
import idna
import msgspec

from shared.errors import invalid
from shared.signing.keys import (CACHE_MAX_AGE, Instant, KeyPurpose, Signer, WellKnownDocument,
                                 active_signer, jwk_x, published_signers)
from shared.signing.rfc9421 import (ED25519, Component, sign, signature_fields,
                                    content_digest)

__all__ = [
    "TAG", "DIRECTORY_TAG", "DIRECTORY_PATH", "DIRECTORY_MEDIA_TYPE", "LABEL",
    "ALWAYS_SIGNED", "OPTIONAL_COMPONENTS", "EXPIRES_IN_MIN", "EXPIRES_IN_MAX",
    "EXPIRES_IN_DEFAULT", "DIRECTORY_SIGNATURE_LIFETIME",
    "SignatureHeaders", "SignedRequest", "signature_agent", "sign_http_request",
    "directory_document", "signed_directory",
]

#: The ``tag`` of a Web Bot Auth request signature.
TAG: Final = "web-bot-auth"
#: The ``tag`` of the directory's possession proof.
DIRECTORY_TAG: Final = "http-message-signatures-directory"
#: Where a verifier fetches the keys (the draft's well-known URI).
DIRECTORY_PATH: Final = "/.well-known/http-message-signatures-directory"
#: The directory's media type (the draft's IANA registration).
DIRECTORY_MEDIA_TYPE: Final = "application/http-message-signatures-directory+json"
#: The label of the one signature, and the key of its ``Signature-Agent`` member.
LABEL: Final = "sig1"
#: Components signed on every call (spec section 4.3), in signing order.
ALWAYS_SIGNED: Final = ("@authority", "signature-agent", "from")
#: Components signed when ``components`` names them.
OPTIONAL_COMPONENTS: Final = ("@method", "@path", "@query")
#: Bounds and default of ``expires_in`` in seconds (spec section 4.3).
EXPIRES_IN_MIN: Final = 30
EXPIRES_IN_MAX: Final = 300
EXPIRES_IN_DEFAULT: Final = 60
#: How long the directory's possession proof stays valid. The draft's deployment guidance
#: prefers long proofs (republishing, not short expiry, is what revokes); a day keeps a copied
#: directory from vouching for a dropped key for longer than that.
DIRECTORY_SIGNATURE_LIFETIME: Final = timedelta(days=1)

#: Characters never valid in a URL sent on the wire; urlsplit would silently drop tabs and
#: newlines, so they are refused before parsing.
_FORBIDDEN_URL_CHARS = frozenset(chr(c) for c in range(0x21)) | {"\x7f"}


class SignatureHeaders(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The four headers to attach to the request unchanged (spec section 4.3 output)."""

    signature_agent: str = msgspec.field(name="Signature-Agent")
    from_: str = msgspec.field(name="From")
    signature_input: str = msgspec.field(name="Signature-Input")
    signature: str = msgspec.field(name="Signature")


class SignedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """mail_sign_http_request's result: ``{headers, expires_at}`` (spec section 4.3)."""

    headers: SignatureHeaders
    expires_at: Instant


class _DirectoryKey(msgspec.Struct, frozen=True):
    # Field order is the draft's test vector's: the body is signed byte for byte.
    kty: str
    crv: str
    kid: str
    x: str
    use: str


class _Directory(msgspec.Struct, frozen=True):
    keys: list[_DirectoryKey]


def _authority(host: str, port: int | None) -> str:
    """RFC 9421 section 2.2.3: host lower-cased (an IDN as its A-label, IDNA 2008 with UTS 46
    mapping), an IPv6 literal in brackets, the default port 443 left out.

    Raises:
        idna.IDNAError: a non-ASCII host that IDNA refuses.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        name = _ascii_host(host) if host.isascii() else idna.encode(host, uts46=True).decode(
            "ascii")
    else:
        name = f"[{address.compressed}]" if address.version == 6 else address.compressed
    return name if port in (None, 443) else f"{name}:{port}"


_LDH_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


def _ascii_host(host: str) -> str:
    """An ASCII host name lower-cased, when it is one (RFC 1123 section 2.1: labels of letters,
    digits and inner hyphens, 1 to 63 characters, 253 in all; an A-label must decode, IDNA
    2008).

    Raises:
        idna.IDNAError: an empty label (``a..b``, ``.example.com``), a character or length no host
            name may have, or an A-label that is not one (``xn--``).
    """
    name = host.lower()
    labels = name.removesuffix(".").split(".")  # a trailing dot (the root) is kept as sent
    if len(name) > 254 or not all(_LDH_LABEL.fullmatch(label) for label in labels):
        raise idna.IDNAError(f"not a host name: {host[:80]!r}")
    for label in labels:
        if label.startswith("xn--"):
            idna.decode(label)  # raises for an A-label that decodes to no valid U-label
    return name


def signature_agent(api_host: str) -> str:
    """The origin named in ``Signature-Agent``: ``https://`` and ``api_host``'s authority
    (PM_API_HOST, which may carry a port)."""
    parts = urlsplit(f"https://{api_host}")
    return f"https://{_authority(parts.hostname or '', parts.port)}"


def _parse_url(url: str) -> tuple[SplitResult, int | None]:
    if _FORBIDDEN_URL_CHARS & set(url):
        raise invalid("url", "The url contains a space or a control character.",
                      "Percent-encode spaces and control characters in url (%20).")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # "Invalid IPv6 URL": a bracketed host that is no IPv6 address
        raise invalid("url", "The url's host in brackets is not an IPv6 address.",
                      "Write an IPv6 host as https://[2001:db8::1]/, or use a domain name."
                      ) from exc
    try:
        port = parts.port
        usable = port != 0  # reserved; no server listens on it (RFC 6335 section 6)
    except ValueError:  # past 65535, or not a number
        usable = False
    if not usable:
        raise invalid("url", "The url's port is not a number from 1 to 65535.",
                      "Fix the port in url, or leave it out for 443.")
    if not parts.hostname:
        raise invalid("url", "The url has no host.",
                      "Pass a full URL such as https://example.com/.")
    if parts.username is not None or parts.password is not None:
        raise invalid("url", "The url carries user information (user@host), which an https"
                      " request never sends (RFC 9110 section 4.2.4).",
                      "Remove the user:password@ part from url.")
    return parts, port


def _ascii(path: str, name: str, value: str, fix: str) -> str:
    if not value.isascii():
        raise invalid(path, f"The {name} value to sign is not ASCII.", fix)
    return value


_PERCENT_ENCODE = ("Percent-encode the non-ASCII characters of url (as UTF-8), exactly as your HTTP"
                   " client will send them, or leave {} out of components.")


def _request_components(url: str, method: str | None, components: Sequence[str],
                        agent: str, from_: str) -> list[Component]:
    parts, port = _parse_url(url)
    try:
        authority = _authority(parts.hostname or "", port)
    except idna.IDNAError as exc:
        raise invalid("url", "The url's host is not a valid internationalized domain name.",
                      "Pass the host as a valid domain name or its A-label (xn--…).") from exc
    values = {
        "@authority": Component("@authority", authority),
        "signature-agent": Component("signature-agent", http_sf.ser(agent), {"key": LABEL}),
        "from": Component("from", _ascii(
            "identity", "From", from_,
            "Use an identity whose address is ASCII: From is always signed and cannot carry"
            " this address.")),
    }
    wanted = set(components)
    if "@method" in wanted:
        if method is None:
            raise invalid("method", "components has @method but method is missing.",
                          "Pass method (for example GET), or drop @method from components.")
        values["@method"] = Component("@method", method)
    if "@path" in wanted:
        values["@path"] = Component("@path", _ascii("url", "@path", parts.path or "/",
                                                    _PERCENT_ENCODE.format("@path")))
    if "@query" in wanted:
        values["@query"] = Component("@query", _ascii("url", "@query", f"?{parts.query}",
                                                      _PERCENT_ENCODE.format("@query")))
    return [values[name] for name in ALWAYS_SIGNED + OPTIONAL_COMPONENTS if name in values]


def _now(now: datetime | None) -> datetime:
    return now if now is not None else datetime.now(timezone.utc)


async def sign_http_request(conn: asyncpg.Connection, *, secret: str, api_host: str,
                            address: str, url: str, method: str | None = None,
                            components: Sequence[str] = (),
                            expires_in: int = EXPIRES_IN_DEFAULT,
                            now: datetime | None = None) -> SignedRequest:
    """Web Bot Auth headers for a request to ``url`` by the identity whose address is
    ``address`` (spec section 4.3, mail_sign_http_request).

    Args:
        conn: a connection; the key is made on first use.
        secret: PM_SIGNING_SECRET.
        api_host: PM_API_HOST; ``Signature-Agent`` is ``https://{api_host}``.
        address: the identity's address, sent as ``From`` and signed.
        url: the request's URL, already matched ``^https://`` by the tool's schema.
        method: the request method; required when ``components`` has ``@method``.
        components: any of :data:`ALWAYS_SIGNED` and :data:`OPTIONAL_COMPONENTS`; the first
            three are signed whatever it says.
        expires_in: seconds, :data:`EXPIRES_IN_MIN` to :data:`EXPIRES_IN_MAX` (checked at
            decode).
        now: the signing time (default: the clock); tests pass it.

    Returns:
        The four headers and ``expires_at`` (``created`` + ``expires_in``, whole seconds, UTC).

    Raises:
        PylotaError: ``invalid_request`` with ``details.path`` ``url`` (a space or control
            character, no host, a bad port, user information, an IDN host IDNA refuses, a
            non-ASCII ``@path`` or ``@query`` that is to be signed), ``method`` (``@method``
            without ``method``) or ``identity`` (a non-ASCII address); ``unavailable`` when
            PM_SIGNING_SECRET is unset or does not decrypt the key.
    """
    agent = signature_agent(api_host)
    covered = _request_components(url, method, components, agent, address)
    signer = await active_signer(conn, KeyPurpose.HTTP_SIGNATURE, secret, now=now)
    created = int(_now(now).timestamp())
    expires = created + expires_in
    signature = sign(signer.private_key, LABEL, covered, {
        "created": created, "keyid": signer.kid, "alg": ED25519, "expires": expires,
        # RFC 9421 section 7.2.2: lets a verifier that keeps nonces refuse a replay
        "nonce": base64.b64encode(os.urandom(32)).decode("ascii"), "tag": TAG,
    })
    fields = signature_fields([signature])
    return SignedRequest(
        headers=SignatureHeaders(signature_agent=http_sf.ser({LABEL: agent}), from_=address,
                                 signature_input=fields["Signature-Input"],
                                 signature=fields["Signature"]),
        expires_at=datetime.fromtimestamp(expires, timezone.utc))


def signed_directory(signers: Sequence[Signer], authority: str, *, created: int,
                     expires: int) -> WellKnownDocument:
    """The directory of ``signers``' public keys, signed by each of them (pure).

    ``authority`` is the ``@authority`` of the request that fetches the directory (the
    Signature-Agent host). Labels are ``binding``, ``binding2``, … in key order. With no keys
    the body is ``{"keys":[]}`` and carries no signature.
    """
    body = msgspec.json.encode(_Directory(keys=[
        _DirectoryKey(kty="OKP", crv="Ed25519", kid=s.kid, x=jwk_x(s.public_key), use="sig")
        for s in signers]))
    headers = {"Content-Type": DIRECTORY_MEDIA_TYPE,
               "Cache-Control": f"public, max-age={int(CACHE_MAX_AGE.total_seconds())}"}
    if signers:
        digest = content_digest(body)
        covered = [Component("@authority", authority, {"req": True}),
                   Component("content-digest", digest)]
        headers["Content-Digest"] = digest
        headers |= signature_fields([
            sign(s.private_key, "binding" if i == 0 else f"binding{i + 1}", covered,
                 {"created": created, "expires": expires, "keyid": s.kid, "tag": DIRECTORY_TAG})
            for i, s in enumerate(signers)])
    return WellKnownDocument(body=body, headers=headers)


async def directory_document(conn: asyncpg.Connection, *, secret: str, api_host: str,
                             now: datetime | None = None) -> WellKnownDocument:
    """What ``GET`` :data:`DIRECTORY_PATH` answers: every published HTTP signature key (the
    active one and retired ones in their grace), with the possession proof valid for
    :data:`DIRECTORY_SIGNATURE_LIFETIME`.

    Raises:
        PylotaError: ``unavailable`` when PM_SIGNING_SECRET is unset or does not decrypt a key
            (the proof needs the private keys).
    """
    signers = await published_signers(conn, KeyPurpose.HTTP_SIGNATURE, secret, now=now)
    created = int(_now(now).timestamp())
    return signed_directory(
        signers, signature_agent(api_host).removeprefix("https://"), created=created,
        expires=created + int(DIRECTORY_SIGNATURE_LIFETIME.total_seconds()))
