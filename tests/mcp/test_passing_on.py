"""Two processes of one group (two servers in one trio run here, sharing a
key ring and a peer sockets directory): a request for a session the other
owns is passed to it over its unix socket, and its answer relayed, streams
included; a gone owner or a forged hint is a 404."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import orjson
import pytest
import trio
import trio.lowlevel
from _support import (
    SSE_GET,
    Client,
    EventReader,
    initialize_body,
    mcp_post,
    post_message,
    sse_messages,
    tool_call,
)

from trio_mcp import Context, HTTPServer, MCPConfig, Server, ServerConfig, serve_mcp
from trio_mcp._mcp._endpoint import MCPEndpoint

KEYS = ("the group's key",)
VERSION = "2025-11-25"


class Process:
    """One server of the group, its app's tools telling which one answered."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.running = 0
        self.cancelled = 0
        self.app = app = Server(f"server-{name}")

        @app.tool()
        async def whoami() -> str:
            return name

        @app.tool()
        async def steps(ctx: Context) -> str:
            for step in range(1, 4):
                await ctx.report_progress(step, 3, f"step {step}")
            return f"{name} done"

        @app.tool()
        async def notify() -> str:
            app.notify_tools_changed()
            return "notified"

        @app.tool()
        async def hang() -> str:
            self.running += 1
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.cancelled += 1
                raise
            finally:
                self.running -= 1
            return "never"  # pragma: no cover

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

    async def factory(name: str, http: dict | None = None, **config: object) -> Process:
        process = Process(name)
        settings = dict(owner_name=name, peer_sockets_dir=peer_dir, request_state_keys=KEYS)
        settings.update(config)
        mcp = MCPConfig(http=ServerConfig(port=0, **(http or {})), **settings)  # type: ignore[arg-type]
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


async def connect(port: int, source: str = "127.0.0.1") -> Client:
    return Client(await trio.open_tcp_stream("127.0.0.1", port, local_address=source))


async def exchange(port: int, data: bytes, source: str = "127.0.0.1"):
    async with await connect(port, source) as client:
        await client.send(data)
        with trio.fail_after(10):
            return await client.read_reply()


async def initialize(port: int) -> str:
    reply = await exchange(port, mcp_post(initialize_body(VERSION)))
    assert reply.status == 200, reply.body
    session = reply.header(b"mcp-session-id").decode()
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = await exchange(port, mcp_post(initialized, session=session, version=VERSION))
    assert done.status == 202
    return session


def answer_text(reply) -> str:
    if reply.header(b"content-type") == b"text/event-stream":
        message = sse_messages(reply.body)[-1]
    else:
        message = orjson.loads(reply.body)
    return message["result"]["content"][0]["text"]


async def test_calls_through_another_process_reach_the_owner(start: Start) -> None:
    a, b = await start("a"), await start("b")
    session = await initialize(a.port)
    assert session.startswith("a.")
    for id in range(10):
        data = mcp_post(tool_call("whoami", id=id), session=session, version=VERSION)
        reply = await exchange(b.port, data)
        assert reply.status == 200, reply.body
        assert answer_text(reply) == "a"
        assert reply.header(b"content-type") == b"application/json"
        assert reply.header(b"via") == b"1.1 b"  # (B passed it on: RFC 9110 7.6.3)
    direct = await exchange(a.port, mcp_post(tool_call("whoami"), session=session, version=VERSION))
    assert direct.header(b"via") is None
    # and a keep-alive connection to B carries several passed-on calls, on one hop
    hops = a.server.statistics().connections_total
    async with await connect(b.port) as client:
        for id in range(3):
            await client.send(
                mcp_post(tool_call("whoami", id=id), session=session, version=VERSION)
            )
            with trio.fail_after(10):
                reply = await client.read_reply()
            assert (reply.status, answer_text(reply)) == (200, "a")
            assert reply.header(b"connection") != b"close"
    assert a.server.statistics().connections_total == hops + 1


