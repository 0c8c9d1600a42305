"""An MCP server built with the official Python SDK (``mcp==2.3.0``), for throughput comparisons.

It exposes one tool, ``echo(text: str) -> str``, which returns ``text``, over
Streamable HTTP at ``/mcp`` on 127.0.0.1, in stateful session mode
(``initialize`` hands out an ``Mcp-Session-Id``) with plain JSON responses
(``json_response=True``: a POST is answered with ``application/json``, not an
SSE stream). It is served by uvicorn.

Run it with the interpreter that ``scripts/peers`` sets up:

    .peers/py/bin/python benchmarks/peers/python_sdk_server.py --port 8001
    # or, through uvicorn's own CLI:
    .peers/py/bin/python -m uvicorn --app-dir benchmarks/peers python_sdk_server:app --port 8001

API used (mcp 2.x renamed ``FastMCP`` to ``MCPServer``; ``mcp.server.fastmcp``
only raises an error pointing at the migration guide):
``mcp.server.mcpserver.MCPServer``, its ``@tool()`` decorator, and
``MCPServer.streamable_http_app(streamable_http_path=..., json_response=True,
stateless_http=False, host=...)``, which returns a Starlette app whose lifespan
runs the session manager. Passing ``host="127.0.0.1"`` keeps the SDK's
automatic DNS-rebinding protection (Host/Origin must be 127.0.0.1, localhost or
[::1], any port), as a real local deployment would have it.

By default the tool result is unstructured (one text content block), which is
what a trio-mcp echo tool returns; ``--structured`` keeps the SDK's default for
a ``-> str`` function (an ``outputSchema`` on the tool and ``structuredContent``
``{"result": text}`` alongside the text block).

``benchmarks/peers/check_peer.py`` checks a running instance with the SDK's
own client.
"""

from __future__ import annotations

import argparse
import os

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette

HOST = "127.0.0.1"
PATH = "/mcp"


def build_app(*, structured: bool = False, host: str = HOST) -> Starlette:
    """The Starlette (ASGI) app of the echo server."""
    server = MCPServer(name="python-sdk-echo", version="1.0.0", log_level="WARNING")

    @server.tool(description="Return the given text unchanged.", structured_output=structured)
    def echo(text: str) -> str:
        return text

    return server.streamable_http_app(
        streamable_http_path=PATH,
        json_response=True,
        stateless_http=False,
        host=host,
    )


# For `uvicorn python_sdk_server:app`; PYTHON_SDK_SERVER_STRUCTURED=1 is --structured.
app = build_app(structured=os.environ.get("PYTHON_SDK_SERVER_STRUCTURED") == "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--port", type=int, default=8001, help="TCP port on 127.0.0.1 (default 8001)"
    )
    parser.add_argument(
        "--structured", action="store_true", help="SDK default structured output for echo"
    )
    parser.add_argument(
        "--log-level", default="warning", help="uvicorn log level (default warning)"
    )
    args = parser.parse_args()
    application = build_app(structured=True) if args.structured else app
    uvicorn.run(
        application,
        host=HOST,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        lifespan="on",
    )


if __name__ == "__main__":
    main()
