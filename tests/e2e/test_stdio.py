"""The stdio transport in process: a client on two trio memory streams, one
JSON-RPC message a line, against `serve_stdio`."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from trio_mcp import Context, MCPConfig, Server, serve_stdio
from trio_mcp._mcp._stdio import DRAIN_S

MODERN = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


class Seen:
    """What the app's handlers noticed, for the tests to check."""

    def __init__(self) -> None:
        self.cancelled = False
        self.started = trio.Event()
        self.lifespan: object = None


def make_app(seen: Seen) -> Server:
    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[str]:
        yield "the pool"

    app = Server("stdio-test", "1.0", lifespan=lifespan)

    @app.tool()
    async def echo(text: str) -> str:
        return text

    @app.tool()
    async def with_progress(ctx: Context) -> str:
        for step in (1, 2, 3):
            await ctx.report_progress(step, 3)
        return "done"

    @app.tool()
    async def slow(ctx: Context) -> str:
        seen.lifespan = ctx.lifespan
        seen.started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            seen.cancelled = True
            raise
        return "never"

    @app.tool()
    async def nap(seconds: float) -> str:
        await trio.sleep(seconds)
        return "rested"

    @app.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("name?", {"type": "object", "properties": {}})
        return f"{answer['action']} {answer['content']['name']}"

    @app.tool()
    async def shout(ctx: Context) -> str:
        await ctx.log("info", "chatty")
        await ctx.log("error", "serious")
        return "said"

    @app.tool()
    async def broken() -> str:
        raise RuntimeError("a bug")

    @app.tool()
    async def big(n: int) -> str:
        return "x" * n

    @app.resource("test://note", mime_type="text/plain")
    async def note() -> str:
        return "a note"

    @app.prompt()
    async def greet(name: str) -> str:
        return f"Hello, {name}"

    return app


class Client:
    """The client's ends of the two pipes."""

    def __init__(self, send: trio.abc.SendStream, receive: trio.abc.ReceiveStream) -> None:
        self.send_stream = send
        self.receive_stream = receive
        self._buffer = b""
        #: Messages read while waiting for another.
        self.others: list[dict[str, Any]] = []

    async def send_line(self, line: bytes) -> None:
        await self.send_stream.send_all(line + b"\n")

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_line(orjson.dumps({"jsonrpc": "2.0", **message}))

    async def receive(self) -> dict[str, Any] | None:
        """The next message the server wrote; None at the end of its output."""
        while b"\n" not in self._buffer:
            chunk = await self.receive_stream.receive_some()
            if not chunk:
                assert self._buffer == b"", "the output ended inside a line"
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = orjson.loads(line)
        return message

    async def answer_to(self, request_id: object) -> dict[str, Any]:
        """The response with `request_id`; what comes before it goes to `others`."""
        while True:
            message = await self.receive()
            assert message is not None, "the output ended first"
            if message.get("id") == request_id and "method" not in message:
                return message
            self.others.append(message)

    async def call(self, request_id: object, method: str, **params: Any) -> dict[str, Any]:
        await self.send({"id": request_id, "method": method, "params": params})
        return await self.answer_to(request_id)

    async def initialize(self, version: str = "2025-11-25", **capabilities: Any) -> dict[str, Any]:
        answer = await self.call(
            0,
            "initialize",
            protocolVersion=version,
            capabilities=capabilities,
            clientInfo={"name": "test", "version": "0"},
        )
        await self.send({"method": "notifications/initialized"})
        return answer


def modern_params(**params: Any) -> dict[str, Any]:
    meta = {META_VERSION: MODERN, META_CAPABILITIES: params.pop("capabilities", {})}
    meta.update(params.pop("meta", {}))
    return {**params, "_meta": meta}


@pytest.fixture
def seen() -> Seen:
    return Seen()


@pytest.fixture
def app(seen: Seen) -> Server:
    return make_app(seen)


class Served:
    """A running `serve_stdio` and its client."""

    def __init__(self, client: Client, finished: trio.Event) -> None:
        self.client = client
        self.finished = finished


