"""API keys and the principal a bearer key resolves to (spec section 3)."""

from shared.auth.keys import Principal, authenticate, create_key
from shared.auth.permissions import Permission

__all__ = ["Permission", "Principal", "authenticate", "create_key"]
