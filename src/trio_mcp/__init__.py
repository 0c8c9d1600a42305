"""trio-mcp: a fast Model Context Protocol server over HTTP, on trio.

The public names live here; every module behind them is private.
"""

from ._config import ServerConfig as ServerConfig
from ._errors import HeaderValueError as HeaderValueError
from ._errors import LocalProtocolError as LocalProtocolError
from ._errors import MCPError as MCPError
from ._errors import RemoteProtocolError as RemoteProtocolError
from ._errors import TrioMCPError as TrioMCPError
from ._http11 import DeferredResponse as DeferredResponse
from ._http11 import Request as Request
from ._http11 import Response as Response
from ._http11 import StreamingResponse as StreamingResponse
from ._http11 import method_not_allowed as method_not_allowed
from ._speedups import USING_EXTENSIONS as USING_EXTENSIONS
from ._trio._server import Handler as Handler
from ._trio._server import HTTPServer as HTTPServer
from ._trio._server import HTTPServerStatistics as HTTPServerStatistics
from ._trio._server import ResponseWriter as ResponseWriter
from ._trio._server import run as run
from ._trio._server import serve as serve
from ._version import __version__ as __version__

__all__ = [
    "DeferredResponse",
    "ResponseWriter",
    "USING_EXTENSIONS",
    "Handler",
    "HeaderValueError",
    "LocalProtocolError",
    "MCPError",
    "RemoteProtocolError",
    "Request",
    "Response",
    "HTTPServer",
    "ServerConfig",
    "HTTPServerStatistics",
    "StreamingResponse",
    "TrioMCPError",
    "__version__",
    "method_not_allowed",
    "run",
    "serve",
]


def _fix_module_metadata() -> None:
    # Tracebacks and reprs show trio_mcp.X, not the private module path.
    for name in __all__:
        obj = globals()[name]
        if getattr(obj, "__module__", "").startswith("trio_mcp."):
            try:
                obj.__module__ = __name__
            except (AttributeError, TypeError):
                pass


_fix_module_metadata()
