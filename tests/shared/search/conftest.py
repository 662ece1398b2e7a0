"""A small mailbox written for the search tests: messages built here, stored through ingest."""

from __future__ import annotations

from dataclasses import dataclass, field
from email.message import EmailMessage

import asyncpg
import pytest

from shared.ingest.pipeline import ingest_raw
from shared.tenancy.store import create_identity, create_tenant

OWN = "desk@acme.example"


def mail(mid: str, *, sender: str = "jo@brightwell.example", to: str = OWN, subject: str = "",
         body: str = "", date: str = "Mon, 02 Nov 2026 10:00:00 +0000",
         in_reply_to: str | None = None, headers: dict[str, str] | None = None,
         attachment: tuple[str, str, bytes] | None = None) -> bytes:
    """The raw bytes of one message; ``attachment`` is ``(filename, content type, bytes)``."""
    msg = EmailMessage()
    msg["Message-ID"] = f"<{mid}>"
    msg["From"] = sender
    msg["To"] = to
    msg["Subject"] = subject
    msg["Date"] = date
    if in_reply_to:
        msg["In-Reply-To"] = f"<{in_reply_to}>"
        msg["References"] = f"<{in_reply_to}>"
    for name, value in (headers or {}).items():
        msg[name] = value
    msg.set_content(body)
    if attachment:
        filename, ctype, data = attachment
        maintype, subtype = ctype.split("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=filename)
    return bytes(msg)


@dataclass
class Mailbox:
    """A tenant with one identity and its messages, by Message-ID; ``dsn`` is its database."""

    conn: asyncpg.Connection
    dsn: str
    tenant_id: str
    identity_id: str
    ids: dict[str, str] = field(default_factory=dict)

    async def add(self, mid: str, **kwargs: object) -> str:
        outcome, _ = await ingest_raw(self.conn, None, self.identity_id, mail(mid, **kwargs))
        self.ids[mid] = outcome.message_id
        return outcome.message_id

    def mids(self, message_ids: object) -> set[str]:
        """Message-IDs of our message ids."""
        back = {v: k for k, v in self.ids.items()}
        return {back[i] for i in message_ids}  # type: ignore[attr-defined]


@pytest.fixture
async def mailbox(conn: asyncpg.Connection, db_url: str) -> Mailbox:
    """An empty mailbox at ``desk@acme.example`` in a tenant in Europe/London."""
    tenant = await create_tenant(conn, "acme", time_zone="Europe/London")
    identity = await create_identity(conn, tenant.id, OWN)
    return Mailbox(conn, db_url, tenant.id, identity.id)
