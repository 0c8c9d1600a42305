from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trio
from _support import load_example

from trio_mcp import HTTPServer, MCPConfig, ServerConfig, serve_mcp

everything = load_example("everything").server

StartMCP = Callable[..., Awaitable[HTTPServer]]


@pytest.fixture
async def start_mcp(nursery: trio.Nursery) -> AsyncIterator[StartMCP]:
    """Serve an MCP app (the everything example by default) on a free loopback port."""
    servers: list[HTTPServer] = []

    async def factory(app=everything, authenticate=None, **config: object) -> HTTPServer:
        mcp_config = MCPConfig(http=ServerConfig(port=0), **config)  # type: ignore[arg-type]
        server: HTTPServer = await nursery.start(
            lambda task_status: serve_mcp(
                app, mcp_config, authenticate=authenticate, task_status=task_status
            )
        )
        servers.append(server)
        return server

    yield factory
    for server in servers:
        server.shutdown()


@pytest.fixture
async def mcp_port(start_mcp: StartMCP) -> int:
    return (await start_mcp()).ports[0]
