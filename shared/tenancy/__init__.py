"""Partners, tenants, identities and their addresses (the tables ``store`` owns)."""

from shared.tenancy.store import Identity, Partner, Tenant

__all__ = ["Identity", "Partner", "Tenant"]
