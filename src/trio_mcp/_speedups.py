"""Pick the compiled hot path or its pure-Python twins, once, at import.

- ``TRIO_MCP_NO_EXTENSIONS=1`` (or a non-CPython interpreter) uses the twins.
- Otherwise the compiled modules are used when they import; if they don't,
  ``TRIO_MCP_REQUIRE_EXTENSIONS=1`` turns that into an ImportError instead of
  a quiet fallback (CI and the wheel tests set it), which says how to get
  them: in a checkout, by building them in place; in an installed package,
  from a wheel or from the sdist with a C compiler.
- `build_description()` says which build runs, and why when it is the pure
  one (``trio-mcp --version``, the start-up line). An install from the sdist
  whose compiled build failed is pure; setup.py leaves what failed in the
  package (`PURE_BUILD_NOTE`), since pip shows the build's output only with
  ``-v``.

There are two kinds of compiled module:

- the leaf functions over buffers, hand-written in ``ext/*.pyx``; their twins
  (``_name_py.py``) define the behaviour and the compiled modules must match
  them. Everything that calls one imports it from here;
- the request path (`SOURCE_COMPILED_MODULES`), compiled by Cython from its own
  ``.py`` source without any change: the ``.py`` is the twin, so the two cannot
  differ in behaviour. Python would always import the extension module over a
  ``.py`` of the same name, so a finder installed here (``trio_mcp/__init__.py``
  imports this module first) loads the one chosen: the compiled modules, all
  of them, or else the sources, all of them.

Cython knows the type of little on the request path (annotations are not used
for typing, so the ``.py`` stays an exact twin), and what it does not know it
reaches through CPython's generic machinery. Seven habits of this code come
from that; each was measured with ``benchmarks/instructions.py`` (the numbers
are in benchmarks/README.md) and belongs only where a request passes:

- dict methods are called through the class, ``dict.get(d, key)``, not
  ``d.get(key)``: Cython then calls the C function directly instead of
  looking ``get`` up by name on an object of unknown type (the same for
  ``dict.setdefault`` and ``dict.pop``). Only for values that are always a
  ``dict``;
- classes with a ``.pxd`` (C types) are created with positional arguments:
  keywords make a dict per call on the way to their ``__init__``;
- ``Enum`` members read per request are module globals: through their class,
  CPython 3.11 takes a slow path for each;
- a synchronous method that a class calls on itself, or another compiled
  module calls, per request is declared ``cpdef`` in its ``.pxd``, so that
  call is a C call (from elsewhere it is called as before);
- a method with optional arguments is not called on a value of unknown type
  per request (``buf.startswith(x, pos)``): an ``in`` test or indexing does
  the common case, and a local that is always ``bytes`` is typed in the
  ``.pxd`` (``@cython.locals`` on a ``cpdef`` declaration), which makes its
  ``decode`` a C call;
- an attribute that always holds one of our C types is declared with that
  type in the ``.pxd`` (``cdef public SessionTable sessions``, cimported from
  the other module's ``.pxd``), and so is a local in a ``cpdef`` method
  (``@cython.locals``): its attributes are then struct reads and its
  ``cpdef`` methods C calls. A synchronous part of a coroutine that touches
  several such objects becomes a ``cpdef`` method of its own
  (``ConnectionWriter._respond_now``). Assigning a value of another type is a
  TypeError in the compiled build only, so this is for values our own code
  creates;
- what is read per request from another module is imported by name
  (``from math import inf``, ``from functools import partial``): a module
  global is one cached lookup, ``math.inf`` a global lookup and then a module
  attribute lookup.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING

NO_EXTENSIONS = bool(os.environ.get("TRIO_MCP_NO_EXTENSIONS")) or (
    sys.implementation.name != "cpython"
)
REQUIRE_EXTENSIONS = bool(os.environ.get("TRIO_MCP_REQUIRE_EXTENSIONS"))

#: The names of the compiled modules; each has a twin named ``<name>_py``.
COMPILED_MODULES = ("_httphead", "_headers", "_sentinel", "_sse", "_wakeups")

#: The request path, compiled from the unchanged ``.py`` (setup.py reads both lists here).
SOURCE_COMPILED_MODULES = (
    "_http._connection",
    "_http._handler",
    "_protocol._jsonrpc",
    "_protocol._envelope",
    "_protocol._sessions",
    "_protocol._events",
    "_protocol._admission",
    "_protocol._answers",
    "_protocol._owners",
    "_stores._sessions",
    "_stores._events",
    "_stores._bus",
    "_stores._requests",
    "_app._context",
    "_app._records",
    "_app._server",
    "_trio._socketio",
    "_trio._connection",
    "_trio._writer",
    "_trio._limits",
    "_trio._server",
    "_mcp._streams",
    "_mcp._dispatch",
    "_mcp._runner",
    "_mcp._fanout",
    "_mcp._handshake",
    "_mcp._sessions_era",
    "_mcp._modern_era",
    "_mcp._http_sse",
    "_mcp._endpoint",
    "_observe._metrics",
    "_observe._access_log",
    "_observe._observer",
)

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

#: A src/ checkout (setup.py two levels up), where .py files are edited.
IN_CHECKOUT = os.path.exists(os.path.join(_PACKAGE_DIR, os.pardir, os.pardir, "setup.py"))

#: In the package of a pure-Python build made because the compiled build
#: failed, what failed (setup.py's FALLBACK_NOTE).
PURE_BUILD_NOTE = "_pure_build.txt"

#: How an installed package gets its compiled modules (setup.py's warning says the same).
_HOW_TO_INSTALL_COMPILED = (
    "install a wheel for your platform "
    "(`pip install --force-reinstall --no-deps --only-binary=trio-mcp trio-mcp`), "
    "or build from the sdist with a C compiler and the Python headers "
    "(`TRIO_MCP_REQUIRE_EXTENSIONS=1 pip install --force-reinstall --no-deps "
    "--no-cache-dir --no-binary=trio-mcp trio-mcp`)"
)


def compiled_build_failure(package_dir: str = _PACKAGE_DIR) -> str | None:
    """What failed when this pure-Python install was built from the sdist, if
    its compiled build failed (None for any other build)."""
    try:
        with open(os.path.join(package_dir, PURE_BUILD_NOTE), encoding="utf-8") as note:
            return note.read().strip() or None
    except OSError:
        return None


def missing_extensions_error(problems: str, package_dir: str, *, in_checkout: bool) -> ImportError:
    """The error for TRIO_MCP_REQUIRE_EXTENSIONS=1 when the compiled modules are
    not usable: `problems` says what is wrong, the rest how to mend it there."""
    if in_checkout:
        return ImportError(
            f"the compiled hot path is not usable ({problems}); "
            "rebuild it with `python setup.py build_ext --inplace`"
        )
    failure = compiled_build_failure(package_dir)
    installed = (
        f"the pure-Python build, made because the compiled build failed ({failure})"
        if failure
        else "a pure-Python build"
    )
    return ImportError(
        f"TRIO_MCP_REQUIRE_EXTENSIONS is set but trio-mcp's compiled modules are not "
        f"installed ({problems}): this is {installed}. To get them, {_HOW_TO_INSTALL_COMPILED}; "
        "or unset TRIO_MCP_REQUIRE_EXTENSIONS to run the pure-Python build"
    )


def choose_request_path(
    package_dir: str,
    names: Sequence[str],
    *,
    no_extensions: bool,
    require: bool,
    in_checkout: bool,
) -> tuple[dict[str, str], bool]:
    """The file to load for each module of the request path, and whether they
    are the compiled ones.

    All compiled or all source: the compiled modules when every one is built
    (and, in a source checkout, none is older than its ``.py`` or ``.pxd``, so
    an edit is never hidden by a stale build); otherwise the sources, or an ImportError
    when `require` is set.
    """
    bases = {name: os.path.join(package_dir, *name.split(".")) for name in names}
    sources = {name: base + ".py" for name, base in bases.items()}
    if no_extensions:
        return sources, False
    compiled: dict[str, str] = {}
    problems: list[str] = []
    for name, base in bases.items():
        found = next(
            (
                base + suffix
                for suffix in importlib.machinery.EXTENSION_SUFFIXES
                if os.path.exists(base + suffix)
            ),
            None,
        )
        if found is None:
            problems.append(f"{name} is not built")
        elif in_checkout and (edited := _newer_source(base, found)) is not None:
            problems.append(f"{found} is older than {edited}")
        else:
            compiled[name] = found
    if not problems:
        return compiled, True
    if require:
        if len(problems) == len(bases) and not compiled:
            summary = "no module of the request path is built"
        else:
            summary = "; ".join(problems)
        raise missing_extensions_error(summary, package_dir, in_checkout=in_checkout)
    return sources, False


def _newer_source(base: str, compiled: str) -> str | None:
    """The module's ``.py`` or ``.pxd`` if it was changed after `compiled` was built."""
    built = os.path.getmtime(compiled)
    for source in (base + ".py", base + ".pxd"):
        if os.path.exists(source) and os.path.getmtime(source) > built:
            return source
    return None


