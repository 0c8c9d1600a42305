"""The benchmark suite's fixture on trio-mcp: the same tools and resource every suite server has.

    PYTHONPATH=src python benchmarks/_suite_server.py --port P

serves http://127.0.0.1:P/mcp (both protocol eras on one endpoint) until
SIGINT or SIGTERM. The fixture, identical in ``peers/python_sdk_server.py
--fixture`` and ``peers/ts_sdk_server.mjs``:

- ``echo(text)`` returns ``text`` as one text block;
- ``progress()`` sends exactly 3 ``notifications/progress`` (1/3, 2/3, 3/3) to
  the request's progress token, then returns ``"progress done"``;
- ``tool_000`` ... ``tool_099``: trivial tools with one string parameter and a
  description, so that ``tools/list`` has 102 entries;
- the resource ``bench://blob-64k``: 65,536 characters of ``text/plain``.

The configuration is the default one; the app's ``page_size`` is 1,000, so
``tools/list`` answers all 102 tools in one page, as the peers do.
"""

from __future__ import annotations

import argparse

from trio_mcp import Context, MCPConfig, Server, ServerConfig, run_mcp

TRIVIAL_TOOLS = 100
BLOB_URI = "bench://blob-64k"
BLOB_TEXT = "0123456789abcdef" * 4096  # 65,536 characters

# The peers do not paginate tools/list; one page of up to 1,000 entries (instead of
# the default 100) gives the same 102-tool answer as theirs.
server = Server("trio-mcp-bench", "1.0.0", page_size=1000)


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
    args = parser.parse_args(argv)
    run_mcp(server, MCPConfig(http=ServerConfig(host=args.host, port=args.port)))


if __name__ == "__main__":
    main()