async def test_a_kept_hop_the_owner_closed_is_replaced(start: Start) -> None:
    """The owner ends an idle hop (its idle time limit); the client's next
    call through the same connection takes a new hop, and is answered."""
    a = await start("a", http={"idle_timeout_s": 0.3, "write_timeout_s": 0.8})
    b = await start("b")
    session = await initialize(a.port)
    async with await connect(b.port) as client:
        for id in range(2):
            await client.send(
                mcp_post(tool_call("whoami", id=id), session=session, version=VERSION)
            )
            with trio.fail_after(10):
                reply = await client.read_reply()
            assert (reply.status, answer_text(reply)) == (200, "a")
            with trio.fail_after(5):
                while a.server.statistics().connections_open:  # the hop ends, idle
                    await trio.sleep(0.02)


async def test_clients_behind_one_proxy_connection_get_hops_of_their_own(start: Start) -> None:
    """One proxy connection carries two clients' calls: each reaches the
    owner as its own client (a hop is kept for one client only)."""
    a = await start("a")
    b = await start("b", http={"forwarded_allow_ips": ("127.0.0.1",)})
    session = await initialize(a.port)
    async with await connect(b.port) as proxy:
        for id, forwarded in enumerate([b"10.0.0.1", b"10.0.0.2", b"10.0.0.1"]):
            data = mcp_post(
                tool_call("whoami", id=id),
                session=session,
                version=VERSION,
                extra=[(b"X-Forwarded-For", forwarded)],
            )
            await proxy.send(data)
            with trio.fail_after(10):
                reply = await proxy.read_reply()
            assert (reply.status, answer_text(reply)) == (200, "a"), reply.body
            # the hop kept open on A is admitted as this call's client
            assert forwarded.decode() in a.server.quota._by_group


async def test_a_streamed_answer_arrives_whole_through_another_process(start: Start) -> None:
    a, b = await start("a"), await start("b")
    session = await initialize(a.port)
    data = mcp_post(tool_call("steps", progress=True), session=session, version=VERSION)
    reply = await exchange(b.port, data)
    assert reply.status == 200
    assert reply.header(b"content-type") == b"text/event-stream"
    messages = sse_messages(reply.body)
    progress = [m["params"]["progress"] for m in messages if m.get("method")]
    assert progress == [1, 2, 3]
    assert messages[-1]["result"]["content"][0]["text"] == "a done"


async def test_a_get_stream_through_another_process_gets_the_owners_notifications(
    start: Start,
) -> None:
    a, b = await start("a"), await start("b")
    session = await initialize(a.port)
    async with await connect(b.port) as client:
        reader = EventReader(client)
        get = (
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            b"MCP-Protocol-Version: " + VERSION.encode() + b"\r\n"
            b"Mcp-Session-Id: " + session.encode() + b"\r\n\r\n"
        )
        with trio.fail_after(10):
            head = await reader.head(get)
            assert head.status_code == 200
            await reader.event()  # (the priming event)
            while not a.endpoint.stores.bus.open_streams():
                await trio.sleep(0.01)
            await exchange(a.port, mcp_post(tool_call("notify"), session=session, version=VERSION))
            _, message = await reader.message()
    assert message["method"] == "notifications/tools/list_changed"


async def test_delete_through_another_process_ends_the_session_on_its_owner(start: Start) -> None:
    a, b = await start("a"), await start("b")
    session = await initialize(a.port)
    delete = (
        b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: "
        + session.encode()
        + b"\r\nMCP-Protocol-Version: "
        + VERSION.encode()
        + b"\r\n\r\n"
    )
    assert (await exchange(b.port, delete)).status == 200
    assert a.endpoint.stores.sessions.count() == 0
    data = mcp_post(tool_call("whoami"), session=session, version=VERSION)
    assert (await exchange(a.port, data)).status == 404
    assert (await exchange(b.port, data)).status == 404


