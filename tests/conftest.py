"""Shared fixtures.

`impl` runs a test once against the pure-Python twins ("py") and once against
the compiled modules ("c"). The "c" case exists when the compiled modules
import; with TRIO_MCP_REQUIRE_EXTENSIONS=1 a missing one is an error, and with
TRIO_MCP_NO_EXTENSIONS=1 only the twins run.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings

from trio_mcp import _speedups

# In a fresh directory (scripts/test runs in one) the first test that draws text
# waits while Hypothesis builds its Unicode tables, over a second on a slow
# machine, and the too_slow health check blames the test for it. The tests check
# behaviour, not how fast Hypothesis generates inputs.
settings.register_profile("trio-mcp", suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("trio-mcp")


@dataclass(frozen=True)
class Impl:
    kind: str
    httphead: ModuleType
    headers: ModuleType
    sentinel: ModuleType
    sse: ModuleType
    wakeups: ModuleType


def _load(kind: str) -> Impl:
    suffix = "_py" if kind == "py" else ""
    mods = {
        name.lstrip("_"): importlib.import_module(f"trio_mcp.{name}{suffix}")
        for name in _speedups.COMPILED_MODULES
    }
    return Impl(kind=kind, **mods)


def _kinds() -> list[str]:
    if _speedups.NO_EXTENSIONS:
        return ["py"]
    try:
        _load("c")
    except ImportError:
        if _speedups.REQUIRE_EXTENSIONS:
            raise
        return ["py"]
    return ["py", "c"]


IMPL_KINDS = _kinds()


@pytest.fixture(params=IMPL_KINDS)
def impl(request: pytest.FixtureRequest) -> Impl:
    return _load(request.param)


@pytest.fixture
def py_impl() -> Impl:
    return _load("py")


@pytest.fixture(params=[k for k in IMPL_KINDS if k == "c"])
def compiled_impl(request: pytest.FixtureRequest) -> Impl:
    """The compiled modules (differential tests compare them with `py_impl`)."""
    return _load(request.param)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without compiled modules there is nothing to compare: deselect, don't skip."""
    if "c" in IMPL_KINDS:
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        uses_compiled = "compiled_impl" in getattr(item, "fixturenames", ())
        (drop if uses_compiled else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
