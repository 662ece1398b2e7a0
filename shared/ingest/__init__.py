"""Mail coming in: one raw message through parse, store, triage and the search index.

- ``prepare`` derives what needs no database from a raw message: its parse, new text, triage
  draft and references (on the importer's worker processes, or in process).
- ``pipeline`` ingests one raw message (``ingest_raw``): the path for the SMTP listener and sent
  mail, and for the import's messages a batch could not store.
- ``batch`` ingests many prepared messages in one transaction (``ingest_batch``), with the same
  threading, de-duplication, trust, triage, references and new-mail announcement as one at a time.
- ``importer`` walks files, mbox files and maildirs (``shared.mail.sources``) through worker
  processes into batches.
- ``reindex`` derives again, for mail already stored, what the pipeline derives.

It sits above ``shared.mail`` and ``shared.search``/``shared.embeddings``, which never import it.
"""

__all__: list[str] = []
