"""The selector loads what the environment asks for, and says so."""

from __future__ import annotations

import os

import trio_mcp
from trio_mcp import _speedups


def test_compiled_modules_are_really_used_when_required() -> None:
    # With TRIO_MCP_REQUIRE_EXTENSIONS=1 (CI, wheel tests) a silent fallback to
    # the twins would be a failure; without it, the selector must be truthful.
    modules = _speedups.loaded_modules()
    compiled = [m.__file__ or "" for m in modules.values()]
    if _speedups.REQUIRE_EXTENSIONS and not _speedups.NO_EXTENSIONS:
        assert _speedups.USING_EXTENSIONS
        assert all(f.endswith((".so", ".pyd")) for f in compiled), compiled
    elif _speedups.NO_EXTENSIONS:
        assert not _speedups.USING_EXTENSIONS
        assert all(f.endswith("_py.py") for f in compiled), compiled
    assert trio_mcp.USING_EXTENSIONS is _speedups.USING_EXTENSIONS
    assert trio_mcp.HTTPServer.__init__ is not None


def test_installed_package_is_the_one_tested() -> None:
    # CI sets TRIO_MCP_TEST_INSTALLED=1 when it runs the suite against the wheel.
    expect_installed = os.environ.get("TRIO_MCP_TEST_INSTALLED") == "1"
    in_site_packages = "site-packages" in (trio_mcp.__file__ or "")
    assert in_site_packages or not expect_installed, trio_mcp.__file__
