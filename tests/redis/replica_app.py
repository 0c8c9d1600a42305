"""The application the replica processes of test_redis_processes.py serve."""

from __future__ import annotations

import os

import trio

import trio_mcp

server = trio_mcp.Server("replica")


@server.tool()
def whoami() -> str:
    """Which process answered."""
    return str(os.getpid())


@server.tool()
async def poke() -> str:
    """Send a notification to every session."""
    server.notify_tools_changed()
    return "poked"


@server.tool()
async def progress_then_wait(seconds: float, ctx: trio_mcp.Context) -> str:
    """Report progress once, then answer after `seconds`."""
    await ctx.report_progress(1, 2)
    await trio.sleep(seconds)
    return "waited"
