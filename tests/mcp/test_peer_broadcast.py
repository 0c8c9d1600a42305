"""Notifications to every session across the processes of one group (two
servers in one trio run, sharing a key ring and a peer sockets directory, as
``--workers 2`` does): a broadcast started in one reaches the GET streams
and listen streams held by the other, exactly once, filtered there as here
(resource subscriptions, log levels); a peer's message is never passed on
again; nothing of this exists without a group, or with shared stores."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import trio
from _support import (
    Client,
    EventReader,
    initialize_body,
    mcp_post,
    modern_body,
    modern_headers,
    settled,
)

from trio_mcp import HTTPServer, MCPConfig, Server, ServerConfig
from trio_mcp._mcp._endpoint import MCPEndpoint
from trio_mcp._mcp._fanout import peer_message, read_peer_message
from trio_mcp._trio._peer_broadcast import SUFFIX

KEYS = ("the group's key",)
VERSION = "2025-11-25"
MODERN = "2026-07-28"
LIST_CHANGED = "notifications/tools/list_changed"
FENCE = "notifications/prompts/list_changed"


class Process:
    def __init__(self, name: str) -> None:
        self.name = name
        self.app = app = Server(f"server-{name}")

        @app.resource("test://watched")
        def watched() -> str:
            return "watched"

        @app.tool()
        def noop() -> str:
            return ""

        @app.prompt()
        def hello() -> str:
            return "hello"

        self.endpoint: MCPEndpoint | None = None
        self.server: HTTPServer | None = None
        self.scope = trio.CancelScope()

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.ports[0]


Start = Callable[..., Awaitable[Process]]


@pytest.fixture
def peer_dir(tmp_path: Path) -> str:
    directory = tmp_path / "peers"
    directory.mkdir(mode=0o700)
    return str(directory)


@pytest.fixture
async def start(nursery: trio.Nursery, peer_dir: str) -> AsyncIterator[Start]:
    processes: list[Process] = []

    async def factory(name: str, **config: object) -> Process:
        process = Process(name)
        settings = dict(owner_name=name, peer_sockets_dir=peer_dir, request_state_keys=KEYS)
        settings.update(config)
        mcp = MCPConfig(http=ServerConfig(port=0), **settings)  # type: ignore[arg-type]
        process.endpoint = MCPEndpoint(process.app, mcp)

        async def run(task_status: trio.TaskStatus[HTTPServer]) -> None:
            from trio_mcp._trio._server import serve

            with process.scope:
                assert process.endpoint is not None
                async with process.endpoint.running():
                    await serve(process.endpoint, mcp.http, task_status=task_status)

        process.server = await nursery.start(run)
        processes.append(process)
        return process

    yield factory
    for process in processes:
        process.scope.cancel()


async def exchange(port: int, data: bytes):
    async with Client(await trio.open_tcp_stream("127.0.0.1", port)) as client:
        await client.send(data)
        return await client.read_reply()


async def session_on(port: int) -> str:
    reply = await exchange(port, mcp_post(initialize_body(VERSION)))
    assert reply.status == 200, reply.body
    session = reply.header(b"mcp-session-id").decode()
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await exchange(port, mcp_post(initialized, session=session, version=VERSION))).status
    return session


async def request(port: int, session: str, method: str, params: dict) -> None:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    reply = await exchange(port, mcp_post(body, session=session, version=VERSION))
    assert reply.status == 200, reply.body


async def get_stream(port: int, session: str) -> EventReader:
    """A GET stream of `session` (sent to `port`: the owner, or passed on to it)."""
    reader = EventReader(Client(await trio.open_tcp_stream("127.0.0.1", port)))
    get = (
        b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        b"MCP-Protocol-Version: " + VERSION.encode() + b"\r\n"
        b"Mcp-Session-Id: " + session.encode() + b"\r\n\r\n"
    )
    assert (await reader.head(get)).status_code == 200
    await reader.event()  # (the priming event)
    return reader


async def listen_stream(port: int, notifications: dict) -> EventReader:
    reader = EventReader(Client(await trio.open_tcp_stream("127.0.0.1", port)))
    body = modern_body("subscriptions/listen", {"notifications": notifications}, id="L")
    await reader.head(mcp_post(body, version=MODERN, extra=modern_headers(body)))
    _, ack = await reader.message()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    return reader


async def until_fence(reader: EventReader) -> list[str]:
    """The methods a stream got, up to and without the fence."""
    got = []
    while True:
        _, message = await reader.message()
        if message["method"] == FENCE:
            return got
        got.append(message["method"])


async def close(*readers: EventReader) -> None:
    for reader in readers:
        await reader.client.stream.aclose()


async def streams_attached(*processes: Process, count: int) -> None:
    while sum(p.endpoint.stores.bus.open_streams() for p in processes) < count:
        await trio.sleep(0.01)


async def test_a_broadcast_reaches_every_stream_of_the_group_exactly_once(start: Start) -> None:
    a, b = await start("a"), await start("b")
    with trio.fail_after(20):
        on_a, on_b, subscribed_b = (
            await session_on(a.port),
            await session_on(b.port),
            await session_on(b.port),
        )
        assert on_a.startswith("a.") and on_b.startswith("b.")
        await request(b.port, subscribed_b, "resources/subscribe", {"uri": "test://watched"})
        await request(b.port, on_b, "logging/setLevel", {"level": "error"})
        streams = {
            "on_a": await get_stream(b.port, on_a),  # (held by a, reached through b)
            "on_b": await get_stream(a.port, on_b),  # (held by b, reached through a)
            "subscribed_b": await get_stream(b.port, subscribed_b),
            "listen_b": await listen_stream(
                b.port,
                {
                    "toolsListChanged": True,
                    "promptsListChanged": True,
                    "resourceSubscriptions": ["test://watched"],
                },
            ),
        }
        await streams_attached(a, b, count=4)
        a.app.notify_tools_changed()
        a.app.notify_resource_updated("test://watched")
        a.app.notify_resource_updated("test://other")
        a.app.log("info", "not for on_b, whose level is error")
        # b's own broadcast, after a's: what came before it on every stream
        # is all a's broadcasts brought there
        await settled()  # (the broadcast has gone out)
        b.app.notify_prompts_changed()
        got = {name: await until_fence(reader) for name, reader in streams.items()}
        await close(*streams.values())
    updated, log = "notifications/resources/updated", "notifications/message"
    assert got == {
        "on_a": [LIST_CHANGED, log],
        "on_b": [LIST_CHANGED],
        "subscribed_b": [LIST_CHANGED, updated, log],
        "listen_b": [LIST_CHANGED, updated],
    }
    assert a.endpoint.peer_broadcast.dropped == b.endpoint.peer_broadcast.dropped == 0


async def test_what_came_from_a_peer_is_not_passed_on_again(start: Start) -> None:
    a, b, c = await start("a"), await start("b"), await start("c")
    with trio.fail_after(20):
        sessions = [await session_on(p.port) for p in (a, b, c)]
        readers = [await get_stream(p.port, s) for p, s in zip((a, b, c), sessions, strict=True)]
        await streams_attached(a, b, c, count=3)
        b.app.notify_tools_changed()
        await settled()  # (the broadcast has gone out)
        c.app.notify_prompts_changed()
        assert [await until_fence(r) for r in readers] == [[LIST_CHANGED]] * 3
        await close(*readers)


async def test_a_malformed_peer_message_is_ignored(start: Start, peer_dir: str) -> None:
    import socket

    a = await start("a")
    with trio.fail_after(20):
        session = await session_on(a.port)
        reader = await get_stream(a.port, session)
        await streams_attached(a, count=1)
        rogue = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        await rogue.connect(os.path.join(peer_dir, "a" + SUFFIX))
        await rogue.send(
            b'not json\n["notifications/evil",{},null]\n[1,2]\n{"a":1}\n'
            b'["notifications/message",{"level":"loud"},null]\n'
            + peer_message(LIST_CHANGED, {}, None)
            + b"\n"
            + peer_message(FENCE, {}, None)
            + b"\n"
        )
        assert await until_fence(reader) == [LIST_CHANGED]
        rogue.close()
        await close(reader)


def test_peer_messages_carry_what_the_app_broadcasts_only() -> None:
    message = peer_message("notifications/resources/updated", {"uri": "x://y"}, "x://y")
    assert b"\n" not in message
    assert read_peer_message(message) == (
        "notifications/resources/updated",
        {"uri": "x://y"},
        "x://y",
        False,
    )
    for bad in (
        b"",
        b"[]",
        b'["notifications/tools/list_changed",{}]',
        b'["notifications/progress",{},null]',
        b'["notifications/tools/list_changed",[],null]',
        b'["notifications/tools/list_changed",{},1]',
        b'["notifications/message",{"level":["debug"]},null]',
        b'[["x"],{},null]',
    ):
        assert read_peer_message(bad) is None, bad


async def test_no_peer_broadcast_alone_or_with_shared_stores(peer_dir: str) -> None:
    from trio_mcp._stores._stores import Stores, memory_stores

    config = MCPConfig(owner_name="a", peer_sockets_dir=peer_dir, request_state_keys=KEYS)
    plain = memory_stores(config, 1.0)
    shared = Stores(plain.sessions, plain.events, plain.bus, plain.requests, shared=True)
    for endpoint in (
        MCPEndpoint(Server("x"), config, stores=shared),
        MCPEndpoint(Server("x"), MCPConfig(owner_name="a", request_state_keys=KEYS)),
        MCPEndpoint(Server("x")),
    ):
        assert endpoint.peer_broadcast is None and endpoint.broadcaster.peers is None
    grouped = MCPEndpoint(Server("x"), config)
    assert grouped.broadcaster.peers is grouped.peer_broadcast is not None


def test_the_queue_bound_is_at_least_4096_bytes() -> None:
    with pytest.raises(ValueError, match="peer_broadcast_queue_bytes"):
        MCPConfig(peer_broadcast_queue_bytes=4095)
    assert MCPConfig(peer_broadcast_queue_bytes=4096).peer_broadcast_queue_bytes == 4096
    assert MCPConfig().peer_broadcast_queue_bytes == 1024 * 1024
