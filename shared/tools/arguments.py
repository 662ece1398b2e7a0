"""Argument types the tools share, with the spec's constraints (spec section 4.3).

Each is an ``Annotated`` type whose ``Meta`` both checks a decoded value and writes the
published schema (``shared.tools.schema``), so a pattern or a length lives here once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

__all__ = ["IdentityRef", "DescribedIdentityRef", "SigningIdentityRef", "MessageId", "ThreadId",
           "TenantId", "IdentityId", "AttachmentId", "Label", "Instant"]

IdentityRef = Annotated[str, msgspec.Meta(max_length=254)]
"""An identity id (``idn_…``) or one of its addresses (spec section 3, "Identity argument")."""

DescribedIdentityRef = Annotated[str, msgspec.Meta(
    max_length=254,
    description="Identity id (idn_…) or address. Required for tenant, partner and platform keys.")]
""":data:`IdentityRef` as mail_list_threads describes it."""

SigningIdentityRef = Annotated[str, msgspec.Meta(
    max_length=254, description="Identity id (idn_…) or address. Required for tenant keys.")]
""":data:`IdentityRef` as the signing tools describe it (platform and partner keys never see them)."""


MessageId = Annotated[str, msgspec.Meta(pattern="^msg_[0-9A-HJKMNP-TV-Z]{26}$")]
ThreadId = Annotated[str, msgspec.Meta(pattern="^thr_[0-9A-HJKMNP-TV-Z]{26}$")]
TenantId = Annotated[str, msgspec.Meta(pattern="^ten_[0-9A-HJKMNP-TV-Z]{26}$")]
IdentityId = Annotated[str, msgspec.Meta(pattern="^idn_[0-9A-HJKMNP-TV-Z]{26}$")]
AttachmentId = Annotated[str, msgspec.Meta(pattern="^att_[0-9A-HJKMNP-TV-Z]{26}$")]
Label = Annotated[str, msgspec.Meta(pattern="^[a-z0-9][a-z0-9_:-]{0,63}$")]
"""A label as labels are written (spec section 4.3, mail_update_labels)."""
Instant = Annotated[datetime, msgspec.Meta(tz=True)]
"""An RFC 3339 date-time with its offset (``format: date-time``); one without is refused."""