async def test_http_sse_posts_through_another_process_reach_the_owner(start: Start) -> None:
    a, b = await start("a"), await start("b")
    async with await connect(a.port) as client:
        reader = EventReader(client)
        with trio.fail_after(10):
            assert (await reader.head(SSE_GET)).status_code == 200
            _, endpoint, _ = await reader.event()
            assert b"session_id=a." in endpoint
            await post_message(b.port, endpoint, initialize_body("2024-11-05"))
            _, answer = await reader.message()
            assert answer["result"]["protocolVersion"] == "2024-11-05"
            await post_message(
                b.port, endpoint, {"jsonrpc": "2.0", "method": "notifications/initialized"}
            )
            await post_message(b.port, endpoint, tool_call("whoami", id=7))
            _, answer = await reader.message()
    assert answer["id"] == 7
    assert answer["result"]["content"][0]["text"] == "a"


async def test_a_gone_owner_is_a_404(start: Start, peer_dir: str) -> None:
    a, b = await start("a"), await start("b")
    session = await initialize(a.port)
    data = mcp_post(tool_call("whoami"), session=session, version=VERSION)
    os.unlink(os.path.join(peer_dir, "a.sock"))  # its socket removed
    reply = await exchange(b.port, data)
    assert reply.status == 404, reply.body
    assert orjson.loads(reply.body)["error"]["message"].startswith("Session not found")
    a.scope.cancel()  # the process ended
    await trio.lowlevel.checkpoint()
    other = await initialize(b.port)
    assert other.startswith("b.")
    c = await start("c")
    assert (await exchange(c.port, data)).status == 404
    assert (
        await exchange(c.port, mcp_post(tool_call("whoami"), session=other, version=VERSION))
    ).status == 200


async def test_a_stale_socket_file_of_a_dead_owner_is_a_404(start: Start, peer_dir: str) -> None:
    import socket

    b = await start("b")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.path.join(peer_dir, "a.sock"))
    stale.close()  # a file nobody listens on: connecting is refused
    from trio_mcp._protocol._owners import OwnerHints

    session = OwnerHints("a", [k.encode() for k in KEYS])()
    reply = await exchange(b.port, mcp_post(tool_call("whoami"), session=session, version=VERSION))
    assert reply.status == 404


async def test_forged_or_tampered_hints_are_404s(start: Start) -> None:
    a, b = await start("a"), await start("b")
    session = await initialize(a.port)
    name, random, mac = session.split(".")
    forged = [
        f"{name}.{random}.{'A' * 12}",
        f"b.{random}.{mac}",
        f"a.{random[:-1]}{'0' if random[-1] != '0' else '1'}.{mac}",
        f"zz.{random}.{mac}",
        f"{name}.{random}",
        "a." + "0" * 32 + ".AAAAAAAAAAAA",
    ]
    for session_id in forged:
        data = mcp_post(tool_call("whoami"), session=session_id, version=VERSION)
        assert (await exchange(b.port, data)).status == 404, session_id
        assert (await exchange(a.port, data)).status == 404, session_id


async def test_the_owner_sees_the_real_client(start: Start) -> None:
    """The owner's per-address connection quota counts the client's own
    address, not the hop's: a client at its share is refused, another is not."""
    a = await start("a", http={"max_connections_per_address": 1})
    b = await start("b")
    session = await initialize(a.port)
    data = mcp_post(tool_call("whoami"), session=session, version=VERSION)
    async with await connect(a.port, "127.0.0.2"):  # 127.0.0.2's one connection to A
        with trio.fail_after(5):
            while not a.server.quota._by_group.get("127.0.0.2"):
                await trio.sleep(0.01)
        refused = await exchange(b.port, data, source="127.0.0.2")
        assert refused.status == 503, refused.body
        assert refused.header(b"retry-after") is not None
        served = await exchange(b.port, data, source="127.0.0.3")
        assert (served.status, answer_text(served)) == (200, "a")


