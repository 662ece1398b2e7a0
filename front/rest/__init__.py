"""The REST API v1 under ``/v1``: ``endpoints`` (the table), ``routes`` (the handlers, on the
one call pipeline), ``openapi`` (the document) and ``errors`` (the one error renderer)."""

__all__: list[str] = []
