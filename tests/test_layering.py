"""The layers of DESIGN.md, enforced: which folder may import which, no cycles,
no trio below the shell; and the public surface is a guarded list.

The import graph is read from the source (AST), imports inside functions and
under ``if TYPE_CHECKING:`` included: a type-only import that stands for a
call back at run time is still a cycle. A second check imports every module of
the sans-IO folders with trio made unimportable, so a dynamic import cannot
slip past the first.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import trio_mcp
from trio_mcp import _speedups

PACKAGE_DIR = Path(trio_mcp.__file__).resolve().parent

#: Modules at the package's top level, by the layer they belong to.
_TOP_LEVEL = {
    "_errors": "base",
    "_json": "base",
    "_config": "base",
    "_version": "base",
    "_logs": "base",
    "_speedups": "speedups",
    "_cli": "entry",
    "_settings": "entry",
    "__main__": "entry",
    "__init__": "entry",
    "testing": "entry",  # the in-memory test client: a public submodule
    "_testing_http": "entry",
    # --workers: the supervisor, a worker process's main, and their channel
    "_workers": "entry",
    "_worker": "entry",
    "_control": "entry",
}

#: What each layer may import besides itself (DESIGN.md "Layers"; the base
#: modules import nothing of ours, not even each other).
ALLOWED: dict[str, frozenset[str]] = {
    "base": frozenset(),
    "speedups": frozenset({"base"}),
    "_http": frozenset({"base", "speedups"}),
    "_protocol": frozenset({"base", "speedups", "_http"}),
    "_app": frozenset({"base", "speedups", "_protocol"}),
    "_stores": frozenset({"base", "speedups", "_http", "_protocol"}),
    "_trio": frozenset({"base", "speedups", "_http"}),
    # metrics and the access log: handed to _trio through _http's HTTPObserver
    "_observe": frozenset({"base"}),
    "_mcp": frozenset(
        {"base", "speedups", "_http", "_protocol", "_app", "_stores", "_trio", "_observe"}
    ),
    "_bench": frozenset({"base"}),
    "entry": frozenset(
        {
            "base",
            "speedups",
            "_http",
            "_protocol",
            "_app",
            "_stores",
            "_trio",
            "_observe",
            "_mcp",
            "_bench",
        }
    ),
}
#: Layers that never await and never import trio.
SANS_IO = frozenset({"base", "speedups", "_http", "_protocol", "_app"})
#: Modules that import nothing of their own layer (what others build on).
LEAVES = frozenset({"_mcp._streams"})
_TRIO = ("trio", "outcome")


def layer_of(module: str) -> str:
    """The layer of `module`, a name relative to the package (``_mcp._streams``)."""
    head = module.split(".")[0]
    if head in _TOP_LEVEL:
        return _TOP_LEVEL[head]
    if head.endswith("_py") or head in _speedups.COMPILED_MODULES:  # ext/ and its twins
        return "speedups"
    if "." not in module and head not in ALLOWED:
        raise AssertionError(f"module {module} is in no layer: add it to _TOP_LEVEL")
    return head


def _modules(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, list[str], int]]:
    """(absolute module, names imported from it, line) of every import in
    `tree`, nested ones included; the names are empty for ``import x``."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module or ""
            else:
                up = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join(["trio_mcp", *up, *([node.module] if node.module else [])])
            yield base, [alias.name for alias in node.names], node.lineno


