"""The official MCP conformance suite's fixtures and baseline, for ``tests/e2e/test_conformance.py``.

``fixtures.py`` defines the tools and prompts the suite calls by name (PROTOCOL.md section 3);
they are registered only by the conformance test's own app, never by the product.
``baseline-*.yml`` list the scenarios expected to fail, each for a feature the product does not
offer. ``inject-auth.mjs`` is the Node preload that adds the bearer key to the suite's requests.
"""