class RequestPathFinder(importlib.abc.MetaPathFinder):
    """Loads the chosen file for each module of the request path.

    A module whose chosen file is not there (an application bundler may keep
    neither the ``.py`` nor the extension under the package folder) is left to
    the usual import machinery.
    """

    def __init__(self, locations: dict[str, str]) -> None:
        self.locations = locations

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        location = self.locations.get(fullname)
        if location is None or not os.path.exists(location):
            return None
        return importlib.util.spec_from_file_location(fullname, location)


_locations, REQUEST_PATH_COMPILED = choose_request_path(
    _PACKAGE_DIR,
    SOURCE_COMPILED_MODULES,
    no_extensions=NO_EXTENSIONS,
    require=REQUIRE_EXTENSIONS,
    in_checkout=IN_CHECKOUT,
)
sys.meta_path.insert(
    0, RequestPathFinder({f"{__package__}.{name}": path for name, path in _locations.items()})
)

if TYPE_CHECKING or NO_EXTENSIONS:
    from . import _headers_py as _headers
    from . import _httphead_py as _httphead
    from . import _sentinel_py as _sentinel
    from . import _sse_py as _sse
    from . import _wakeups_py as _wakeups

    USING_EXTENSIONS = False
else:
    try:
        from . import _headers, _httphead, _sentinel, _sse, _wakeups  # type: ignore[no-redef]

        USING_EXTENSIONS = True
    except ImportError as error:
        if REQUIRE_EXTENSIONS:
            raise missing_extensions_error(
                str(error), _PACKAGE_DIR, in_checkout=IN_CHECKOUT
            ) from error
        from . import _headers_py as _headers
        from . import _httphead_py as _httphead
        from . import _sentinel_py as _sentinel
        from . import _sse_py as _sse
        from . import _wakeups_py as _wakeups

        USING_EXTENSIONS = False