def import_graph(root: Path) -> dict[str, list[tuple[str, int]]]:
    """For each module of the package at `root` (names relative to it), the
    modules of the package it imports, and trio or outcome (as ``trio``)."""
    modules = _modules(root)
    # the compiled leaf functions (ext/) have no .py: they count as modules here
    known = set(modules) | set(_speedups.COMPILED_MODULES)
    graph: dict[str, list[tuple[str, int]]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        edges = []
        for base, names, line in _imports(tree, name, path.name == "__init__.py"):
            if base.split(".")[0] in _TRIO:
                edges.append(("trio", line))
                continue
            if base != "trio_mcp" and not base.startswith("trio_mcp."):
                continue
            relative = base[len("trio_mcp.") :]
            # `from package import module` imports the module
            targets = [f"{relative}.{n}".lstrip(".") for n in names]
            targets = [t for t in targets if t in known] or [relative or "__init__"]
            edges.extend((t, line) for t in targets if t in known and t != name)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """The import cycles of `graph` (one path each), by depth-first search."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for target, _ in graph.get(node, ()):
            if target == "trio":
                continue
            if state.get(target) == 1:
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def problems(root: Path) -> list[str]:
    """Every breach of the layer rules in the package at `root`."""
    graph = import_graph(root)
    found = []
    for module, edges in sorted(graph.items()):
        layer = layer_of(module)
        for target, line in edges:
            where = f"{module} (line {line})"
            if target == "trio":
                if layer in SANS_IO:
                    found.append(f"{where} imports trio, in the sans-IO layer {layer}")
                continue
            target_layer = layer_of(target)
            if target_layer == layer:
                if layer == "base" or module in LEAVES:
                    found.append(f"{where} imports {target}: {module} imports nothing of {layer}")
            elif target_layer not in ALLOWED[layer]:
                found.append(f"{where} imports {target}: {layer} may not import {target_layer}")
    for cycle in _cycles(graph):
        found.append("import cycle: " + " -> ".join(cycle))
    return found


def test_the_package_keeps_its_layers() -> None:
    assert problems(PACKAGE_DIR) == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for folder in {p.parent for p in root.rglob("*.py")} - {root}:
        (folder / "__init__.py").touch()
    (root / "__init__.py").touch()
    return root


def test_a_cycle_is_caught(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "_mcp/_endpoint.py": "from ._runner import run\n",
            "_mcp/_runner.py": "def run(): from ._endpoint import x\n",
        },
    )
    assert problems(root) == ["import cycle: _mcp._endpoint -> _mcp._runner -> _mcp._endpoint"]


def test_a_type_only_import_still_counts(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "_mcp/_endpoint.py": "from ._streams import PostStream\n",
            "_mcp/_streams.py": """\
                from typing import TYPE_CHECKING
                if TYPE_CHECKING:
                    from ._endpoint import MCPEndpoint
                """,
        },
    )
    found = problems(root)
    assert "import cycle: _mcp._endpoint -> _mcp._streams -> _mcp._endpoint" in found
    assert any(p.startswith("_mcp._streams (line 3) imports _mcp._endpoint") for p in found)


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "_protocol/_sessions.py": "from .._mcp._endpoint import MCPEndpoint\n",
            "_mcp/_endpoint.py": "MCPEndpoint = 1\n",
            "_errors.py": "from ._json import dumps\n",
            "_json.py": "dumps = 1\n",
        },
    )
    assert problems(root) == [
        "_errors (line 1) imports _json: _errors imports nothing of base",
        "_protocol._sessions (line 1) imports _mcp._endpoint: _protocol may not import _mcp",
    ]


def test_trio_below_the_shell_is_caught(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "_http/_connection.py": "def f():\n    import trio.lowlevel\n",
            "_app/_context.py": "from outcome import Value\n",
            "_trio/_server.py": "import trio\n",
        },
    )
    assert problems(root) == [
        "_app._context (line 1) imports trio, in the sans-IO layer _app",
        "_http._connection (line 2) imports trio, in the sans-IO layer _http",
    ]


def _sans_io_modules() -> list[str]:
    """Every module of the sans-IO layers, found from the folders."""
    return [
        f"trio_mcp.{name}"
        for name in _modules(PACKAGE_DIR)
        if name != "__init__" and layer_of(name) in SANS_IO
    ]


# Import the package's modules without running trio_mcp/__init__.py (which
# imports the trio shell), with trio made unimportable.
_PROBE = """
import importlib, importlib.util, sys, types
sys.modules["trio"] = None
sys.modules["outcome"] = None
spec = importlib.util.find_spec("trio_mcp")
package = types.ModuleType("trio_mcp")
package.__path__ = list(spec.submodule_search_locations)
sys.modules["trio_mcp"] = package
importlib.import_module("trio_mcp._speedups")  # (it picks compiled or source, as in use)
for name in sys.argv[1:]:
    importlib.import_module(name)
assert not any(m == "trio" or m.startswith("trio.") for m in sys.modules if sys.modules[m] is not None)
print("ok")
"""


def test_sans_io_modules_import_without_trio() -> None:
    names = _sans_io_modules()
    assert {"trio_mcp._http._connection", "trio_mcp._protocol._jsonrpc"} <= set(names)
    assert "trio_mcp._trio._server" not in names
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *names],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_probe_would_catch_a_trio_import() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, "trio_mcp._trio._server"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "trio" in result.stderr


@pytest.mark.parametrize("module", ["trio_mcp", "trio_mcp._bench._worker", "trio_mcp._cli"])
def test_every_module_has_a_layer(module: str) -> None:
    for name in _modules(PACKAGE_DIR):
        assert layer_of(name) in ALLOWED, name
    assert module.startswith("trio_mcp")


def test_public_names() -> None:
    assert sorted(trio_mcp.__all__) == [
        "Authenticator",
        "Authorizer",
        "Content",
        "Context",
        "DeferredResponse",
        "HTTPServer",
        "HTTPServerStatistics",
        "Handler",
        "HeaderValueError",
        "LocalProtocolError",
        "MCPConfig",
        "MCPEndpoint",
        "MCPError",
        "MCPStatistics",
        "RemoteProtocolError",
        "Request",
        "ResourceError",
        "ResourceNotFound",
        "Response",
        "ResponseWriter",
        "Server",
        "ServerConfig",
        "StreamingResponse",
        "ToolError",
        "TrioMCPError",
        "USING_EXTENSIONS",
        "__version__",
        "audio_content",
        "embedded_blob",
        "embedded_text",
        "image_content",
        "method_not_allowed",
        "resource_link",
        "run",
        "run_mcp",
        "run_stdio",
        "serve",
        "serve_mcp",
        "serve_stdio",
        "text_content",
    ]
    for name in trio_mcp.__all__:
        assert hasattr(trio_mcp, name)
    # Public names show as trio_mcp.X, except the classes that the compiled
    # request path defines in C (its .pxd files): a C type keeps its module.
    for name in ("run_mcp", "HTTPServerStatistics", "Server", "MCPError"):
        assert getattr(trio_mcp, name).__module__ == "trio_mcp", name
    for name in ("HTTPServer", "MCPEndpoint", "Context", "Request", "Response"):
        module = getattr(trio_mcp, name).__module__
        if _speedups.REQUEST_PATH_COMPILED:
            assert module.startswith("trio_mcp._"), (name, module)
        else:
            assert module == "trio_mcp", (name, module)
