"""The RFC 9421 signing code against published test vectors: RFC 9421 appendix B.2.6 (Ed25519)
and the Ed25519 vectors of the Web Bot Auth draft (draft-ietf-webbotauth-httpsig-protocol,
"Test Vectors"). Ed25519 is deterministic, so the signatures must match byte for byte."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from shared.signing.keys import Signer, raw_public_key, thumbprint
from shared.signing.rfc9421 import Component, content_digest, sign, signature_base, signature_fields
from shared.signing.web_bot_auth import DIRECTORY_MEDIA_TYPE, DIRECTORY_TAG, signed_directory

#: RFC 9421 appendix B.1.4, "Example Ed25519 Test Key" (a test key: never for production).
RFC_TEST_KEY = load_pem_private_key(
    b"-----BEGIN PRIVATE KEY-----\n"
    b"MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n"
    b"-----END PRIVATE KEY-----\n", None)
#: Its RFC 7638 thumbprint, as the Web Bot Auth draft's vectors give it.
RFC_TEST_KID = "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"


def test_rfc9421_b26_ed25519_signature_base_and_signature():
    components = [
        Component("date", "Tue, 20 Apr 2021 02:07:55 GMT"), Component("@method", "POST"),
        Component("@path", "/foo"), Component("@authority", "example.com"),
        Component("content-type", "application/json"), Component("content-length", "18"),
    ]
    params = {"created": 1618884473, "keyid": "test-key-ed25519"}
    assert signature_base(components, params) == (
        '"date": Tue, 20 Apr 2021 02:07:55 GMT\n'
        '"@method": POST\n'
        '"@path": /foo\n'
        '"@authority": example.com\n'
        '"content-type": application/json\n'
        '"content-length": 18\n'
        '"@signature-params": ("date" "@method" "@path" "@authority" "content-type"'
        ' "content-length");created=1618884473;keyid="test-key-ed25519"')
    fields = signature_fields([sign(RFC_TEST_KEY, "sig-b26", components, params)])
    assert fields == {
        "Signature-Input": 'sig-b26=("date" "@method" "@path" "@authority" "content-type"'
                           ' "content-length");created=1618884473;keyid="test-key-ed25519"',
        "Signature": "sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0"
                     "w6vuQv5lIp5WPpBKRCw==:",
    }


def test_web_bot_auth_draft_ed25519_vector_with_a_signature_agent_member():
    components = [Component("@authority", "example.com"),
                  Component("signature-agent", '"https://signature-agent.test"', {"key": "agent2"})]
    params = {"created": 1735689600, "keyid": RFC_TEST_KID, "alg": "ed25519",
              "expires": 4889289600,
              "nonce": "n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFi"
                       "oQb6E1YsauiA==",
              "tag": "web-bot-auth"}
    assert signature_base(components, params) == (
        '"@authority": example.com\n'
        '"signature-agent";key="agent2": "https://signature-agent.test"\n'
        '"@signature-params": ("@authority" "signature-agent";key="agent2");created=1735689600'
        f';keyid="{RFC_TEST_KID}";alg="ed25519";expires=4889289600;nonce="{params["nonce"]}"'
        ';tag="web-bot-auth"')
    signature = sign(RFC_TEST_KEY, "sig2", components, params)
    assert base64.b64encode(signature.value).decode() == (
        "RdNFx5Bj6au3YgAMQL/RzmUlZE8QZLIaXGRpw985hWnwPfMxT228NMk6ehRS1PSl4e8PhbNZACSanGdhEwYCCg==")


def test_the_directory_of_the_test_key_is_the_drafts_signed_directory_response():
    signer = Signer(kid=thumbprint(RFC_TEST_KEY.public_key()),
                    public_key=raw_public_key(RFC_TEST_KEY.public_key()), private_key=RFC_TEST_KEY)
    assert signer.kid == RFC_TEST_KID
    document = signed_directory([signer], "signature-agent.test", created=1735689600,
                                expires=4889289600)
    assert document.body == (
        b'{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"'
        b',"x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs","use":"sig"}]}')
    assert document.headers["Content-Type"] == DIRECTORY_MEDIA_TYPE
    assert document.headers["Content-Digest"] == (
        "sha-256=:CADMT2aBdV/rqQr/NIru64ERQkCobVvllA4V0fLFDu0=:")
    assert document.headers["Signature-Input"] == (
        'binding=("@authority";req "content-digest");created=1735689600;expires=4889289600'
        f';keyid="{RFC_TEST_KID}";tag="{DIRECTORY_TAG}"')
    assert document.headers["Signature"] == (
        "binding=:l6P8R67tm3kujAxbHWio7ll01qrEZ0dKD/WWlGhNYEmTnFZM8Wt0VQ9zqGfvo7T/UMkBxsigzChM1Gp"
        "z7gOVBg==:")


def test_content_digest_is_rfc9530_sha256():
    # RFC 9530 section 2 example: {"hello": "world"} plus a newline
    assert content_digest(b'{"hello": "world"}\n') == (
        "sha-256=:RK/0qy18MlBSVnWgjwz6lZEWjP/lF5HF9bvEF8FabDg=:")


def test_a_base_that_is_not_ascii_is_not_signed():
    with pytest.raises(UnicodeEncodeError):
        sign(RFC_TEST_KEY, "sig1", [Component("@path", "/café")], {"created": 1})