async def test_a_client_gone_mid_call_frees_both_hops(start: Start) -> None:
    """The client of a passed-on call goes: the passing process drops the
    call and its hop; the owner sees its hop go and treats it as any
    vanished client (issue 22's rule: a 2025 session's call goes on, its
    socket closed at once; the session's end cancels it)."""
    a = await start("a", http={"write_timeout_s": 0.8})
    b = await start("b", http={"write_timeout_s": 0.8})
    session = await initialize(a.port)
    fds = open_fds()
    data = mcp_post(tool_call("hang"), session=session, version=VERSION)
    client = await connect(b.port)
    await client.send(data)
    with trio.fail_after(5):
        while not a.running:
            await trio.sleep(0.01)
        while a.server.statistics().connections_open != 1:  # (the hop)
            await trio.sleep(0.01)
        assert b.server.statistics().connections_open == 1
        await client.stream.aclose()
        while b.server.statistics().connections_open or open_fds() > fds:
            await trio.sleep(0.02)
    assert a.running == 1  # (the 2025 rule: it goes on, for a resume)
    delete = (
        b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: "
        + session.encode()
        + b"\r\n\r\n"
    )
    assert (await exchange(b.port, delete)).status == 200
    with trio.fail_after(5):
        while a.running:
            await trio.sleep(0.01)
    assert a.cancelled == 1


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_get_stream_ends_on_its_owner_when_its_client_goes(start: Start) -> None:
    a = await start("a", http={"write_timeout_s": 0.8})
    b = await start("b", http={"write_timeout_s": 0.8})
    session = await initialize(a.port)
    client = await connect(b.port)
    reader = EventReader(client)
    get = (
        b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        b"Mcp-Session-Id: " + session.encode() + b"\r\n\r\n"
    )
    with trio.fail_after(5):
        assert (await reader.head(get)).status_code == 200
        while not a.endpoint.stores.bus.open_streams():
            await trio.sleep(0.01)
        await client.stream.aclose()
        while a.endpoint.stores.bus.open_streams() or a.server.statistics().connections_open:
            await trio.sleep(0.02)
        while b.server.statistics().connections_open:
            await trio.sleep(0.02)


async def test_peer_sockets_need_a_private_directory(tmp_path: Path) -> None:
    from trio_mcp._errors import StartupError
    from trio_mcp._trio._peers import bind_peer_listener

    open_dir = tmp_path / "open"
    open_dir.mkdir(mode=0o755)
    os.chmod(open_dir, 0o755)
    with pytest.raises(StartupError, match="0700"):
        bind_peer_listener(str(open_dir / "a.sock"), None)
    with pytest.raises(StartupError):
        bind_peer_listener(str(tmp_path / "missing" / "a.sock"), None)


async def test_no_passing_on_with_shared_stores_or_without_a_directory(peer_dir: str) -> None:
    from trio_mcp._stores._stores import Stores, memory_stores

    config = MCPConfig(owner_name="a", peer_sockets_dir=peer_dir, request_state_keys=KEYS)
    plain = memory_stores(config, 1.0)
    shared = Stores(plain.sessions, plain.events, plain.bus, plain.requests, shared=True)
    endpoint = MCPEndpoint(Server("x"), config, stores=shared)
    assert endpoint.passing is None and endpoint.peer_socket is None
    alone = MCPEndpoint(Server("x"), MCPConfig(owner_name="a", request_state_keys=KEYS))
    assert alone.passing is None and alone.peer_socket is None
    assert alone.stores.sessions.table._new_id().startswith("a.")
    grouped = MCPEndpoint(Server("x"), config)
    assert grouped.peer_socket == os.path.join(peer_dir, "a.sock")


async def test_serve_mcp_listens_on_the_peer_socket(nursery: trio.Nursery, peer_dir: str) -> None:
    config = MCPConfig(
        http=ServerConfig(port=0),
        owner_name="w0",
        peer_sockets_dir=peer_dir,
        request_state_keys=KEYS,
    )
    server = await nursery.start(
        lambda task_status: serve_mcp(Process("w0").app, config, task_status=task_status)
    )
    path = os.path.join(peer_dir, "w0.sock")
    assert os.stat(path).st_mode & 0o777 == 0o600
    server.shutdown()
