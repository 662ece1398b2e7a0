"""The package exports nothing itself and each module's ``__all__`` names what it defines."""

from __future__ import annotations

import importlib

import pytest

import shared.extract

MODULES = ["child", "detect", "formats", "limits", "msdoc", "opendoc", "outcome", "pages",
           "sandbox", "sheets", "slides", "store", "wordml", "zipguard"]


def test_the_package_exports_nothing():
    assert shared.extract.__all__ == []


@pytest.mark.parametrize("name", MODULES)
def test_each_module_defines_what_it_exports(name):
    module = importlib.import_module(f"shared.extract.{name}")
    assert module.__all__ and all(hasattr(module, symbol) for symbol in module.__all__)
