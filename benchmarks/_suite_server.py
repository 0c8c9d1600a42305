"""The benchmark suite's fixture on trio-mcp: the same tools and resource every suite server has.

    PYTHONPATH=src python benchmarks/_suite_server.py --port P

serves http://127.0.0.1:P/mcp (both protocol eras on one endpoint) until
SIGINT or SIGTERM. The fixture, identical in ``peers/python_sdk_server.py
--fixture``, ``peers/fastmcp_server.py`` and ``peers/ts_sdk_server.mjs`` (which
has no ``store_item``):

- ``echo(text)`` returns ``text`` as one text block;
- ``progress()`` sends exactly 3 ``notifications/progress`` (1/3, 2/3, 3/3) to
  the request's progress token, then returns ``"progress done"``;
- ``tool_000`` ... ``tool_099``: trivial tools with one string parameter and a
  description, so that ``tools/list`` has 103 entries (with ``store_item``);
- ``store_item(item: Item) -> StoredItem``: pydantic models in and out. ``Item``
  has five fields of varied types and constraints (a string of 1 to 100
  characters, a non-negative int, a non-negative float, a list of strings, an
  optional date); ``StoredItem`` is the item with a sequential ``id`` (from 1,
  per server process) and the computed ``total`` (quantity x price). The
  answer has the model as ``structuredContent`` and as JSON text;
- the resource ``bench://blob-64k``: 65,536 characters of ``text/plain``.

The configuration is the default one (``--metrics PATH`` and ``--access-log
FILE`` turn those on, for ``observe_overhead.py``; ``--owner-name``,
``--peer-sockets-dir`` and ``--request-state-key`` make it one process of a
group, for ``passing_on.py``); the app's ``page_size`` is 1,000, so
``tools/list`` answers all 103 tools in one page, as the peers do.
"""

from __future__ import annotations

import argparse
import datetime
import itertools

from pydantic import BaseModel, Field, computed_field

from trio_mcp import Context, MCPConfig, Server, ServerConfig, run_mcp

TRIVIAL_TOOLS = 100
BLOB_URI = "bench://blob-64k"
BLOB_TEXT = "0123456789abcdef" * 4096  # 65,536 characters

# The peers do not paginate tools/list; one page of up to 1,000 entries (instead of
# the default 100) gives the same one-page answer as theirs.
server = Server("trio-mcp-bench", "1.0.0", page_size=1000)
_ids = itertools.count(1)


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


@server.tool()
async def echo(text: str) -> str:
    """Return the given text unchanged."""
    return text


@server.tool()
async def progress(ctx: Context) -> str:
    """Report progress three times, then answer."""
    for step in (1, 2, 3):
        await ctx.report_progress(step, 3, f"step {step}")
    return "progress done"


@server.tool()
async def store_item(item: Item) -> StoredItem:
    """Store an item; answer it with its id and total."""
    return StoredItem(id=next(_ids), **item.model_dump())


async def _trivial(text: str) -> str:
    return text


for _number in range(TRIVIAL_TOOLS):
    server.add_tool(
        _trivial,
        name=f"tool_{_number:03d}",
        description=f"Trivial benchmark tool number {_number}: returns its text.",
    )


@server.resource(BLOB_URI, mime_type="text/plain")
async def blob() -> str:
    """64 KiB of text."""
    return BLOB_TEXT


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--metrics", metavar="PATH", help="metrics_path (off by default)")
    parser.add_argument("--access-log", metavar="FILE", help="the access log, to FILE (off)")
    parser.add_argument("--access-log-format", choices=("text", "json"), default="text")
    parser.add_argument("--owner-name", default="", help="owner_name (off by default)")
    parser.add_argument("--peer-sockets-dir", default="", help="peer_sockets_dir (off)")
    parser.add_argument("--request-state-key", default=None, help="the group's one ring key")
    parser.add_argument("--redis-url", default="", help="redis_url (off by default)")
    args = parser.parse_args(argv)
    config = MCPConfig(
        http=ServerConfig(host=args.host, port=args.port),
        metrics_path=args.metrics,
        access_log=args.access_log is not None,
        access_log_path=args.access_log,
        access_log_format=args.access_log_format,
        owner_name=args.owner_name,
        peer_sockets_dir=args.peer_sockets_dir,
        request_state_keys=(args.request_state_key,) if args.request_state_key else (),
        redis_url=args.redis_url,
    )
    run_mcp(server, config)


if __name__ == "__main__":
    main()
