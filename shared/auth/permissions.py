"""Permission names (DESIGN.md section 5.2) and which key levels may hold them."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Permission", "KeyLevel", "FORBIDDEN_FOR_LEVEL", "parse_permissions"]


class Permission(StrEnum):
    """What a key may do; tool permissions are in the tool registry."""

    IDENTITIES_READ = "identities:read"
    IDENTITIES_SIGN = "identities:sign"
    MESSAGES_READ = "messages:read"
    MESSAGES_WRITE = "messages:write"
    MESSAGES_SEND = "messages:send"
    SEARCH_READ = "search:read"
    CONTACTS_READ = "contacts:read"
    USAGE_READ = "usage:read"


class KeyLevel(StrEnum):
    """Who a key speaks for, widest first."""

    PLATFORM = "platform"
    PARTNER = "partner"
    TENANT = "tenant"
    IDENTITY = "identity"


#: Platform and partner keys can never hold these (DESIGN.md section 5.2).
FORBIDDEN_FOR_LEVEL: dict[KeyLevel, frozenset[Permission]] = {
    KeyLevel.PLATFORM: frozenset({Permission.IDENTITIES_SIGN, Permission.USAGE_READ}),
    KeyLevel.PARTNER: frozenset({Permission.IDENTITIES_SIGN, Permission.USAGE_READ}),
    KeyLevel.TENANT: frozenset(),
    KeyLevel.IDENTITY: frozenset(),
}


def parse_permissions(text: str) -> list[Permission]:
    """Parse ``"search:read,messages:read"``; ``all`` means every permission.

    Raises:
        ValueError: a name is not a permission; the message lists the valid names.
    """
    names = [p.strip() for p in text.split(",") if p.strip()]
    if names == ["all"]:
        return list(Permission)
    out = []
    for name in names:
        if name == "all":  # "all,identities:sign" read as an unknown permission 'all'
            raise ValueError("'all' stands alone: it is every permission; or list the ones "
                             "wanted, comma-separated")
        try:
            out.append(Permission(name))
        except ValueError:
            valid = ", ".join(p.value for p in Permission)
            raise ValueError(f"unknown permission {name!r}; use 'all' or some of: {valid}") from None
    if not out:
        raise ValueError("no permissions given; use 'all' or a comma-separated list")
    return sorted(set(out))
