"""Pick the compiled hot path or its pure-Python twins, once, at import.

- ``TRIO_MCP_NO_EXTENSIONS=1`` (or a non-CPython interpreter) uses the twins.
- Otherwise the compiled modules are used when they import; if they don't,
  ``TRIO_MCP_REQUIRE_EXTENSIONS=1`` turns that into an ImportError instead of
  a quiet fallback (CI and the wheel tests set it).

Everything that calls a hot-path function imports it from here. The twins
(``_name_py.py``) define the behaviour; the compiled modules must match them.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import TYPE_CHECKING

NO_EXTENSIONS = bool(os.environ.get("TRIO_MCP_NO_EXTENSIONS")) or (
    sys.implementation.name != "cpython"
)
REQUIRE_EXTENSIONS = bool(os.environ.get("TRIO_MCP_REQUIRE_EXTENSIONS"))

#: The names of the compiled modules; each has a twin named ``<name>_py``.
COMPILED_MODULES = ("_httphead", "_headers", "_sentinel", "_sse")

if TYPE_CHECKING or NO_EXTENSIONS:
    from . import _headers_py as _headers
    from . import _httphead_py as _httphead
    from . import _sentinel_py as _sentinel
    from . import _sse_py as _sse

    USING_EXTENSIONS = False
else:
    try:
        from . import _headers, _httphead, _sentinel, _sse  # type: ignore[no-redef]

        USING_EXTENSIONS = True
    except ImportError:
        if REQUIRE_EXTENSIONS:
            raise
        from . import _headers_py as _headers
        from . import _httphead_py as _httphead
        from . import _sentinel_py as _sentinel
        from . import _sse_py as _sse

        USING_EXTENSIONS = False

find_head_end = _httphead.find_head_end
parse_head = _httphead.parse_head
check_headers = _headers.check_headers
decode_header_value = _sentinel.decode_header_value
format_event = _sse.format_event
format_comment = _sse.format_comment


def loaded_modules() -> dict[str, ModuleType]:
    """The module in use for each hot-path name (for tests and statistics)."""
    return {
        "_httphead": _httphead,
        "_headers": _headers,
        "_sentinel": _sentinel,
        "_sse": _sse,
    }
