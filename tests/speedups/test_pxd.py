"""The request path's .pxd files declare its hot classes as C types; they must
match the classes' ``__slots__`` in the .py, and the compiled build must use them.

A slot that the .pxd lacks would be an AttributeError in the compiled build
only; a .pxd left out of the sdist would quietly build plain classes.
"""

from __future__ import annotations

import ast
import importlib
import re
import types
from pathlib import Path

import pytest

from trio_mcp import _speedups

SRC = Path(__file__).resolve().parents[2] / "src" / "trio_mcp"
PXDS = sorted(SRC.rglob("*.pxd"))


def _declared(pxd: Path) -> dict[str, set[str]]:
    """class name -> the attributes its ``cdef public <type>`` lines declare."""
    classes: dict[str, set[str]] = {}
    current = None
    for line in pxd.read_text().splitlines():
        if match := re.match(r"cdef class (\w+):", line):
            current = classes.setdefault(match[1], set())
        elif match := re.match(r"\s+cdef public \w+ (.+)", line):
            assert current is not None, line
            current.update(name.strip() for name in match[1].split(","))
    return classes


def _module_name(pxd: Path) -> str:
    return ".".join(pxd.relative_to(SRC).with_suffix("").parts)


def test_every_pxd_belongs_to_a_module_compiled_from_source() -> None:
    assert PXDS, SRC
    for pxd in PXDS:
        assert _module_name(pxd) in _speedups.SOURCE_COMPILED_MODULES, pxd


@pytest.mark.parametrize("pxd", PXDS, ids=lambda p: _module_name(p))
def test_pxd_declares_exactly_the_slots(pxd: Path) -> None:
    tree = ast.parse(pxd.with_suffix(".py").read_text())
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    for name, attributes in _declared(pxd).items():
        node = classes[name]
        slots = [
            ast.literal_eval(stmt.value)
            for stmt in node.body
            if isinstance(stmt, ast.Assign)
            and any(getattr(t, "id", None) == "__slots__" for t in stmt.targets)
        ]
        assert len(slots) == 1, f"{name} must have __slots__"
        assert set(slots[0]) == attributes, (name, set(slots[0]) ^ attributes)
        # Cython refuses decorators on a C type (finality is in the .pxd)
        assert not node.decorator_list, name


@pytest.mark.parametrize("pxd", PXDS, ids=lambda p: _module_name(p))
def test_the_build_in_use_has_the_classes_it_should(pxd: Path) -> None:
    module = importlib.import_module(f"trio_mcp.{_module_name(pxd)}")
    for name, attributes in _declared(pxd).items():
        cls = getattr(module, name)
        for attribute in attributes:
            descriptor = vars(cls)[attribute]
            if _speedups.REQUEST_PATH_COMPILED:  # a C type's declared attribute
                assert isinstance(descriptor, types.GetSetDescriptorType), (name, attribute)
            else:  # a slot of a Python class
                assert isinstance(descriptor, types.MemberDescriptorType), (name, attribute)
