"""trio-mcp: a fast Model Context Protocol server over HTTP, on trio.

The public names live here; every module behind them is private.
"""

# First: it decides which files the compiled request path loads from.
from . import _speedups  # noqa: F401  # isort: skip

from ._app._content import Content as Content
from ._app._content import audio as audio_content
from ._app._content import embedded_blob as embedded_blob
from ._app._content import embedded_text as embedded_text
from ._app._content import image as image_content
from ._app._content import resource_link as resource_link
from ._app._content import text as text_content
from ._app._context import Context as Context
from ._app._server import Authorizer as Authorizer
from ._app._server import Server as Server
from ._config import MCPConfig as MCPConfig
from ._config import ServerConfig as ServerConfig
from ._errors import HeaderValueError as HeaderValueError
from ._errors import LocalProtocolError as LocalProtocolError
from ._errors import MCPError as MCPError
from ._errors import RemoteProtocolError as RemoteProtocolError
from ._errors import ResourceError as ResourceError
from ._errors import ResourceNotFound as ResourceNotFound
from ._errors import ToolError as ToolError
from ._errors import TrioMCPError as TrioMCPError
from ._http._connection import Request as Request
from ._http._connection import Response as Response
from ._http._connection import method_not_allowed as method_not_allowed
from ._http._handler import DeferredResponse as DeferredResponse
from ._http._handler import Handler as Handler
from ._http._handler import ResponseWriter as ResponseWriter
from ._http._handler import StreamingResponse as StreamingResponse
from ._mcp._endpoint import Authenticator as Authenticator
from ._mcp._endpoint import MCPEndpoint as MCPEndpoint
from ._mcp._endpoint import MCPStatistics as MCPStatistics
from ._mcp._endpoint import run_mcp as run_mcp
from ._mcp._endpoint import serve_mcp as serve_mcp
from ._mcp._stdio import run_stdio as run_stdio
from ._mcp._stdio import serve_stdio as serve_stdio
from ._speedups import USING_EXTENSIONS as USING_EXTENSIONS
from ._trio._run import run as run
from ._trio._server import HTTPServer as HTTPServer
from ._trio._server import HTTPServerStatistics as HTTPServerStatistics
from ._trio._server import serve as serve
from ._version import __version__ as __version__

__all__ = [
    "Authenticator",
    "Authorizer",
    "Content",
    "Context",
    "MCPConfig",
    "MCPEndpoint",
    "MCPStatistics",
    "Server",
    "ResourceError",
    "ResourceNotFound",
    "ToolError",
    "audio_content",
    "embedded_blob",
    "embedded_text",
    "image_content",
    "resource_link",
    "run_mcp",
    "run_stdio",
    "serve_mcp",
    "serve_stdio",
    "text_content",
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
