"""mail_sign_http_request's headers and the signatures directory, verified by an independent
RFC 9421 implementation (the ``http-message-signatures`` package) with keys read from the
directory document, on the real PostgreSQL database."""

from __future__ import annotations

import base64
import json
import secrets
from datetime import datetime, timedelta, timezone

import httpx
import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from http_message_signatures import HTTPMessageVerifier, HTTPSignatureKeyResolver, algorithms
from http_message_signatures.exceptions import InvalidSignature

from shared.errors import ErrorCode, PylotaError
from shared.signing.keys import KeyPurpose, rotate_key
from shared.signing.web_bot_auth import (DIRECTORY_MEDIA_TYPE, DIRECTORY_PATH, DIRECTORY_TAG,
                                         TAG, directory_document, sign_http_request)
from tests.shared.signing.test_keys import rfc7638_thumbprint

SECRET = secrets.token_urlsafe(32)
HOST = "mail.pylota.test"
ADDRESS = "buyer@acme.example"
AGENT = f'sig1="https://{HOST}"'


class DirectoryKeys(HTTPSignatureKeyResolver):
    """Public keys by kid, read from a directory body as a verifier would."""

    def __init__(self, body: bytes) -> None:
        self.keys = {k["kid"]: Ed25519PublicKey.from_public_bytes(
            base64.urlsafe_b64decode(k["x"] + "=")) for k in json.loads(body)["keys"]}

    def resolve_public_key(self, key_id: str):
        return self.keys.get(key_id)

    def resolve_private_key(self, key_id: str):
        raise NotImplementedError


async def sign(conn, url: str, **overrides):
    return await sign_http_request(conn, secret=SECRET, api_host=HOST, address=ADDRESS, url=url,
                                   **overrides)


async def verify(conn, method: str, url: str, headers) -> dict:
    """Verify a request carrying ``headers`` with the independent verifier; return the signed
    component values and parameters."""
    document = await directory_document(conn, secret=SECRET, api_host=HOST)
    verifier = HTTPMessageVerifier(signature_algorithm=algorithms.ED25519,
                                   key_resolver=DirectoryKeys(document.body))
    request = httpx.Request(method, url, headers=as_dict(headers))
    (result,) = verifier.verify(request, expect_tag=TAG)
    return {**result.covered_components, **result.parameters}


def as_dict(headers) -> dict[str, str]:
    """The headers as sent: wire names and values."""
    return msgspec.to_builtins(headers)


async def test_a_signed_request_verifies_with_an_independent_rfc9421_verifier(conn):
    result = await sign(conn, "https://shop.example/catalog?page=2")
    headers = as_dict(result.headers)
    assert set(headers) == {"Signature-Agent", "From", "Signature-Input", "Signature"}
    assert headers["Signature-Agent"] == AGENT and headers["From"] == ADDRESS
    signed = await verify(conn, "GET", "https://shop.example/catalog?page=2", result.headers)
    assert signed['"@authority"'] == "shop.example"
    assert signed['"signature-agent";key="sig1"'] == f'"https://{HOST}"'
    assert signed['"from"'] == ADDRESS
    assert not {'"@method"', '"@path"', '"@query"'} & set(signed)
    assert signed["tag"] == "web-bot-auth" and signed["alg"] == "ed25519"
    assert signed["expires"] - signed["created"] == 60
    assert result.expires_at == datetime.fromtimestamp(signed["expires"], timezone.utc)
    assert len(signed["nonce"]) == 44
    # without @path the signature binds the authority only: another path still verifies
    await verify(conn, "POST", "https://shop.example/elsewhere", result.headers)


async def test_keyid_is_the_published_keys_thumbprint(conn):
    result = await sign(conn, "https://shop.example/")
    (key,) = json.loads((await directory_document(conn, secret=SECRET, api_host=HOST)).body)["keys"]
    assert f';keyid="{key["kid"]}";' in result.headers.signature_input
    assert key["kid"] == rfc7638_thumbprint(base64.urlsafe_b64decode(key["x"] + "="))


async def test_method_path_and_query_are_signed_on_request(conn):
    url = "https://shop.example/cart/items?sku=42&qty=1"
    result = await sign(conn, url, method="POST", expires_in=300,
                        components=["@method", "@path", "@query", "from"])
    signed = await verify(conn, "POST", url, result.headers)
    assert (signed['"@method"'], signed['"@path"'], signed['"@query"']) == (
        "POST", "/cart/items", "?sku=42&qty=1")
    assert signed["expires"] - signed["created"] == 300
    for method, other in (("GET", url), ("POST", "https://shop.example/cart/other?sku=42&qty=1"),
                          ("POST", "https://shop.example/cart/items?sku=43&qty=1"),
                          ("POST", "https://other.example/cart/items?sku=42&qty=1")):
        with pytest.raises(InvalidSignature):
            await verify(conn, method, other, result.headers)


async def test_an_empty_path_and_query_sign_as_the_rfc_says(conn):
    result = await sign(conn, "https://shop.example", components=["@path", "@query"])
    signed = await verify(conn, "GET", "https://shop.example", result.headers)
    assert (signed['"@path"'], signed['"@query"']) == ("/", "?")


