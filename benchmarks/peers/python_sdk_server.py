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

``--fixture`` adds the rest of the benchmark suite's fixture (see
``benchmarks/_suite_server.py``): a ``progress`` tool that sends 3 progress
notifications and returns ``"progress done"``, 100 trivial tools ``tool_000`` ...
``tool_099`` with one string parameter, ``store_item(item: Item) -> StoredItem``
(pydantic models in and out, with the SDK's default structured output: the
model's output schema, ``structuredContent`` beside the JSON text), and the
64 KiB text resource ``bench://blob-64k``; with it ``echo`` is an ``async def``
like every fixture tool (the SDK runs a plain ``def`` tool in a worker
thread). ``--sse`` answers POSTs with SSE streams (``json_response=False``, the
SDK's default) instead of JSON. ``--http httptools --loop uvloop`` choose
uvicorn's fast implementations (the suite provides them; ``pip install mcp``
does not install them).

By default the tool result is unstructured (one text content block), which is
what a trio-mcp echo tool returns; ``--structured`` keeps the SDK's default for
a ``-> str`` function (an ``outputSchema`` on the tool and ``structuredContent``
``{"result": text}`` alongside the text block).

``benchmarks/peers/check_peer.py`` checks a running instance with the SDK's
own client.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field, computed_field
from starlette.applications import Starlette

HOST = "127.0.0.1"
PATH = "/mcp"
TRIVIAL_TOOLS = 100
BLOB_URI = "bench://blob-64k"
BLOB_TEXT = "0123456789abcdef" * 4096  # 65,536 characters


# The models of benchmarks/_suite_server.py, docstrings (the schemas' descriptions)
# included.
class Item(BaseModel):
    """An item to store."""

    name: str = Field(min_length=1, max_length=100)
    quantity: int = Field(ge=0)
    price: float = Field(ge=0)
    tags: list[str] = Field(default_factory=list)
    due: datetime.date | None = None


class StoredItem(Item):
    """A stored item: the item, its id, and its total price."""

    id: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> float:
        return self.quantity * self.price


def add_fixture(server: MCPServer) -> None:
    """The suite's tools and resource beyond echo (as in benchmarks/_suite_server.py)."""
    ids = itertools.count(1)

    @server.tool(description="Report progress three times, then answer.", structured_output=False)
    async def progress(ctx: Context) -> str:
        for step in (1, 2, 3):
            await ctx.report_progress(step, 3, f"step {step}")
        return "progress done"

    @server.tool(description="Store an item; answer it with its id and total.")
    async def store_item(item: Item) -> StoredItem:
        return StoredItem(id=next(ids), **item.model_dump())

    async def trivial(text: str) -> str:
        return text

    for number in range(TRIVIAL_TOOLS):
        server.add_tool(
            trivial,
            name=f"tool_{number:03d}",
            description=f"Trivial benchmark tool number {number}: returns its text.",
            structured_output=False,
        )

    @server.resource(BLOB_URI, name="blob", description="64 KiB of text.", mime_type="text/plain")
    async def blob() -> str:
        return BLOB_TEXT


def build_app(
    *, structured: bool = False, host: str = HOST, fixture: bool = False, sse: bool = False
) -> Starlette:
    """The Starlette (ASGI) app of the echo server (with the suite fixture if asked)."""
    server = MCPServer(name="python-sdk-echo", version="1.0.0", log_level="WARNING")

    if fixture:
        # async like every fixture tool: the SDK runs a sync tool in a worker thread
        @server.tool(description="Return the given text unchanged.", structured_output=structured)
        async def echo(text: str) -> str:
            return text

        add_fixture(server)
    else:

        @server.tool(description="Return the given text unchanged.", structured_output=structured)
        def echo(text: str) -> str:
            return text

    return server.streamable_http_app(
        streamable_http_path=PATH,
        json_response=not sse,
        stateless_http=False,
        host=host,
    )


# For `uvicorn python_sdk_server:app`; PYTHON_SDK_SERVER_STRUCTURED=1 is --structured,
# PYTHON_SDK_SERVER_FIXTURE=1 --fixture, PYTHON_SDK_SERVER_SSE=1 --sse.
app = build_app(
    structured=os.environ.get("PYTHON_SDK_SERVER_STRUCTURED") == "1",
    fixture=os.environ.get("PYTHON_SDK_SERVER_FIXTURE") == "1",
    sse=os.environ.get("PYTHON_SDK_SERVER_SSE") == "1",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--port", type=int, default=8001, help="TCP port on 127.0.0.1 (default 8001)"
    )
    parser.add_argument(
        "--structured", action="store_true", help="SDK default structured output for echo"
    )
    parser.add_argument(
        "--fixture", action="store_true", help="add the benchmark suite's tools and resource"
    )
    parser.add_argument("--sse", action="store_true", help="answer POSTs as SSE, not JSON")
    parser.add_argument(
        "--http", default="auto", help="uvicorn HTTP implementation: auto, h11 or httptools"
    )
    parser.add_argument(
        "--loop", default="auto", help="uvicorn event loop: auto, asyncio or uvloop"
    )
    parser.add_argument(
        "--log-level", default="warning", help="uvicorn log level (default warning)"
    )
    args = parser.parse_args()
    if args.structured or args.fixture or args.sse:
        application = build_app(structured=args.structured, fixture=args.fixture, sse=args.sse)
    else:
        application = app
    uvicorn.run(
        application,
        host=HOST,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        lifespan="on",
        http=args.http,
        loop=args.loop,
    )


if __name__ == "__main__":
    main()