#: Every compiled module is in use: the leaf functions and the request path.
USING_EXTENSIONS = USING_EXTENSIONS and REQUEST_PATH_COMPILED

find_head_end = _httphead.find_head_end
parse_head = _httphead.parse_head
check_headers = _headers.check_headers
decode_header_value = _sentinel.decode_header_value
format_event = _sse.format_event
format_comment = _sse.format_comment
WakeupValues = _wakeups.WakeupValues


def loaded_modules() -> dict[str, ModuleType]:
    """The module in use for each hot-path name (for tests and statistics)."""
    return {
        "_httphead": _httphead,
        "_headers": _headers,
        "_sentinel": _sentinel,
        "_sse": _sse,
        "_wakeups": _wakeups,
    }


def build_description() -> str:
    """Which build runs, in a few words, and why when it is the pure-Python one."""
    if USING_EXTENSIONS:
        return "compiled"
    if os.environ.get("TRIO_MCP_NO_EXTENSIONS"):
        return "pure Python (TRIO_MCP_NO_EXTENSIONS is set)"
    if sys.implementation.name != "cpython":
        return (
            f"pure Python (the compiled modules are for CPython, this is {sys.implementation.name})"
        )
    failure = compiled_build_failure()
    if failure:
        return f"pure Python (the compiled build failed when installed: {failure})"
    if IN_CHECKOUT:
        return "pure Python (the compiled modules are not built, or older than their sources)"
    return "pure Python (the compiled modules are not installed)"
