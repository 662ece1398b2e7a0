"""Agent identity: the deployment's signing keys, signed assertions and signed HTTP requests.

``keys`` owns the ``signing_keys`` table (Ed25519, encrypted at rest, rotation); ``assertions``
makes mail_sign_assertion's JWTs and the JWKS; ``web_bot_auth`` makes mail_sign_http_request's
Web Bot Auth headers and the HTTP message signatures directory; ``rfc9421`` is the pure RFC 9421
signing they rest on. The front serves the documents and wires the tools (spec section 4.3).
"""

from shared.signing.assertions import AssertionResult, jwks_document, sign_assertion
from shared.signing.keys import KeyPurpose, WellKnownDocument, rotate_key
from shared.signing.web_bot_auth import SignedRequest, directory_document, sign_http_request

__all__ = [
    "AssertionResult", "KeyPurpose", "SignedRequest", "WellKnownDocument", "directory_document",
    "jwks_document", "rotate_key", "sign_assertion", "sign_http_request",
]
