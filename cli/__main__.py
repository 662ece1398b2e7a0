"""``python -m cli``: the ``pylota`` command."""

from cli.main import main

main()
