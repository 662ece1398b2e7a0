"""Attachment text: what ``mail_get_attachment_text`` reads (spec section 4.3), extracted on
the batch workers, never in the front or the importer's loop.

Where things happen:

- ``detect`` decides an attachment's format from its magic bytes, extension and content type.
- ``limits`` names every limit a file is read under; ``outcome`` the statuses (``pending``,
  ``ready``, ``unavailable``, ``skipped``) and their reasons.
- ``sandbox`` reads one file in a new, resource-limited Python process (``child``) with a
  wall-clock deadline, so a zip bomb, a looping PDF or a hanging parser ends ``unavailable`` and the worker
  goes on.
- Inside the sandbox, ``formats`` picks the reader: ``pypdf`` (here), ``sheets`` (XLSX, XLS),
  ``slides`` (PPTX), ``wordml`` (DOCX), ``msdoc`` (DOC), ``opendoc`` (ODT), striprtf, inscriptis;
  ``zipguard`` checks a zip's directory before any of them opens it; ``pages`` defines what a
  page is for formats that have none and applies the size limits.
- ``store`` owns ``attachment_texts``: ingest queues attachments, the batch worker drains the
  queue (several workers safely), and the tool reads pages.
"""

__all__: list[str] = []