@contextlib.asynccontextmanager
async def serving(app: Server, **options: Any) -> AsyncIterator[Served]:
    to_server, stdin = trio.testing.memory_stream_one_way_pair()
    stdout, from_server = trio.testing.memory_stream_one_way_pair()
    finished = trio.Event()
    config = options.pop("config", None)

    async def run() -> None:
        await serve_stdio(app, stdin, stdout, config, **options)
        finished.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        yield Served(Client(to_server, from_server), finished)
        await to_server.aclose()  # the end of the input ends serving
        with trio.fail_after(DRAIN_S + 5):
            await finished.wait()


async def test_initialize_list_and_call_with_progress(app: Server) -> None:
    async with serving(app) as served:
        client = served.client
        init = await client.initialize("2025-06-18")
        assert init["result"]["protocolVersion"] == "2025-06-18"
        assert init["result"]["serverInfo"] == {"name": "stdio-test", "version": "1.0"}
        assert "tools" in init["result"]["capabilities"]
        listed = await client.call(1, "tools/list")
        assert {"echo", "slow", "ask"} <= {tool["name"] for tool in listed["result"]["tools"]}
        called = await client.call(
            2, "tools/call", name="with_progress", arguments={}, _meta={"progressToken": "p"}
        )
        assert called["result"]["content"] == [{"type": "text", "text": "done"}]
        assert [(m["method"], m["params"]["progress"]) for m in client.others] == [
            ("notifications/progress", 1),
            ("notifications/progress", 2),
            ("notifications/progress", 3),
        ]
        read = await client.call(3, "resources/read", uri="test://note")
        assert read["result"]["contents"][0]["text"] == "a note"
        prompt = await client.call(4, "prompts/get", name="greet", arguments={"name": "Ann"})
        assert prompt["result"]["messages"][0]["content"]["text"] == "Hello, Ann"


async def test_an_unknown_version_gets_the_newest_2025_one(app: Server) -> None:
    async with serving(app) as served:
        init = await served.client.initialize("1999-01-01")
        assert init["result"]["protocolVersion"] == "2025-11-25"
        again = await served.client.call(9, "initialize", protocolVersion="2025-11-25")
        assert again["error"]["code"] == -32600


async def test_requests_wait_for_initialize_but_ping_does_not(app: Server) -> None:
    async with serving(app) as served:
        refused = await served.client.call(1, "tools/list")
        assert refused["error"]["code"] == -32600
        assert (await served.client.call(2, "ping"))["result"] == {}


async def test_a_bad_line_is_answered_and_reading_goes_on(app: Server) -> None:
    async with serving(app) as served:
        client = served.client
        await client.initialize()
        await client.send_line(b"{this is not json")
        assert await client.receive() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error: the body is not valid JSON"},
        }
        await client.send_line(b'{"jsonrpc": "2.0", "id": 1}')  # no method, no result
        assert (await client.receive())["error"]["code"] == -32600  # type: ignore[index]
        await client.send_line(b'[{"jsonrpc": "2.0", "id": 2, "method": "ping"}]')
        assert (await client.receive())["error"]["code"] == -32600  # type: ignore[index]
        await client.send_line(b"   \r")  # blank lines are passed over
        assert (await client.call(3, "ping"))["result"] == {}
        assert client.others == []


async def test_lines_split_and_joined_anyhow(app: Server) -> None:
    async with serving(app, max_line_bytes=200) as served:
        client = served.client
        await client.initialize()
        ping = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}'
        for byte in (ping % 1) + b"\n":  # a byte at a time
            await client.send_stream.send_all(bytes([byte]))
        await client.send_stream.send_all(ping % 2 + b"\n" + ping % 3 + b"\r\n" + b"y" * 250)
        await client.send_stream.send_all(b"y" * 250 + b"\n" + ping % 4)  # no newline at the end
        await client.send_stream.aclose()
        seen = [await client.receive() for _ in range(5)]
        ids = [m["id"] for m in seen if m is not None]  # (requests run concurrently)
        assert sorted(ids, key=str) == [1, 2, 3, 4, None]
        assert await client.receive() is None


async def test_a_line_too_long_is_answered_and_skipped(app: Server) -> None:
    async with serving(app, max_line_bytes=200) as served:
        client = served.client
        await client.initialize()
        text = "y" * 500
        await client.send(
            {"id": 1, "method": "tools/call", "params": {"name": "echo", "text": text}}
        )
        too_long = await client.receive()
        assert too_long is not None
        assert too_long["id"] is None and too_long["error"]["code"] == -32600
        assert "longer than 200 bytes" in too_long["error"]["message"]
        echoed = await client.call(2, "tools/call", name="echo", arguments={"text": "short"})
        assert echoed["result"]["content"][0]["text"] == "short"
        assert client.others == []  # nothing for the skipped request


