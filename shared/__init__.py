"""Pylota Mail's domain core.

Holds configuration, ids, the error catalog, the database and its migrations, keys and auth,
mail (parsing, threading, storage, import), search, events and the tool registry. It imports
neither ``front`` nor ``workers``, nor Litestar or arq (STYLE.md section 2).
"""

__all__: list[str] = []
