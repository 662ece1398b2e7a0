"""Partners, tenants, identities and their addresses (the tables ``store`` owns)."""

from shared.tenancy.store import Identity, Tenant

__all__ = ["Identity", "Tenant"]
