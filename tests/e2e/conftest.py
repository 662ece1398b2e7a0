"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import pytest

from tests.e2e.transport_kit import JS_SKIP_REASON, JsTools, js_tools


@pytest.fixture(scope="session")
def js() -> JsTools:
    """Node 22 and the MCP JS tools; skips the test, saying how to install them, when absent."""
    tools = js_tools()
    if tools is None:
        pytest.skip(JS_SKIP_REASON)
    return tools
