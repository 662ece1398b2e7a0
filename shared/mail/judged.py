"""What ingest judges of a message, as the Message object carries it: its trust and its triage.

Types only, imported by the modules that compute them (``shared.mail.trust``,
``shared.mail.triage``, ``shared.mail.spam``) and by the records that carry them
(``shared.mail.records``), so none of those needs another's module to name them.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

__all__ = ["Verdict", "Trust", "Triage"]

#: A trust verdict (``shared.mail.trust.VERDICTS`` says what each means).
Verdict = Literal["pass", "fail", "none"]


class Trust(msgspec.Struct, frozen=True, kw_only=True):
    """A message's trust, as the Message object carries it (``shared.mail.trust`` computes it)."""

    verdict: Annotated[Verdict, msgspec.Meta(description=(
        "pass: the From domain is authenticated (DMARC, or aligned DKIM or SPF, passed); fail: "
        "authentication failed; none: not checked, or nothing said about the From domain."))]
    known_sender: Annotated[bool, msgspec.Meta(description=(
        "This mailbox has written to the sender's address before (or the sender is the "
        "mailbox itself)."))]
    flags: Annotated[list[str], msgspec.Meta(description=(
        "What to check before acting: dkim_fail, spf_fail, dmarc_fail, first_contact (never "
        "in contact before), lookalike_domain (the sender's domain imitates the mailbox's "
        "own domain or one it wrote to)."))]


class Triage(msgspec.Struct, frozen=True, kw_only=True):
    """A message's triage, as the Message object carries it.

    ``category`` is a key of ``shared.mail.triage.CATEGORIES``, ``urgency`` one of its
    ``URGENCIES``, ``risk_flags`` keys of its ``RISK_FLAGS`` (sorted); ``automated`` is true for machine-sent
    mail (module docstring).
    """

    category: str
    urgency: str
    risk_flags: list[str]
    automated: bool
