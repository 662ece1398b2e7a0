"""arq workers: thin job functions that call into ``shared`` and publish through ``shared.events``."""

__all__: list[str] = []
