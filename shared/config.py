"""Process settings, read once from the environment.

``Settings.from_env`` is the only reader of ``os.environ`` in the project (STYLE.md section 2);
the front's ``create_app`` and the workers' ``on_startup`` call it and pass the result down.
Every field is documented in the README's configuration table (a test checks it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

import msgspec

__all__ = ["Settings", "SettingsError"]


class SettingsError(Exception):
    """A variable is missing or malformed; the message names it and the fix."""


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Typed settings. Environment variable names are the upper-case field names."""

    #: PostgreSQL DSN (asyncpg form).
    database_url: str = "postgresql://postgres@127.0.0.1:5432/pylota"
    #: Redis URL for jobs, pub/sub and rate-limit buckets.
    redis_url: str = "redis://127.0.0.1:6379/0"
    #: Public host name; the only Origin accepted is https://{PM_API_HOST} (spec section 2.1).
    pm_api_host: str = "localhost"
    #: Key for query_hash in logs: HMAC-SHA256(PM_HASH_KEY, q) (spec section 7).
    pm_hash_key: str = "dev-only-hash-key-change-me"
    #: Requests per minute per key at the transport (RL_API, DESIGN.md section 5.3).
    pm_rl_api_per_minute: int = 600
    #: mail_search and mail_find_related calls per minute per key (RL_SEARCH).
    pm_rl_search_per_minute: int = 120
    #: Seconds between mail_wait progress notifications and SSE keep-alives (spec section 2.6).
    pm_stream_heartbeat_seconds: float = 10.0
    #: arq poll delay of the interactive queue, in seconds (STACK.md section 4).
    pm_worker_poll_delay: float = 0.05
    #: Prefix of the job queues; deployments that share one Redis need different values.
    pm_namespace: str = "pylota"
    #: Log level for the JSON logs (debug, info, warning, error).
    pm_log_level: str = "info"
    #: Embedding model for semantic search: onnx (MiniLM, offline), hash (tests) or off.
    pm_embedder: Literal["onnx", "hash", "off"] = "onnx"
    #: onnxruntime threads per process that embeds (STACK.md section 1.1).
    pm_embed_threads: int = 2
    #: Messages embedded per model call on the batch worker.
    pm_embed_batch: int = 32
    #: Seconds between the batch worker's looks at the embedding queue (1 to 60).
    pm_embed_poll_seconds: int = 5
    #: Base URL of an OpenAI-compatible chat endpoint for mail_deep_search answers (ending
    #: before /chat/completions); empty uses the built-in backend.
    pm_llm_base_url: str = ""
    #: Model name sent to that endpoint.
    pm_llm_model: str = ""
    #: Bearer key for that endpoint (never logged); empty sends none.
    pm_llm_api_key: str = ""
    #: Seconds to wait for that endpoint (connect, and each read) before the built-in answer.
    pm_llm_timeout_seconds: float = 4.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``environ`` (default ``os.environ``).

        Raises:
            SettingsError: a variable does not convert to its field's type; the message names
                the variable and the expected type.
        """
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for field in msgspec.structs.fields(cls):
            name = field.name.upper()
            if name not in env:
                continue
            raw = env[name]
            try:
                values[field.name] = msgspec.convert(raw, field.type, strict=False)
            except msgspec.ValidationError as exc:
                raise SettingsError(
                    f"{name}={raw!r} is not a valid {field.type.__name__ if isinstance(field.type, type) else field.type}: set it to one, or unset it to use the default"
                ) from exc
        return cls(**values)
