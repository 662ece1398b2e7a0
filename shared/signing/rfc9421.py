"""HTTP Message Signatures (RFC 9421) with Ed25519: signature bases, signatures and their fields.

Pure: no I/O and no knowledge of Web Bot Auth; ``shared.signing.web_bot_auth`` chooses the
components and parameters. Structured Field serialization (RFC 9651) is the ``http_sf`` library's,
so component identifiers, ``@signature-params`` and the ``Signature-Input``/``Signature``
dictionaries are serialized by one implementation.

Callers pass component values already as they appear on the wire, ASCII only (RFC 9421 section
2.1 works on field values, which are ASCII here; a base that is not ASCII fails to encode).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import http_sf
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

__all__ = ["ED25519", "Component", "Signature", "signature_base", "sign", "signature_fields",
           "content_digest"]

#: RFC 9421 section 6.2.2: the registered name of Ed25519 (the ``alg`` parameter).
ED25519 = "ed25519"


class Component(NamedTuple):
    """A covered component (RFC 9421 section 2): its name (``@authority``, ``from``), its value
    as the verifier will compute it, and its parameters (``{"key": "sig1"}`` for a Dictionary
    member, ``{"req": True}`` for a request component in a response signature)."""

    name: str
    value: str
    params: Mapping[str, str | bool] = {}


class Signature(NamedTuple):
    """One signature: its label, its ``@signature-params`` inner list as ``http_sf`` values,
    and the 64 signature bytes."""

    label: str
    params: tuple[list[tuple[str, dict[str, str | bool]]], dict[str, int | str]]
    value: bytes


def _inner_list(components: Sequence[Component], params: Mapping[str, int | str]
                ) -> tuple[list[tuple[str, dict[str, str | bool]]], dict[str, int | str]]:
    return [(c.name, dict(c.params)) for c in components], dict(params)


def signature_base(components: Sequence[Component], params: Mapping[str, int | str]) -> str:
    """The signature base of RFC 9421 section 2.5: one ``"<identifier>": <value>`` line per
    component, then the ``"@signature-params"`` line, joined by LF with no trailing LF.

    ``params`` are the signature parameters (section 2.3: ``created``, ``expires``, ``keyid``,
    ``alg``, ``nonce``, ``tag``) in the order they are to be serialized.
    """
    lines = [f"{http_sf.ser((c.name, dict(c.params)))}: {c.value}" for c in components]
    # The @signature-params value is the inner list exactly as Signature-Input carries it;
    # serializing it as a dictionary member and dropping "x=" keeps one serializer for both.
    inner = http_sf.ser({"x": _inner_list(components, params)})[2:]
    lines.append(f'"@signature-params": {inner}')
    return "\n".join(lines)


def sign(private_key: Ed25519PrivateKey, label: str, components: Sequence[Component],
         params: Mapping[str, int | str]) -> Signature:
    """Sign ``components`` with ``params`` under ``label`` (RFC 9421 sections 3.1 and 3.3.6).

    Raises:
        UnicodeEncodeError: a component value is not ASCII.
    """
    base = signature_base(components, params).encode("ascii")
    return Signature(label=label, params=_inner_list(components, params),
                     value=private_key.sign(base))


def signature_fields(signatures: Sequence[Signature]) -> dict[str, str]:
    """The ``Signature-Input`` and ``Signature`` fields carrying ``signatures`` (RFC 9421
    sections 4.1 and 4.2), one Dictionary member per label, in order."""
    return {
        "Signature-Input": http_sf.ser({s.label: s.params for s in signatures}),
        "Signature": http_sf.ser({s.label: s.value for s in signatures}),
    }


def content_digest(body: bytes) -> str:
    """The ``Content-Digest`` field of ``body`` with SHA-256 (RFC 9530 section 2)."""
    return http_sf.ser({"sha-256": hashlib.sha256(body).digest()})
