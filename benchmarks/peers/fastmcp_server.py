"""The benchmark suite's fixture served by FastMCP 4.2.3, for throughput comparisons.

Run it with the interpreter of the virtualenv that ``scripts/peers`` sets up
(it prints ``PEERS_FASTMCP_PYTHON``):

    .peers/fastmcp/bin/python benchmarks/peers/fastmcp_server.py --port 8002
        [--sse] [--http httptools] [--loop uvloop]

The fixture is the suite's (``benchmarks/_suite_server.py`` has it in full):
``echo(text)``, ``progress()`` with 3 progress notifications, 100 trivial tools
``tool_000`` ... ``tool_099``, the 64 KiB resource ``bench://blob-64k``, and
``store_item(item: Item) -> StoredItem``, whose argument and result are
pydantic models (five fields in; the same plus a sequential ``id`` and the
computed ``total`` out).

What it runs, and why:

- ``FastMCP.http_app(path="/mcp", json_response=True, stateless_http=False,
  host_origin_protection="auto")`` served by ``uvicorn.run``, as FastMCP's
  documentation deploys an ASGI app. Stateful sessions (``initialize`` hands
  out an ``Mcp-Session-Id``) and JSON answers, as the Python SDK peer runs:
  the suite's session scenarios need both, and a JSON body is what every other
  server of the ``call`` rows answers. ``--sse`` sets ``json_response=False``
  (FastMCP's default) for the progress scenario. ``"auto"`` keeps FastMCP's
  Host/Origin guard on for a server bound to 127.0.0.1, as the SDK peer keeps
  the SDK's.
- ``echo``, ``progress`` and the trivial tools are ``async def`` with
  ``output_schema=None``: FastMCP would otherwise give a ``-> str`` tool an
  output schema and wrap its text as ``structuredContent`` ``{"result": ...}``;
  without it the answer is the one text block the other servers give.
  ``store_item`` keeps FastMCP's defaults: the model's output schema, and
  ``structuredContent`` beside the JSON text.
- Everything else is FastMCP's default (its OpenTelemetry spans, a no-op
  without an SDK installed, included), with the log level at WARNING as the SDK
  peer has it. The banner and its update check belong to ``FastMCP.run`` and
  FastMCP's CLI, neither of which is used; they are switched off in the
  environment all the same, so that nothing leaves the machine.
- ``--http httptools --loop uvloop`` choose uvicorn's fast implementations,
  which ``pip install fastmcp`` does not install; the suite puts links to the
  dev interpreter's builds on ``PYTHONPATH``, as for the SDK peer.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os

# Before fastmcp reads its settings.
os.environ.setdefault("FASTMCP_CHECK_FOR_UPDATES", "off")
os.environ.setdefault("FASTMCP_SHOW_SERVER_BANNER", "false")
os.environ.setdefault("FASTMCP_LOG_LEVEL", "WARNING")

import uvicorn
from fastmcp import Context, FastMCP
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


def build_app(*, sse: bool = False) -> Starlette:
    """The Starlette (ASGI) app of the fixture."""
    server = FastMCP("fastmcp-bench", version="1.0.0")
    ids = itertools.count(1)

    @server.tool(description="Return the given text unchanged.", output_schema=None)
    async def echo(text: str) -> str:
        return text

    @server.tool(description="Report progress three times, then answer.", output_schema=None)
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
        server.tool(
            trivial,
            name=f"tool_{number:03d}",
            description=f"Trivial benchmark tool number {number}: returns its text.",
            output_schema=None,
        )

    @server.resource(BLOB_URI, name="blob", description="64 KiB of text.", mime_type="text/plain")
    async def blob() -> str:
        return BLOB_TEXT

    return server.http_app(
        path=PATH,
        json_response=not sse,
        stateless_http=False,
        host_origin_protection="auto",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--port", type=int, default=8002, help="TCP port on 127.0.0.1 (default 8002)"
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
    uvicorn.run(
        build_app(sse=args.sse),
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
