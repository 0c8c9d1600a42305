"""The application the replica processes of test_redis_processes.py serve."""

from __future__ import annotations

import os

import trio_mcp

server = trio_mcp.Server("replica")


@server.tool()
def whoami() -> str:
    """Which process answered."""
    return str(os.getpid())


@server.tool()
async def poke() -> str:
    """Send a notification to the sessions this process made."""
    server.notify_tools_changed()
    return "poked"