async def test_cancelled_requests_end_and_get_no_answer(app: Server, seen: Seen) -> None:
    async with serving(app) as served:
        client = served.client
        await client.initialize()
        await client.send({"id": 7, "method": "tools/call", "params": {"name": "slow"}})
        await seen.started.wait()
        assert seen.lifespan == "the pool"  # the app's lifespan is entered
        await client.send({"method": "notifications/cancelled", "params": {"requestId": 7}})
        assert (await client.call(8, "ping"))["result"] == {}
        assert seen.cancelled
        assert client.others == []  # no answer to 7


async def test_elicitation_round_trip(app: Server) -> None:
    async with serving(app) as served:
        client = served.client
        await client.initialize(elicitation={})
        await client.send({"id": "a", "method": "tools/call", "params": {"name": "ask"}})
        asked = await client.receive()
        assert asked is not None and asked["method"] == "elicitation/create"
        assert asked["params"]["message"] == "name?"
        reply = {"action": "accept", "content": {"name": "Grace"}}
        await client.send({"id": asked["id"], "result": reply})
        answer = await client.answer_to("a")
        assert answer["result"]["content"][0]["text"] == "accept Grace"


async def test_elicitation_needs_the_capability(app: Server) -> None:
    async with serving(app) as served:
        await served.client.initialize()
        answer = await served.client.call(1, "tools/call", name="ask")
        assert answer["error"]["code"] == -32600
        assert "elicitation" in answer["error"]["message"]


async def test_a_failing_tool_fails_alone(app: Server) -> None:
    async with serving(app) as served:
        await served.client.initialize()
        failed = await served.client.call(1, "tools/call", name="broken")
        assert failed["result"]["isError"] is True
        unknown = await served.client.call(2, "tools/call", name="nothing")
        assert unknown["error"]["code"] == -32602
        assert (await served.client.call(3, "ping"))["result"] == {}


async def test_concurrent_answers_never_share_a_line(app: Server) -> None:
    async with serving(app) as served:
        client = served.client
        await client.initialize()
        sizes = {n: 1000 * n + 7 for n in range(1, 40)}
        for request_id, size in sizes.items():
            await client.send(
                {
                    "id": request_id,
                    "method": "tools/call",
                    "params": {"name": "big", "arguments": {"n": size}},
                }
            )
        got = {}
        while len(got) < len(sizes):
            message = await client.receive()  # each line parses on its own
            assert message is not None
            got[message["id"]] = len(message["result"]["content"][0]["text"])
        assert got == sizes


async def test_log_messages_follow_the_session_level(app: Server) -> None:
    async with serving(app) as served:
        client = served.client
        await client.initialize()
        assert (await client.call(1, "logging/setLevel", level="warning"))["result"] == {}
        await client.call(2, "tools/call", name="shout")
        assert [m["params"]["data"] for m in client.others] == ["serious"]


async def test_server_notifications_reach_the_session(app: Server) -> None:
    async with serving(app) as served:
        client = served.client
        app.notify_tools_changed()  # before initialize: nobody to tell
        await client.initialize()
        await client.call(1, "resources/subscribe", uri="test://note")
        app.notify_resource_updated("test://note")
        app.notify_resource_updated("test://other")  # not subscribed
        app.notify_tools_changed()
        app.log("debug", "from the app")
        await client.call(2, "ping")
        assert [(m["method"], m.get("params")) for m in client.others] == [
            ("notifications/resources/updated", {"uri": "test://note"}),
            ("notifications/tools/list_changed", {}),
            ("notifications/message", {"level": "debug", "data": "from the app"}),
        ]


async def test_a_batch_in_2025_03_26(app: Server) -> None:
    async with serving(app) as served:
        client = served.client
        await client.initialize("2025-03-26")
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/whatever"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "b"}},
            },
            {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {}},
            {"jsonrpc": "2.0", "id": 4},
        ]
        await client.send_line(orjson.dumps(batch))
        answers = await client.receive()
        assert isinstance(answers, list)
        assert [(a["id"], "result" in a) for a in answers] == [
            (1, True),
            (2, True),
            (3, False),
            (4, False),
        ]
        assert answers[1]["result"]["content"][0]["text"] == "b"


