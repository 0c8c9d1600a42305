"""The selector loads what the environment asks for, and says so."""

from __future__ import annotations

import importlib.machinery
import os
import sys
from pathlib import Path

import pytest

import trio_mcp
from trio_mcp import _speedups

EXTENSION = importlib.machinery.EXTENSION_SUFFIXES[0]


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


def test_request_path_is_loaded_from_the_chosen_files() -> None:
    # Every module of the request path is imported by trio_mcp/__init__.py.
    files = {
        name: sys.modules[f"trio_mcp.{name}"].__file__ or ""
        for name in _speedups.SOURCE_COMPILED_MODULES
    }
    if _speedups.REQUIRE_EXTENSIONS and not _speedups.NO_EXTENSIONS:
        assert _speedups.REQUEST_PATH_COMPILED
    if _speedups.REQUEST_PATH_COMPILED:
        assert all(f.endswith((".so", ".pyd")) for f in files.values()), files
    else:
        assert all(f.endswith(".py") for f in files.values()), files


def test_no_other_module_is_compiled() -> None:
    # An extension module that the selector does not know of would shadow its
    # .py even under TRIO_MCP_NO_EXTENSIONS=1.
    known = {
        f"trio_mcp.{n}" for n in (*_speedups.COMPILED_MODULES, *_speedups.SOURCE_COMPILED_MODULES)
    }
    compiled = {
        name
        for name, module in list(sys.modules.items())
        if name.startswith("trio_mcp.")
        and (getattr(module, "__file__", None) or "").endswith((".so", ".pyd"))
    }
    assert compiled <= known, compiled - known
    if _speedups.NO_EXTENSIONS:
        assert not compiled, compiled


def _tree(tmp_path: Path, built: dict[str, int]) -> Path:
    """A package folder with modules a and sub.b; `built` maps a module to the
    age of its extension relative to its source (seconds, positive = newer)."""
    (tmp_path / "sub").mkdir()
    for name in ("a", "sub.b"):
        source = tmp_path / (name.replace(".", "/") + ".py")
        source.write_text("")
        os.utime(source, (1_000_000, 1_000_000))
        if name in built:
            ext = tmp_path / (name.replace(".", "/") + EXTENSION)
            ext.write_bytes(b"")
            os.utime(ext, (1_000_000 + built[name],) * 2)
    return tmp_path


def _choose(tree: Path, **flags: bool) -> tuple[dict[str, str], bool]:
    options = {"no_extensions": False, "require": False, "in_checkout": True, **flags}
    return _speedups.choose_request_path(str(tree), ["a", "sub.b"], **options)


def test_all_built_loads_the_extensions(tmp_path: Path) -> None:
    locations, compiled = _choose(_tree(tmp_path, {"a": 5, "sub.b": 5}))
    assert compiled
    assert locations == {
        "a": str(tmp_path / ("a" + EXTENSION)),
        "sub.b": str(tmp_path / "sub" / ("b" + EXTENSION)),
    }


def test_no_extensions_loads_the_sources_even_when_built(tmp_path: Path) -> None:
    locations, compiled = _choose(_tree(tmp_path, {"a": 5, "sub.b": 5}), no_extensions=True)
    assert not compiled
    assert locations == {"a": str(tmp_path / "a.py"), "sub.b": str(tmp_path / "sub" / "b.py")}


def test_one_missing_extension_loads_every_source(tmp_path: Path) -> None:
    locations, compiled = _choose(_tree(tmp_path, {"a": 5}))
    assert not compiled
    assert locations == {"a": str(tmp_path / "a.py"), "sub.b": str(tmp_path / "sub" / "b.py")}
    with pytest.raises(ImportError, match=r"sub\.b is not built.*build_ext --inplace"):
        _choose(tmp_path, require=True)


def test_missing_extensions_in_an_installed_package_say_how_to_install_them(
    tmp_path: Path,
) -> None:
    # Not source-checkout advice: an installed package gets its compiled
    # modules from a wheel, or from the sdist built with a C compiler.
    tree = _tree(tmp_path, {})
    with pytest.raises(ImportError) as raised:
        _choose(tree, require=True, in_checkout=False)
    message = str(raised.value)
    assert "no module of the request path is built" in message
    assert "this is a pure-Python build" in message
    assert "pip install --force-reinstall --no-deps --only-binary=trio-mcp trio-mcp" in message
    assert "--no-binary=trio-mcp" in message and "C compiler" in message
    assert "build_ext --inplace" not in message
    # A pure build made because the compiled one failed says what failed.
    (tree / _speedups.PURE_BUILD_NOTE).write_text("compiling trio_mcp._httphead failed: X\n")
    with pytest.raises(
        ImportError, match=r"the compiled build failed \(compiling trio_mcp\._httphead failed: X\)"
    ):
        _choose(tree, require=True, in_checkout=False)


def test_the_failure_note_is_read_only_when_there(tmp_path: Path) -> None:
    assert _speedups.compiled_build_failure(str(tmp_path)) is None
    (tmp_path / _speedups.PURE_BUILD_NOTE).write_text("no compiler\n")
    assert _speedups.compiled_build_failure(str(tmp_path)) == "no compiler"


def test_build_description_says_which_build_runs() -> None:
    description = _speedups.build_description()
    assert (description == "compiled") is _speedups.USING_EXTENSIONS
    if _speedups.NO_EXTENSIONS and os.environ.get("TRIO_MCP_NO_EXTENSIONS"):
        assert description == "pure Python (TRIO_MCP_NO_EXTENSIONS is set)"


def test_stale_extension_in_a_checkout_is_not_loaded(tmp_path: Path) -> None:
    # An edited .py must never be hidden by the extension built before the edit.
    tree = _tree(tmp_path, {"a": 5, "sub.b": -5})
    locations, compiled = _choose(tree)
    assert not compiled
    assert locations["a"] == str(tmp_path / "a.py")
    with pytest.raises(ImportError, match="is older than"):
        _choose(tree, require=True)
    # An installed package is not edited; file times there say nothing.
    assert _choose(tree, in_checkout=False)[1]


def test_installed_package_is_the_one_tested() -> None:
    # CI sets TRIO_MCP_TEST_INSTALLED=1 when it runs the suite against the wheel.
    expect_installed = os.environ.get("TRIO_MCP_TEST_INSTALLED") == "1"
    in_site_packages = "site-packages" in (trio_mcp.__file__ or "")
    assert in_site_packages or not expect_installed, trio_mcp.__file__


def test_edited_pxd_makes_the_extension_stale(tmp_path: Path) -> None:
    tree = _tree(tmp_path, {"a": 5, "sub.b": 5})
    pxd = tree / "a.pxd"
    pxd.write_text("")
    os.utime(pxd, (1_000_000 + 10,) * 2)  # after the build
    with pytest.raises(ImportError, match=r"older than .*a\.pxd"):
        _choose(tree, require=True)
    os.utime(pxd, (1_000_000,) * 2)  # before it
    assert _choose(tree, require=True)[1]


def test_the_finder_leaves_missing_files_to_the_usual_machinery(tmp_path: Path) -> None:
    present = tmp_path / "a.py"
    present.write_text("")
    finder = _speedups.RequestPathFinder(
        {"pkg.a": str(present), "pkg.gone": str(tmp_path / "gone.py")}
    )
    spec = finder.find_spec("pkg.a", None)
    assert spec is not None and spec.origin == str(present)
    assert finder.find_spec("pkg.gone", None) is None  # e.g. a bundled application
    assert finder.find_spec("pkg.other", None) is None
