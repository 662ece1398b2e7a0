"""mail_get_usage is for tenant and identity keys only (DESIGN.md section 5.2): platform and
partner keys never see it, even holding every permission."""

from __future__ import annotations

from shared.auth.keys import Principal
from shared.auth.permissions import KeyLevel, Permission
from shared.tools.registry import visible_to


def test_only_tenant_and_identity_keys_see_mail_get_usage():
    for level in KeyLevel:
        principal = Principal(key_id="key_x", level=level, partner_id="par_x",
                              tenant_id="ten_x", identity_id="idn_x",
                              permissions=frozenset(Permission), mode="live")
        seen = {t.name for t in visible_to(principal)}
        assert ("mail_get_usage" in seen) is (level in (KeyLevel.TENANT, KeyLevel.IDENTITY))
        assert {"mail_send", "mail_reply", "mail_forward"} <= seen
