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

__all__ = ["Settings", "SettingsError", "MIN_SIGNING_SECRET_LENGTH"]

#: Shortest PM_SIGNING_SECRET accepted (32 characters of token_urlsafe carry 192 bits).
MIN_SIGNING_SECRET_LENGTH = 32


#: URL schemes asyncpg and redis-py take.
_DATABASE_SCHEMES = ("postgresql", "postgres")
_REDIS_SCHEMES = ("redis", "rediss", "unix")


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
    #: mail_deep_search calls per minute per key (RL_AGENTIC).
    pm_rl_agentic_per_minute: int = 20
    #: mail_send, mail_reply and mail_forward calls per minute per key (RL_SEND).
    pm_rl_send_per_minute: int = 60
    #: mail_sign_assertion and mail_sign_http_request calls per minute per key (RL_SIGN).
    pm_rl_sign_per_minute: int = 60
    #: Connections in each process's PostgreSQL pool.
    pm_db_pool_size: int = 20
    #: Longest wait for a pooled PostgreSQL connection before a call is ``unavailable``.
    pm_db_acquire_seconds: float = 5.0
    #: PostgreSQL statement_timeout of the front's and workers' connections, and the longest
    #: an import's statement may take (0: none).
    pm_db_statement_timeout_seconds: float = 20.0
    #: Connections in each process's Redis pool (a request waits at most 10 s for one).
    pm_redis_pool_size: int = 50
    #: Longest an inline tool call may run before it is ``unavailable``.
    pm_request_deadline_seconds: float = 30.0
    #: Requests one front process works on at once (streams that already answered excluded);
    #: past it the front answers 503 with Retry-After instead of queueing.
    pm_max_in_flight: int = 100
    #: Of those, the most one API key holds; past it the key's requests get 429.
    pm_max_in_flight_per_key: int = 50
    #: Seconds between a worker's liveness beats; a killed worker's calls end within
    #: twice this, plus the front's check interval (half of it).
    pm_job_heartbeat_seconds: float = 1.0
    #: Jobs one interactive worker runs at once (mail_wait, mail_deep_search).
    pm_worker_max_jobs: int = 200
    #: Of those, the most one API key runs at once, over every front (``front.key_jobs``).
    pm_jobs_per_key: int = 20
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
    #: Texts each embedding process runs at once, one onnxruntime thread each (STACK.md 1.1).
    pm_embed_threads: int = 2
    #: Folder of the int8 embedding model built on first use (shared.embeddings.quantized);
    #: empty: $XDG_CACHE_HOME/pylota-mail, else ~/.cache/pylota-mail.
    pm_model_cache: str = ""
    #: Messages the batch worker claims per transaction.
    pm_embed_batch: int = 32
    #: Seconds between the batch worker's looks at the embedding queue (1 to 60).
    pm_embed_poll_seconds: int = 5
    #: Processes that parse and triage messages during ``pylota import`` (0: one per CPU core).
    pm_import_workers: int = 0
    #: Messages ``pylota import`` stores per transaction.
    pm_import_batch: int = 200
    #: SMTP relay that delivers sent mail (shared.outbound.delivery).
    pm_smtp_relay_host: str = "127.0.0.1"
    #: The relay's port (1025: Mailpit's, the development sink).
    pm_smtp_relay_port: int = 1025
    #: How to secure the relay connection: none, starttls (RFC 3207) or tls (implicit, RFC 8314).
    pm_smtp_relay_security: Literal["none", "starttls", "tls"] = "none"
    #: CA certificates (PEM file) the relay's certificate must chain to; empty: the system's.
    pm_smtp_relay_ca_file: str = ""
    #: Relay user for SMTP AUTH (RFC 4954); empty means no AUTH.
    pm_smtp_relay_username: str = ""
    #: Relay password for SMTP AUTH.
    pm_smtp_relay_password: str = ""
    #: Seconds each relay command may take.
    pm_smtp_relay_timeout: float = 30.0
    #: Delivery attempts before a message that keeps failing temporarily is failed.
    pm_smtp_max_attempts: int = 8
    #: Seconds before the first retry; each later retry waits four times longer (at most 6 h).
    pm_smtp_retry_seconds: float = 60.0
    #: Seconds a worker holds a message it is delivering before another worker may take it
    #: again (after a crash); 0: four relay timeouts plus 30 s. Shorter than one delivery
    #: attempt, two workers could send the same message.
    pm_smtp_lease_seconds: float = 0.0
    #: DKIM signing domain (d=); empty means outgoing mail is not signed.
    pm_dkim_domain: str = ""
    #: DKIM selector (s=); the public key is TXT at <selector>._domainkey.<domain>.
    pm_dkim_selector: str = ""
    #: Path of the DKIM private key (PEM).
    pm_dkim_key_file: str = ""
    #: Address the inbound SMTP listener (front.smtp, ``pylota smtp``) binds.
    pm_smtp_listen_host: str = "127.0.0.1"
    #: Port of the inbound SMTP listener.
    pm_smtp_listen_port: int = 2525
    #: Largest message the listener accepts, in bytes (SIZE, RFC 1870; 552 over it).
    pm_smtp_max_message_bytes: int = 26_214_400
    #: Base URL of an OpenAI-compatible chat endpoint for mail_deep_search answers (ending
    #: before /chat/completions); empty uses the built-in backend.
    pm_llm_base_url: str = ""
    #: Model name sent to that endpoint.
    pm_llm_model: str = ""
    #: Bearer key for that endpoint (never logged); empty sends none.
    pm_llm_api_key: str = ""
    #: Seconds to wait for that endpoint (connect, and each read) before the built-in answer.
    pm_llm_timeout_seconds: float = 4.0
    #: authserv-ids (RFC 8601) whose Authentication-Results ingest believes, comma-separated: the
    #: border MTAs in front of this deployment. Our own SMTP listener's (PM_API_HOST) always counts.
    pm_trusted_authserv_ids: str = ""
    #: Verify DKIM signatures at ingest by looking their keys up in the DNS (off: the verdict
    #: comes from trusted Authentication-Results alone).
    pm_dkim_verify: bool = True
    #: Secret that encrypts the signing keys at rest (shared/signing/keys.py), at least
    #: MIN_SIGNING_SECRET_LENGTH characters; unset, the signing tools answer ``unavailable``.
    pm_signing_secret: str = ""
    #: Web Bot Auth signed HTTP requests (mail_sign_http_request): ``off`` (the default) lists
    #: the tool but every call gets ``web_bot_auth_disabled`` (spec section 4.3).
    pm_web_bot_auth: Literal["on", "off"] = "off"

    def __post_init__(self) -> None:
        if self.pm_import_workers < 0:
            raise SettingsError(f"PM_IMPORT_WORKERS={self.pm_import_workers} is negative: set a "
                                "number of processes, or 0 for one per CPU core")
        if self.pm_max_in_flight_per_key < 1:
            raise SettingsError(f"PM_MAX_IN_FLIGHT_PER_KEY={self.pm_max_in_flight_per_key} "
                                "serves no request: set at least 1 (requests one key has in "
                                "progress on one front)")
        if self.pm_jobs_per_key < 1:
            raise SettingsError(f"PM_JOBS_PER_KEY={self.pm_jobs_per_key} lets no key wait for "
                                "mail: set at least 1 (calls one key runs at once)")
        if self.pm_import_batch < 1:
            raise SettingsError(f"PM_IMPORT_BATCH={self.pm_import_batch} stores nothing: set at "
                                "least 1 (messages per transaction)")
        # A short secret would make the encrypted private keys guessable; refusing it at start-up
        # names the variable, where a failure at the first signature would not.
        if self.pm_signing_secret and len(self.pm_signing_secret) < MIN_SIGNING_SECRET_LENGTH:
            raise SettingsError(
                f"PM_SIGNING_SECRET has {len(self.pm_signing_secret)} characters; it needs at least"
                f" {MIN_SIGNING_SECRET_LENGTH}: set a random value such as the output of"
                " `python -c 'import secrets; print(secrets.token_urlsafe(32))'`")

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
        settings = cls(**values)
        # A wrong scheme started a front that answered every request 500 (found by a new user).
        # The URL itself is not shown: it may hold a password.
        for name, url, schemes, example in (
                ("DATABASE_URL", settings.database_url, _DATABASE_SCHEMES,
                 "postgresql://USER@HOST:5432/DATABASE"),
                ("REDIS_URL", settings.redis_url, _REDIS_SCHEMES, "redis://HOST:6379/0")):
            scheme = url.partition("://")[0].lower() if "://" in url else ""
            if scheme not in schemes:
                raise SettingsError(f"{name} must start with {' or '.join(s + '://' for s in schemes)}"
                                    f" (it starts {scheme + '://' if scheme else 'with no scheme'}):"
                                    f" write it as {example}")
        return settings
