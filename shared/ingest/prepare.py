"""What ingest derives from a raw message alone, before the database has a say.

:func:`derive` gives, for one parsed message, what every path into the mailbox stores beside it:
its new text (quotes and signature removed) and snippet, its status, the triage draft (everything
triage reads but trust, ``shared.mail.triage.draft_of``) and its references (with the tenant's
``custom:`` patterns). Trust needs the mailbox's contacts, so triage is decided later
(``shared.mail.triage.decide``).

This is most of ingest's CPU (parsing, quote stripping, triage's and references' patterns), and
needs neither the database nor the event loop: ``pylota import`` runs :func:`prepare_all` on
worker processes (``shared.ingest.importer``) while the main process stores earlier messages.
Everything here is a plain value that pickles.

Pure: no I/O. Called by ``shared.ingest.pipeline`` (one message) and the importer's workers.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from shared.logs import get_logger
from shared.mail.model import ParsedMessage
from shared.mail.parse import parse_message
from shared.mail.quotes import new_text, snippet
from shared.mail.refs import Ref, extract_refs
from shared.mail.triage import TriageDraft, draft_of, input_of

__all__ = ["Prepared", "derive", "prepare", "prepare_all"]

log = get_logger("shared.ingest")


class Prepared(msgspec.Struct, frozen=True, kw_only=True):
    """One message ready to store: its parse, new text, snippet, status (``received``,
    ``queued`` or ``unparsed``), triage draft and references."""

    parsed: ParsedMessage
    new_text: str
    snippet: str
    status: str
    draft: TriageDraft
    refs: list[Ref]


def derive(parsed: ParsedMessage, patterns: Mapping[str, str], *, queued: bool = False
           ) -> Prepared:
    """What ingest stores beside ``parsed`` (module docstring). ``patterns`` are the tenant's
    ``custom:`` reference patterns; ``queued`` marks mail composed here that waits for delivery.
    Never raises for bad mail."""
    sender = (parsed.from_.name or parsed.from_.address) if parsed.from_ else None
    fresh = new_text(parsed.text, sender)
    status = "unparsed" if any(d.startswith("unparseable") for d in parsed.defects) \
        else "queued" if queued else "received"
    return Prepared(parsed=parsed, new_text=fresh, snippet=snippet(fresh or parsed.text),
                    status=status, draft=draft_of(input_of(parsed, fresh)),
                    refs=extract_refs(parsed.subject, parsed.text, patterns))


def prepare(raw: bytes, patterns: Mapping[str, str]) -> Prepared:
    """:func:`derive` of ``raw`` parsed (``shared.mail.parse.parse_message``)."""
    return derive(parse_message(raw), patterns)


def prepare_all(raws: list[bytes], patterns: Mapping[str, str]) -> list[Prepared | None]:
    """:func:`prepare` of each of ``raws``, in order; None for one that raised (a bug: parsing
    never raises for bad mail), which the importer then ingests one at a time, the path that
    records what went wrong with it. Runs on the importer's worker processes."""
    out: list[Prepared | None] = []
    for raw in raws:
        try:
            out.append(prepare(raw, patterns))
        except Exception as exc:  # noqa: BLE001 - one message must not cost its neighbours
            log.warning("prepare_failed", error=type(exc).__name__)
            out.append(None)
    return out