@pytest.mark.parametrize(("url", "authority"), [
    ("https://bücher.example/katalog", "xn--bcher-kva.example"),
    ("https://straße.de/", "xn--strae-oqa.de"),             # IDNA 2008, not "strasse.de"
    ("https://Shop.EXAMPLE:443/", "shop.example"),
    ("https://shop.example:8443/", "shop.example:8443"),
    ("https://[2001:DB8::1]:8443/", "[2001:db8::1]:8443"),
    ("https://192.0.2.7/", "192.0.2.7"),
    ("https://r3---sn-ab5l6n7s.googlevideo.com/", "r3---sn-ab5l6n7s.googlevideo.com"),
])
async def test_the_authority_is_normalised_and_an_idn_becomes_its_a_label(conn, url, authority):
    result = await sign(conn, url)
    # httpx sends the A-label on the wire; the verifier rebuilds @authority from what it sees
    signed = await verify(conn, "GET", url, result.headers)
    assert signed['"@authority"'] == authority


@pytest.mark.parametrize(("url", "components"), [
    ("https://shop.example/café", ["@path"]),
    ("https://shop.example/search?q=café", ["@query"]),
])
async def test_a_component_that_is_not_ascii_is_refused(conn, url, components):
    with pytest.raises(PylotaError) as refused:
        await sign(conn, url, components=components)
    assert refused.value.code is ErrorCode.INVALID_REQUEST
    assert refused.value.details == {"path": "url"}
    assert "Percent-encode" in refused.value.fix
    # the same URL is fine while that component is not signed
    await sign(conn, url)


async def test_an_address_that_is_not_ascii_is_refused(conn):
    with pytest.raises(PylotaError) as refused:
        await sign_http_request(conn, secret=SECRET, api_host=HOST, address="käufer@acme.example",
                                url="https://shop.example/")
    assert refused.value.code is ErrorCode.INVALID_REQUEST
    assert refused.value.details == {"path": "identity"}


@pytest.mark.parametrize("url", [
    "https://shop.example/a b", "https://shop.exa\nmple/", "https://shop.example/\t",
    "https://user:pw@shop.example/", "https://shop.example:99999/", "https://shop.example:x/",
    "https:///path-only", "https://☃.example/",
    # found by an attack: the first was a 500, the others were signed
    "https://[zz]/", "https://xn--/", "https://a..b/", "https://.ex.com/", "https://a_b.example/",
    "https://api.example.com:0/",  # found by a later attack: no server listens on port 0
])
async def test_a_url_that_cannot_be_signed_is_refused_naming_url(conn, url):
    with pytest.raises(PylotaError) as refused:
        await sign(conn, url)
    assert refused.value.code is ErrorCode.INVALID_REQUEST
    assert refused.value.details == {"path": "url"}
    assert await conn.fetchval("SELECT count(*) FROM signing_keys") == 0


async def test_at_method_needs_method(conn):
    with pytest.raises(PylotaError) as missing:
        await sign(conn, "https://shop.example/", components=["@method"])
    assert missing.value.details == {"path": "method"}
    # a method without @method is not signed
    result = await sign(conn, "https://shop.example/", method="DELETE")
    assert '"@method"' not in result.headers.signature_input


async def test_an_expired_signature_fails(conn):
    past = datetime.now(timezone.utc) - timedelta(seconds=400)
    result = await sign(conn, "https://shop.example/", expires_in=300, now=past)
    with pytest.raises(InvalidSignature, match="expires"):
        await verify(conn, "GET", "https://shop.example/", result.headers)


async def test_a_tampered_header_fails(conn):
    result = await sign(conn, "https://shop.example/")
    headers = as_dict(result.headers)
    for name, value in (("From", "ceo@acme.example"),
                        ("Signature-Agent", 'sig1="https://evil.example"')):
        with pytest.raises(InvalidSignature):
            await verify(conn, "GET", "https://shop.example/", {**headers, name: value})


async def test_the_directory_proves_possession_of_every_published_key(conn):
    old = await sign(conn, "https://shop.example/")
    await rotate_key(conn, KeyPurpose.HTTP_SIGNATURE, SECRET)
    new = await sign(conn, "https://shop.example/")
    document = await directory_document(conn, secret=SECRET, api_host=HOST)
    assert document.headers["Content-Type"] == DIRECTORY_MEDIA_TYPE
    assert document.headers["Cache-Control"] == "public, max-age=300"
    kids = [k["kid"] for k in json.loads(document.body)["keys"]]
    assert len(kids) == 2 and all(f'keyid="{kid}"' in s.headers.signature_input
                                  for kid, s in zip(kids, (new, old)))
    # both signatures verify while the old key is in its grace
    await verify(conn, "GET", "https://shop.example/", old.headers)
    await verify(conn, "GET", "https://shop.example/", new.headers)

    response = httpx.Response(200, headers=document.headers, content=document.body,
                              request=httpx.Request("GET", f"https://{HOST}{DIRECTORY_PATH}"))
    verifier = HTTPMessageVerifier(signature_algorithm=algorithms.ED25519,
                                   key_resolver=DirectoryKeys(document.body))
    proofs = verifier.verify(response, expect_tag=DIRECTORY_TAG, body=document.body)
    assert sorted(p.parameters["keyid"] for p in proofs) == sorted(kids)
    assert all(p.covered_components['"@authority";req'] == HOST for p in proofs)
    # a directory swapped under the captured headers no longer verifies
    with pytest.raises(InvalidSignature):
        verifier.verify(response, expect_tag=DIRECTORY_TAG, body=b'{"keys":[]}')


async def test_an_empty_directory_is_served_unsigned(conn):
    document = await directory_document(conn, secret=SECRET, api_host=HOST)
    assert document.body == b'{"keys":[]}'
    assert set(document.headers) == {"Content-Type", "Cache-Control"}


async def test_signing_without_a_secret_is_unavailable(conn):
    with pytest.raises(PylotaError) as unset:
        await sign_http_request(conn, secret="", api_host=HOST, address=ADDRESS,
                                url="https://shop.example/")
    assert unset.value.code is ErrorCode.UNAVAILABLE
