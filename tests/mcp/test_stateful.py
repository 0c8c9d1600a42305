"""Random sequences of what clients do, good and bad, against one endpoint.

Each example is a list of steps (initialize, calls, requests to the client
and their answers, GET streams and resumes, disconnects at random points,
DELETEs, malformed header and body values, 2026-07-28 calls, time passing),
run over in-memory connections under trio's autojump clock. After each step:
no 5xx but a quota's 503, and a fresh client is still served. Once every
client has left and its session ended or expired, every count of the
endpoint's statistics is back to zero and no connection is open.

``TRIO_MCP_STATEFUL_EXAMPLES`` sets how many sequences run (default 40; the
longer run's figure is in benchmarks/README.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import orjson
import trio
import trio.testing
from _support import Client, EventReader, initialize_body, mcp_post, modern_body, modern_headers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_mcp import (
    Context,
    HTTPServer,
    MCPConfig,
    MCPEndpoint,
    MCPStatistics,
    Server,
    ServerConfig,
)

EXAMPLES = int(os.environ.get("TRIO_MCP_STATEFUL_EXAMPLES", "40"))
NOTHING = MCPStatistics(0, 0, 0, 0, 0, 0, 0, 0, 0)
IDLE_S = 60.0
VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
#: Header values a client may get wrong, and some wrong ones.
BAD_VALUES = st.sampled_from(
    [b"", b" ", b"\x7f", b"x" * 300, b"2025-13-45", b"=?base64?!!?=", b"-1", b"0", b"a,b", b"\xff"]
)
READ_HEADERS = st.sampled_from(
    [
        b"Mcp-Session-Id",
        b"MCP-Protocol-Version",
        b"Accept",
        b"Content-Type",
        b"Last-Event-ID",
        b"Origin",
        b"Mcp-Method",
        b"Mcp-Name",
        b"Authorization",
    ]
)
BAD_BODIES = st.sampled_from(
    [
        b"",
        b"null",
        b"[]",
        b"{",
        b'{"jsonrpc":"1.0","id":1,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":[1],"method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":7}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":{}}}',
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}',
        b'{"jsonrpc":"2.0","id":99,"result":' + b"[" * 300 + b"]" * 300 + b"}",
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"n":1' + b"0" * 400 + b"}}",
    ]
)

STEPS = st.one_of(
    st.tuples(st.just("init"), st.sampled_from(VERSIONS)),
    st.tuples(st.just("call"), st.integers(0, 9), st.sampled_from(["echo", "chatty"])),
    st.tuples(st.just("ask"), st.integers(0, 9)),
    st.tuples(st.just("answer"), st.integers(0, 9), st.sampled_from(["result", "error", "bad"])),
    st.tuples(st.just("get"), st.integers(0, 9), st.sampled_from(["new", "resume", "garbage"])),
    st.tuples(st.just("drop"), st.integers(0, 9)),
    st.tuples(st.just("half"), st.integers(1, 200)),
    st.tuples(st.just("delete"), st.integers(0, 9)),
    st.tuples(st.just("header"), st.integers(0, 9), READ_HEADERS, BAD_VALUES),
    st.tuples(st.just("body"), st.integers(0, 9), BAD_BODIES),
    st.tuples(st.just("modern"), st.sampled_from(["ok", "no-header", "wrong-name", "bad-meta"])),
    st.tuples(st.just("wait"), st.sampled_from([0.5, 5.0, 30.0, 90.0])),
)


def app() -> Server:
    server = Server("stateful")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    @server.tool()
    async def chatty(ctx: Context) -> str:
        for step in range(3):
            await ctx.report_progress(step, 3)
        return "said"

    @server.tool()
    async def ask(ctx: Context) -> str:
        roots = await ctx.list_roots()
        return str(len(roots))

    return server


@dataclass
class World:
    """The clients of one sequence, and what they know."""

    server: HTTPServer
    endpoint: MCPEndpoint
    nursery: trio.Nursery
    sessions: list[tuple[str, str]] = field(default_factory=list)  # (id, version)
    event_ids: list[tuple[str, str]] = field(default_factory=list)  # (session, event id)
    open: list[Client] = field(default_factory=list)  # streams held open
    asked: list[tuple[str, Any]] = field(default_factory=list)  # (session, request id)
    statuses: list[int] = field(default_factory=list)
    ids: int = 100  # (the ask calls' ids: some collide with the other calls', most do not)

    async def connect(self) -> Client:
        ours, theirs = trio.testing.memory_stream_pair()
        self.nursery.start_soon(self.server.handle_stream, theirs)
        return Client(ours)

    async def exchange(self, data: bytes, head: bool = False) -> int:
        """One request on a new connection; its status (0: no answer in 10 s)."""
        client = await self.connect()
        try:
            await client.send(data)
            with trio.move_on_after(10):
                reply = await client.read_reply(head=head)
                self.note_events(data, reply.body)
                self.statuses.append(reply.status)
                return reply.status
            return 0
        except (EOFError, trio.BrokenResourceError):
            return 0
        finally:
            await client.stream.aclose()

    def note_events(self, request: bytes, body: bytes) -> None:
        marker = b"mcp-session-id: "
        start = request.lower().find(marker)
        if start < 0:
            return
        session = request[start + len(marker) :].split(b"\r\n", 1)[0].decode("latin-1")
        for line in body.split(b"\n"):
            if line.startswith(b"id: "):
                self.event_ids.append((session, line[4:].decode("latin-1")))

    def session(self, n: int) -> tuple[str, str] | None:
        return self.sessions[n % len(self.sessions)] if self.sessions else None


async def step(world: World, action: tuple[Any, ...]) -> None:
    kind = action[0]
    if kind == "init":
        body = initialize_body(action[1])
        body["params"]["capabilities"] = {"roots": {}}
        client = await world.connect()
        async with client:
            await client.send(mcp_post(body))
            with trio.fail_after(10):
                reply = await client.read_reply()
        world.statuses.append(reply.status)
        if reply.status == 200:
            session_id = reply.header(b"mcp-session-id").decode()
            world.sessions.append((session_id, action[1]))
            ack = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await world.exchange(mcp_post(ack, session=session_id, version=action[1]))
        return
    if kind == "modern":
        body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        headers = modern_headers(body)
        if action[1] == "no-header":
            headers = [h for h in headers if h[0] != b"Mcp-Name"]
        elif action[1] == "wrong-name":
            headers = modern_headers(body, Mcp_Name=b"other")
        elif action[1] == "bad-meta":
            body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = []
        await world.exchange(mcp_post(body, version="2026-07-28", extra=headers))
        return
    if kind == "wait":
        await trio.sleep(action[1])
        return
    if kind == "half":  # a request cut off at a random byte, then gone
        whole = mcp_post({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        client = await world.connect()
        await client.send(whole[: action[1] % len(whole)])
        await client.stream.aclose()
        return
    if kind == "drop":
        if world.open:
            client = world.open.pop(action[1] % len(world.open))
            await client.stream.aclose()
        return
    found = world.session(action[1])
    if found is None:
        return
    session_id, version = found
    if kind == "call":
        params: dict[str, Any] = {"name": action[2], "arguments": {}}
        if action[2] == "echo":
            params["arguments"] = {"text": "x"}
        else:
            params["_meta"] = {"progressToken": 1}
        body = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}
        await world.exchange(mcp_post(body, session=session_id, version=version))
    elif kind == "ask":
        world.ids += 1
        body = {
            "jsonrpc": "2.0",
            "id": world.ids,
            "method": "tools/call",
            "params": {"name": "ask"},
        }
        body["params"]["arguments"] = {}
        client = await world.connect()
        reader = EventReader(client)
        with trio.move_on_after(10):
            head = await reader.head(mcp_post(body, session=session_id, version=version))
            world.statuses.append(head.status_code)
            try:
                _, asked = await reader.message()
            except EOFError:  # answered at once (the id in use, say): nothing asked
                pass
            else:
                if asked.get("method") == "roots/list":
                    world.asked.append((session_id, asked.get("id")))
        world.open.append(client)
    elif kind == "answer" and world.asked:
        asked_session, request_id = world.asked.pop(action[1] % len(world.asked))
        if action[2] == "result":
            body = {"jsonrpc": "2.0", "id": request_id, "result": {"roots": []}}
        elif action[2] == "error":
            body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -1, "message": "no"}}
        else:
            body = {"jsonrpc": "2.0", "id": request_id, "result": "not an object"}
        await world.exchange(mcp_post(body, session=asked_session, version=version))
    elif kind == "get":
        extra = []
        if action[2] == "resume" and world.event_ids:
            extra = [(b"Last-Event-ID", world.event_ids[-1][1].encode())]
        elif action[2] == "garbage":
            extra = [(b"Last-Event-ID", b"zz-9-\xb2")]
        client = await world.connect()
        request = (
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            b"Mcp-Session-Id: "
            + session_id.encode()
            + b"\r\n"
            + b"".join(name + b": " + value + b"\r\n" for name, value in extra)
            + b"\r\n"
        )
        reader = EventReader(client)
        with trio.move_on_after(10):
            head = await reader.head(request)
            world.statuses.append(head.status_code)
        world.open.append(client)
    elif kind == "delete":
        request = (
            b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: "
            + session_id.encode()
            + b"\r\n\r\n"
        )
        if await world.exchange(request) in (200, 404):
            world.sessions.remove(found)
    elif kind == "header":
        ping = {"jsonrpc": "2.0", "id": 8, "method": "ping"}
        data = mcp_post(ping, session=session_id, version=version, extra=[(action[2], action[3])])
        await world.exchange(data)
    elif kind == "body":
        await world.exchange(mcp_post(action[2], session=session_id, version=version))


async def served(world: World) -> bool:
    """A fresh 2026-07-28 client still gets its answer."""
    body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "control"}})
    client = await world.connect()
    async with client:
        await client.send(mcp_post(body, version="2026-07-28", extra=modern_headers(body)))
        with trio.fail_after(10):
            reply = await client.read_reply()
    answer = orjson.loads(reply.body)
    return reply.status == 200 and answer["result"]["content"][0]["text"] == "control"


async def run_sequence(actions: list[tuple[Any, ...]]) -> None:
    config = MCPConfig(http=ServerConfig(), session_idle_timeout_s=IDLE_S)
    endpoint = MCPEndpoint(app(), config)
    server = HTTPServer(endpoint, config.http)
    async with endpoint.running(), trio.open_nursery() as nursery:
        nursery.start_soon(server.enforce_timeouts)
        world = World(server, endpoint, nursery)
        for action in actions:
            await step(world, action)
            bad = [s for s in world.statuses if s >= 500 and s != 503]
            assert not bad, f"{bad} after {action}"
            assert await served(world), f"a fresh client was not served after {action}"
        for client in world.open:
            await client.stream.aclose()
        for session_id, _ in list(world.sessions):
            await world.exchange(
                b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: "
                + session_id.encode()
                + b"\r\n\r\n"
            )
        await trio.sleep(IDLE_S * 4)  # (the autojump clock: expiry and sweeps at once)
        assert endpoint.statistics() == NOTHING
        assert server.statistics().connections_open == 0
        nursery.cancel_scope.cancel()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(actions=st.lists(STEPS, max_size=25))
def test_random_clients_leave_nothing_behind(actions: list[tuple[Any, ...]]) -> None:
    trio.run(run_sequence, actions, clock=trio.testing.MockClock(autojump_threshold=0))
