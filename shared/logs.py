"""Structured JSON logs (spec section 7).

One line per request and per tool call, with the method, tool name, key id, identity id, duration,
outcome and error code. Arguments, mail content, tokens and signatures are never logged; the search
tools log ``query_hash`` instead of their query.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import sys

import msgspec
import structlog

__all__ = ["configure", "get_logger", "query_hash"]


def configure(level: str) -> None:
    """Send JSON lines to stderr at ``level`` (debug, info, warning, error)."""
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            # msgspec renders a line in about half the time of json.dumps (issue 14: two lines
            # a call); anything it cannot encode is written as its repr, as json.dumps's
            # fallback in structlog does.
            structlog.processors.JSONRenderer(serializer=_render),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelName(level.upper()) if isinstance(
                logging.getLevelName(level.upper()), int) else logging.INFO),
        # sys.stderr is looked up per line, not bound once, so a replaced stderr (a test's
        # capture, a daemon's redirect) gets the lines and a closed one is never written.
        logger_factory=lambda *_: structlog.PrintLogger(sys.stderr),
        cache_logger_on_first_use=False,
    )


_ENCODER = msgspec.json.Encoder(enc_hook=repr)


def _render(event: dict[str, object], **_: object) -> str:
    return _ENCODER.encode(event).decode()


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A logger that adds ``component=name`` to each line."""
    return structlog.get_logger(component=name)


def query_hash(key: str, q: str) -> str:
    """First 16 hex characters of HMAC-SHA256(key, q) (spec section 7, FR-PRV-6)."""
    return hmac.new(key.encode(), q.encode(), hashlib.sha256).hexdigest()[:16]
