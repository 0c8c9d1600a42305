from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import trio
from _support import load_example
from mcp_fixtures import start_mcp  # noqa: F401

from trio_mcp import HTTPServer, ServerConfig, serve

echo = load_example("echo").echo

ServerFactory = Callable[..., Awaitable[HTTPServer]]


@pytest.fixture
async def start_server(nursery: trio.Nursery) -> AsyncIterator[ServerFactory]:
    """Start an echo server (or another handler) on 127.0.0.1 with a free port."""
    servers: list[HTTPServer] = []

    async def factory(handler=echo, **config: object) -> HTTPServer:
        config.setdefault("port", 0)
        server: HTTPServer = await nursery.start(
            serve,
            handler,
            ServerConfig(**config),  # type: ignore[arg-type]
        )
        servers.append(server)
        return server

    yield factory
    for server in servers:
        server.shutdown()


@pytest.fixture
async def echo_server(start_server: ServerFactory) -> HTTPServer:
    return await start_server()
