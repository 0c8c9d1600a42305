"""The sans-IO core must not import trio; the public surface is a guarded list."""

from __future__ import annotations

import subprocess
import sys

import trio_mcp
from trio_mcp import _speedups

SANS_IO_MODULES = [
    "trio_mcp._config",
    "trio_mcp._errors",
    "trio_mcp._http._connection",
    "trio_mcp._json",
    "trio_mcp._protocol._jsonrpc",
    "trio_mcp._protocol._sessions",
    "trio_mcp._protocol._admission",
    "trio_mcp._protocol._revisions",
    "trio_mcp._app._content",
    "trio_mcp._speedups",
    "trio_mcp._httphead_py",
    "trio_mcp._headers_py",
    "trio_mcp._sentinel_py",
    "trio_mcp._sse_py",
    "trio_mcp._wakeups_py",
]

# Import the package's modules without running trio_mcp/__init__.py (which
# imports the trio shell), with trio made unimportable.
_PROBE = """
import importlib, importlib.util, sys, types
sys.modules["trio"] = None
spec = importlib.util.find_spec("trio_mcp")
package = types.ModuleType("trio_mcp")
package.__path__ = list(spec.submodule_search_locations)
sys.modules["trio_mcp"] = package
for name in sys.argv[1:]:
    importlib.import_module(name)
assert not any(m == "trio" or m.startswith("trio.") for m in sys.modules if sys.modules[m] is not None)
print("ok")
"""


def test_sans_io_modules_import_without_trio() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, *SANS_IO_MODULES],
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
        "RemoteProtocolError",
        "Request",
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
        "serve",
        "serve_mcp",
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
