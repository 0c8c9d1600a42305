from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trio
from _stores_copying import copying_stores
from _support import load_example

from trio_mcp import HTTPServer, MCPConfig, ServerConfig, serve_mcp

everything = load_example("everything").server

StartMCP = Callable[..., Awaitable[HTTPServer]]


@pytest.fixture(params=["memory stores", "copying stores"])
async def start_mcp(
    nursery: trio.Nursery, request: pytest.FixtureRequest
) -> AsyncIterator[StartMCP]:
    """Serve an MCP app (the everything example by default) on a free loopback port,
    once on the memory stores and once on stores that copy on every read and
    wait on every call (``_stores_copying.py``)."""
    servers: list[HTTPServer] = []
    copying = request.param == "copying stores"

    async def factory(
        app=everything, authenticate=None, principal_key=None, http=None, **config: object
    ) -> HTTPServer:
        """`http`: ServerConfig settings (a dict); `config`: MCPConfig's."""
        http_config = ServerConfig(port=0, **(http or {}))
        mcp_config = MCPConfig(http=http_config, **config)  # type: ignore[arg-type]
        stores = copying_stores(mcp_config) if copying else None
        keyed = {"principal_key": principal_key} if principal_key is not None else {}
        server: HTTPServer = await nursery.start(
            lambda task_status: serve_mcp(
                app,
                mcp_config,
                authenticate=authenticate,
                stores=stores,
                task_status=task_status,
                **keyed,
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
