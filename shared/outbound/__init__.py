"""Outbound mail: the send tools and delivery to the SMTP relay (spec section 4.3, DESIGN.md
section 2 "mail out").

Where things happen:

- ``model`` holds the send tools' request Structs, the :class:`~shared.outbound.model.Sender`
  and the :class:`~shared.outbound.model.Sent` result.
- ``addresses`` checks recipients (addr-specs, A-label domains, counts); ``headers`` the extra
  header allowlist; ``replies`` decides who a reply goes to (Reply-To safety rules, reply-all).
- ``compose`` builds the MIME message with ``email.message.EmailMessage``, with the threading
  headers of replies and forwards.
- ``send`` runs ``mail_send``, ``mail_reply`` and ``mail_forward``: idempotency, the allowance
  hook, storing the message through ``shared.ingest`` (status ``queued``), queueing it.
- ``idempotency`` owns ``send_requests``; ``outbox`` owns ``outbound_messages`` and
  ``outbound_recipients`` (the delivery state); ``suppression`` owns ``suppressions``.
- ``delivery`` sends due messages to the relay with ``aiosmtplib`` (retries, backoff, permanent
  failures, at-least-once), signing them with ``dkim_signing``.
- ``dsn`` reads delivery status notifications (RFC 3464); ``bounces`` applies them to what was
  sent and feeds the suppression list.

Nothing here speaks HTTP or knows arq: the tool layer calls ``send``, a worker job calls
``delivery.deliver_due``, the SMTP listener (``front.smtp``) calls ``bounces.absorb_report``.
"""

__all__: list[str] = []