async def test_end_of_input_lets_running_requests_finish(app: Server) -> None:
    async with serving(app) as served:
        client = served.client
        await client.initialize()
        await client.send(
            {
                "id": 1,
                "method": "tools/call",
                "params": {"name": "nap", "arguments": {"seconds": DRAIN_S / 2}},
            }
        )
        await client.send_stream.aclose()
        answer = await client.answer_to(1)
        assert answer["result"]["content"][0]["text"] == "rested"
        assert await client.receive() is None  # and then the output ends
        with trio.fail_after(1):
            await served.finished.wait()


async def test_end_of_input_cancels_what_runs_too_long(
    app: Server, seen: Seen, autojump_clock: trio.testing.MockClock
) -> None:
    async with serving(app) as served:
        client = served.client
        await client.initialize()
        await client.send({"id": 1, "method": "tools/call", "params": {"name": "slow"}})
        await seen.started.wait()
        start = trio.current_time()
        await client.send_stream.aclose()
        assert await client.receive() is None  # no answer: it was cancelled
        assert seen.cancelled
        assert trio.current_time() - start == pytest.approx(DRAIN_S)


async def test_the_request_time_limit(app: Server, autojump_clock: trio.testing.MockClock) -> None:
    async with serving(app, config=MCPConfig(request_timeout_s=5)) as served:
        await served.client.initialize()
        answer = await served.client.call(1, "tools/call", name="slow")
        assert answer["error"]["code"] == -32603
        assert "5" in answer["error"]["message"]


# ---- 2026-07-28 on stdio -------------------------------------------------------


async def test_modern_discover_and_call(app: Server) -> None:
    async with serving(app) as served:
        client = served.client  # (no initialize: a modern client needs none)
        found = await client.call(1, "server/discover", **modern_params())
        result = found["result"]
        assert result["supportedVersions"][0] == MODERN
        assert result["resultType"] == "complete"
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "stdio-test"
        called = await client.call(
            2,
            "tools/call",
            **modern_params(name="with_progress", arguments={}, meta={"progressToken": 5}),
        )
        assert called["result"]["content"][0]["text"] == "done"
        assert called["result"]["resultType"] == "complete"
        assert [m["params"]["progress"] for m in client.others] == [1, 2, 3]


async def test_modern_refusals(app: Server) -> None:
    async with serving(app) as served:
        client = served.client
        bad_version = modern_params()
        bad_version["_meta"][META_VERSION] = "2099-01-01"
        answer = await client.call(1, "tools/list", **bad_version)
        assert answer["error"]["code"] == -32022
        no_caps = modern_params()
        del no_caps["_meta"][META_CAPABILITIES]
        assert (await client.call(2, "tools/list", **no_caps))["error"]["code"] == -32602
        assert (await client.call(3, "ping", **modern_params()))["error"]["code"] == -32601
        level = modern_params(meta={"io.modelcontextprotocol/logLevel": "loud"})
        assert (await client.call(4, "tools/list", **level))["error"]["code"] == -32602


async def test_modern_input_required_then_retry(app: Server) -> None:
    async with serving(app) as served:
        client = served.client
        first = await client.call(
            1, "tools/call", **modern_params(name="ask", capabilities={"elicitation": {}})
        )
        result = first["result"]
        assert result["resultType"] == "input_required"
        (key,) = result["inputRequests"]
        retry = modern_params(
            name="ask",
            capabilities={"elicitation": {}},
            inputResponses={key: {"action": "accept", "content": {"name": "Ada"}}},
            requestState=result["requestState"],
        )
        second = await client.call(2, "tools/call", **retry)
        assert second["result"]["content"][0]["text"] == "accept Ada"


