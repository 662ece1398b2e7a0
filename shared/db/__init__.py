"""PostgreSQL access: the pool and the migrations (DESIGN.md section 4).

Tables are owned by the modules that hold their SQL (``shared.mail.store``, ``shared.auth.keys``,
``shared.tenancy.store``, …); nothing here knows about mail.
"""

from shared.db.migrate import ensure_database, migrate
from shared.db.pool import Database, connect, open_database

__all__ = ["Database", "connect", "open_database", "ensure_database", "migrate"]
