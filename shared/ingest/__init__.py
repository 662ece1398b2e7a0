"""Mail coming in: one raw message through parse, store, triage and the search index.

- ``pipeline`` ingests one raw message (``ingest_raw``): the one path for ``pylota import``, the
  SMTP listener and sent mail, so every message gets the same threading, triage, references and
  new-mail announcement.
- ``importer`` walks files, mbox files and maildirs (``shared.mail.sources``) into the pipeline.
- ``reindex`` derives again, for mail already stored, what the pipeline derives.

It sits above ``shared.mail`` and ``shared.search``/``shared.embeddings``, which never import it.
"""

__all__: list[str] = []