async def test_modern_listen(app: Server) -> None:
    async with serving(app) as served:
        client = served.client
        await client.send(
            {
                "id": "L",
                "method": "subscriptions/listen",
                "params": modern_params(
                    notifications={
                        "toolsListChanged": True,
                        "resourceSubscriptions": ["test://note"],
                    }
                ),
            }
        )
        ack = await client.receive()
        assert ack is not None and ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["_meta"] == {SUBSCRIPTION: "L"}
        app.notify_tools_changed()
        app.notify_resource_updated("test://note")
        app.log("error", "never on a listen")
        changed = await client.receive()
        updated = await client.receive()
        assert changed == {
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {SUBSCRIPTION: "L"}},
        }
        assert updated is not None
        assert updated["params"] == {"uri": "test://note", "_meta": {SUBSCRIPTION: "L"}}
        # a second listen, which the client cancels: it gets no response
        await client.send(
            {"id": "M", "method": "subscriptions/listen", "params": modern_params(notifications={})}
        )
        assert (await client.receive())["method"].endswith("acknowledged")  # type: ignore[index]
        await client.send({"method": "notifications/cancelled", "params": {"requestId": "M"}})
        await client.send_stream.aclose()  # the end of the input ends "L" with its response
        final = await client.receive()
        assert final == {
            "jsonrpc": "2.0",
            "id": "L",
            "result": {"resultType": "complete", "_meta": {SUBSCRIPTION: "L"}},
        }
        assert await client.receive() is None


@pytest.mark.parametrize("closes_input", [True, False])
async def test_a_client_that_stops_reading_does_not_hang_the_server(
    app: Server, autojump_clock: trio.testing.MockClock, closes_input: bool
) -> None:
    to_server, stdin = trio.testing.memory_stream_one_way_pair()
    stdout, from_server = trio.testing.lockstep_stream_one_way_pair()  # never read
    start = trio.current_time()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_stdio, app, stdin, stdout)
            client = Client(to_server, from_server)
            for request_id in range(300):  # more than the writer's queue holds
                await client.send({"id": request_id, "method": "ping"})
            if closes_input:
                await to_server.aclose()
    took = trio.current_time() - start
    if closes_input:  # the drain, then as long again for the writer
        assert took == pytest.approx(2 * DRAIN_S)
    else:  # a write blocked for write_timeout_s
        assert took == pytest.approx(MCPConfig().http.write_timeout_s)


# ---- the command, a real process ------------------------------------------------

NOISY_APP = """
from trio_mcp import Server

print("printed at import")
server = Server("noisy")


@server.tool()
def shout() -> str:
    print("printed by a tool")
    return "ok"
"""


async def test_the_command_keeps_stdout_for_the_protocol(tmp_path: Path) -> None:
    target = tmp_path / "noisy.py"
    target.write_text(NOISY_APP)
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "sh", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "shout"}},
    ]
    stdin = b"".join(orjson.dumps(line) + b"\n" for line in lines) + b"not json\n"
    # (Python's own buffering, as a client that starts it sees it: what the
    # target prints while it is imported waits in the buffer, and goes to stderr)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    command = [sys.executable, "-m", "trio_mcp", "run", str(target), "--transport", "stdio"]
    with trio.fail_after(60):
        result = await trio.run_process(
            command, stdin=stdin, capture_stdout=True, capture_stderr=True, env=env, check=False
        )
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr
    answers = [orjson.loads(line) for line in result.stdout.splitlines()]  # JSON, every line
    by_id = {answer["id"]: answer for answer in answers}
    assert len(answers) == 3 and by_id[None]["error"]["code"] == -32700
    assert by_id[1]["result"]["serverInfo"]["name"] == "noisy"
    assert by_id[2]["result"]["content"][0]["text"] == "ok"
    assert "printed at import" in stderr and "printed by a tool" in stderr
    assert "serving noisy on stdin and stdout" in stderr


@pytest.mark.parametrize("eras", ["legacy", "modern"])
async def test_one_era_only(app: Server, eras: str) -> None:
    async with serving(app, config=MCPConfig(eras=eras)) as served:
        client = served.client
        discovered = await client.call(1, "server/discover", **modern_params())
        init = await client.call(
            2, "initialize", protocolVersion="2025-11-25", capabilities={}, clientInfo={}
        )
        if eras == "legacy":  # a modern request gets an error a dual-era client falls back on
            assert discovered["error"]["code"] == -32600
            assert init["result"]["protocolVersion"] == "2025-11-25"
        else:
            assert discovered["result"]["supportedVersions"][0] == MODERN
            assert init["error"]["code"] == -32022
            assert init["error"]["data"] == {"supported": [MODERN], "requested": "2025-11-25"}
