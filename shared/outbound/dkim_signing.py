"""DKIM signatures on outgoing mail (RFC 6376), made with ``dkimpy``.

The deployment configures one signing domain, selector and RSA (or Ed25519, RFC 8463) private key
(``PM_DKIM_DOMAIN``, ``PM_DKIM_SELECTOR``, ``PM_DKIM_KEY_FILE``); its public key is published as
TXT at ``<selector>._domainkey.<domain>``. Every delivery is signed just before it leaves, with
relaxed/relaxed canonicalisation (section 3.4), which survives the header refolding relays do.
DMARC (RFC 7489) needs the signing domain aligned with the From domain, so identities should live
on the signing domain or its subdomains.
"""

from __future__ import annotations

from pathlib import Path

import dkim
import msgspec

from shared.config import Settings, SettingsError

__all__ = ["SIGNED_HEADERS", "DkimSigner"]

#: Fields signed (RFC 6376 section 5.4.1's list, plus the threading fields). One that is absent
#: is signed as absent (section 5.4.2), so nobody on the way can add it.
SIGNED_HEADERS: tuple[bytes, ...] = (
    b"from", b"reply-to", b"subject", b"date", b"to", b"cc", b"message-id", b"in-reply-to",
    b"references", b"mime-version", b"content-type", b"content-transfer-encoding",
    b"auto-submitted",
)


class DkimSigner(msgspec.Struct, frozen=True, kw_only=True):
    """Signs with ``d=domain``, ``s=selector`` and the PEM ``private_key``."""

    domain: str
    selector: str
    private_key: bytes

    def sign(self, raw: bytes) -> bytes:
        """``raw`` with a ``DKIM-Signature`` field prepended.

        Raises:
            dkim.DKIMException: the key is unusable (checked at start-up by
                :meth:`from_settings`, so not expected here).
        """
        signature = dkim.sign(raw, self.selector.encode(), self.domain.encode(),
                              self.private_key, include_headers=list(SIGNED_HEADERS),
                              canonicalize=(b"relaxed", b"relaxed"))
        return signature + raw

    @classmethod
    def from_settings(cls, settings: Settings) -> DkimSigner | None:
        """The signer the settings configure, or None when ``PM_DKIM_DOMAIN`` is empty.

        Raises:
            SettingsError: the selector or key file is missing, unreadable or not a key dkimpy
                can sign with (a test signature is made here, at start-up).
        """
        if not settings.pm_dkim_domain:
            return None
        if not settings.pm_dkim_selector or not settings.pm_dkim_key_file:
            raise SettingsError("PM_DKIM_DOMAIN is set, so PM_DKIM_SELECTOR and PM_DKIM_KEY_FILE"
                                " must be set too: name the selector and the PEM private key file")
        try:
            key = Path(settings.pm_dkim_key_file).read_bytes()
        except OSError as exc:
            raise SettingsError(f"PM_DKIM_KEY_FILE={settings.pm_dkim_key_file!r} cannot be read:"
                                f" {exc.strerror}") from exc
        signer = cls(domain=settings.pm_dkim_domain.lower(), selector=settings.pm_dkim_selector,
                     private_key=key)
        try:
            signer.sign(b"From: check@" + signer.domain.encode() + b"\r\n\r\ncheck\r\n")
        except dkim.DKIMException as exc:
            raise SettingsError(f"PM_DKIM_KEY_FILE={settings.pm_dkim_key_file!r} is not a"
                                f" private key DKIM can sign with: {exc}") from exc
        return signer
