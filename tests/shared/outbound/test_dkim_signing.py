"""DKIM signing (shared.outbound.dkim_signing) and the relay's settings (shared.outbound.delivery)."""

from __future__ import annotations

import dkim
import pytest

from shared.config import Settings, SettingsError
from shared.outbound.delivery import RelayConfig
from shared.outbound.dkim_signing import DkimSigner
from tests.shared.outbound.conftest import DkimKeys

RAW = (b"From: Desk <desk@acme.example>\r\nTo: jo@example.com\r\nSubject: hi\r\n"
       b"Message-ID: <x@acme.example>\r\nDate: Mon, 30 Nov 2026 09:00:00 +0000\r\n\r\nbody\r\n")


def test_a_signature_verifies_and_covers_what_matters(dkim_keys: DkimKeys):
    signed = dkim_keys.signer.sign(RAW)
    assert signed.endswith(RAW) and signed.startswith(b"DKIM-Signature: ")
    assert dkim.verify(signed, dnsfunc=dkim_keys.dnsfunc)
    assert not dkim.verify(signed.replace(b"Subject: hi", b"Subject: pay now"),
                           dnsfunc=dkim_keys.dnsfunc)
    # a Reply-To added on the way breaks it: absent fields are signed as absent
    assert not dkim.verify(signed.replace(b"Subject: hi\r\n",
                                          b"Subject: hi\r\nReply-To: evil@example.net\r\n"),
                           dnsfunc=dkim_keys.dnsfunc)


def test_the_signer_comes_from_settings(tmp_path, dkim_keys: DkimKeys):
    assert DkimSigner.from_settings(Settings()) is None
    key = tmp_path / "dkim.pem"
    key.write_bytes(dkim_keys.signer.private_key)
    signer = DkimSigner.from_settings(Settings(pm_dkim_domain="ACME.example",
                                               pm_dkim_selector="s1", pm_dkim_key_file=str(key)))
    assert signer == dkim_keys.signer
    with pytest.raises(SettingsError, match="PM_DKIM_SELECTOR"):
        DkimSigner.from_settings(Settings(pm_dkim_domain="acme.example"))
    with pytest.raises(SettingsError, match="PM_DKIM_KEY_FILE"):
        DkimSigner.from_settings(Settings(pm_dkim_domain="acme.example", pm_dkim_selector="s1",
                                          pm_dkim_key_file=str(tmp_path / "missing.pem")))
    key.write_bytes(b"not a key")
    with pytest.raises(SettingsError, match="not a private key"):
        DkimSigner.from_settings(Settings(pm_dkim_domain="acme.example", pm_dkim_selector="s1",
                                          pm_dkim_key_file=str(key)))


def test_the_relay_comes_from_settings():
    relay = RelayConfig.from_settings(Settings.from_env({
        "PM_SMTP_RELAY_HOST": "smtp.example.com", "PM_SMTP_RELAY_PORT": "587",
        "PM_SMTP_RELAY_SECURITY": "starttls", "PM_SMTP_RELAY_USERNAME": "u",
        "PM_SMTP_RELAY_PASSWORD": "p", "PM_SMTP_MAX_ATTEMPTS": "0", "PM_API_HOST": "mail.acme.example"}))
    assert relay == RelayConfig(host="smtp.example.com", port=587, security="starttls",
                                username="u", password="p", local_hostname="mail.acme.example",
                                max_attempts=1)
    with pytest.raises(SettingsError, match="PM_SMTP_RELAY_SECURITY"):
        Settings.from_env({"PM_SMTP_RELAY_SECURITY": "ssl"})
