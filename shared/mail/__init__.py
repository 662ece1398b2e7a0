"""Mail: from raw RFC 5322 bytes to stored, threaded messages.

Where things happen:

- ``sources`` finds messages on disk: ``.eml`` files, mbox files (mboxo and mboxrd, gzip too) and
  maildir folders, and yields each message's raw bytes with where it came from.
- ``parse`` turns raw bytes into a :class:`~shared.mail.model.ParsedMessage` with the standard
  library's ``email`` package (``policy.default`` for the fields read, falling back to
  ``policy.compat32`` for headers the default policy cannot read). ``budget`` first fits the bytes
  to a parse budget, so hostile mail parses in bounded time and memory; ``htmltext`` renders HTML
  bodies as plain text. Problems become ``defects`` on the result; nothing raises for bad mail,
  and undecodable bytes, like whatever the budget left unparsed, survive in the stored raw copy.
- ``threading`` decides which thread a message joins from Message-ID, In-Reply-To and References
  (RFC 5322 section 3.6.4), with a subject fallback only for Re:/Fwd: messages lacking both.
- ``quotes`` separates a message's new text from quoted history and its signature.
- ``attachment_types`` gives each attachment the one kind that ``type:``, the facet and
  extraction use.
- ``store`` owns the mail tables (messages, threads, thread_refs, thread_aliases, raw_messages,
  attachments) and their SQL, and is the one writer of labels and read state; ``contacts`` owns the people a mailbox exchanges mail with.
- ``trust`` judges how far a sender can be believed and owns ``message_trust``: the verdict from
  the Authentication-Results a trusted server added (``auth_results``, RFC 8601) or from DKIM
  verified at ingest (``signatures``, dkimpy), whether the mailbox wrote to the sender, and
  flags such as lookalike domains (``domains``). ``verification`` finds the code or link of an
  authenticated verification mail for ``mail_wait``.
- ``triage`` gives each message a category, urgency and risk flags and owns ``message_triage``;
  ``spam`` scores the signals of unsolicited mail that put it in ``spam``. Their phrase patterns
  (and ``refs``' keyword patterns) run behind ``prefilter``'s literal gates: a pattern is only
  searched in a text that holds one of the strings every match of it needs.
- ``ingest`` ties parse, store, trust, triage and the search index together for one message.

The raw bytes are always stored, so a message that parses badly is kept and can be re-parsed.
"""

__all__: list[str] = []
