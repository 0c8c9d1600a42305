"""Health, readiness and the drain (issue 25, items 8 and 9), over real
sockets on 127.0.0.1: the probes' answers and what they skip; a graceful
shutdown in its three phases (not ready while still serving for
``drain_delay_s``, then only the work in flight, then the deadline, where a
request still running is answered with an error in every era); and a
second signal, which stops a real process at once."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import trio
from _support import (
    MCP,
    Client,
    EventReader,
    connect,
    connect_when_up,
    free_port,
    initialize_body,
    mcp_post,
    modern_body,
    modern_headers,
    open_http_sse,
    post,
    post_message,
    sse_messages,
)
from _support import tool_call as call

from trio_mcp import Context, HTTPServer, MCPConfig, MCPEndpoint, Request, Server

HANGING_SERVER = Path(__file__).with_name("hanging_server.py")
#: A Host a load balancer's probe sends (an address and port), and an Origin
#: no allowed list has: the endpoint refuses both, the probes answer.
PROBE_HOST = b"10.1.2.3:8000"


async def refuse_everyone(request: Request) -> object | None:
    return None


def probe(method: bytes, path: bytes, extra: bytes = b"") -> bytes:
    return (
        method + b" " + path + b" HTTP/1.1\r\nHost: " + PROBE_HOST + b"\r\n"
        b"Origin: http://elsewhere.example\r\n" + extra + b"\r\n"
    )


async def ask(port: int, request: bytes, head: bool = False):
    """One request on a new connection; its reply."""
    async with await connect(port) as client:
        await client.send(request)
        with trio.fail_after(10):
            return await client.read_reply(head=head)


def hanging_app(started: trio.Event | None = None) -> Server:
    app = Server("hanging")

    @app.tool()
    async def hang() -> str:
        if started is not None:
            started.set()
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    @app.tool()
    async def hang_after_progress(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        if started is not None:
            started.set()
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    @app.tool()
    async def quick() -> str:
        return "done"

    return app


def assert_shutting_down(answer: dict, id: int) -> None:
    assert answer["id"] == id, answer
    assert answer["error"]["code"] == -32603
    assert "shutting down" in answer["error"]["message"]


# ---- the probes ----------------------------------------------------------------


async def test_the_probes_answer_get_and_head_before_every_check(start_mcp) -> None:
    server = await start_mcp(hanging_app(), authenticate=refuse_everyone)
    port = server.ports[0]
    # what the endpoint says to such a request: the Host check, then the hook
    assert (await ask(port, probe(b"GET", b"/mcp"))).status == 403
    refused = await ask(port, mcp_post(call("quick", 1)))
    assert refused.status == 401
    for path, body in ((b"/healthz", b"ok\n"), (b"/readyz", b"ready\n")):
        reply = await ask(port, probe(b"GET", path))
        assert (reply.status, reply.body) == (200, body)
        assert reply.header(b"content-type") == b"text/plain; charset=utf-8"
        assert reply.header(b"cache-control") == b"no-store"
        assert reply.header(b"access-control-allow-origin") is None
        head = await ask(port, probe(b"HEAD", path), head=True)
        assert (head.status, head.body) == (200, b"")
        assert head.header(b"content-length") == b"%d" % len(body)
        assert head.header(b"cache-control") == b"no-store"
        for method in (b"POST", b"PUT", b"DELETE", b"OPTIONS"):
            extra = b"Content-Length: 0\r\n" if method in (b"POST", b"PUT") else b""
            other = await ask(port, probe(method, path, extra))
            assert (other.status, other.header(b"allow")) == (405, b"GET, HEAD")
    # a probe on a keep-alive connection leaves it open for the next request
    async with await connect(port) as client:
        for _ in range(2):
            await client.send(probe(b"GET", b"/readyz"))
            reply = await client.read_reply()
            assert reply.status == 200 and reply.header(b"connection") is None


async def test_the_probe_paths_are_settings(start_mcp) -> None:
    server = await start_mcp(hanging_app(), health_path="/live", ready_path=None)
    port = server.ports[0]
    assert (await ask(port, probe(b"GET", b"/live"))).body == b"ok\n"
    assert (await ask(port, probe(b"GET", b"/healthz"))).status == 404
    assert (await ask(port, probe(b"GET", b"/readyz"))).status == 404


def test_probe_paths_that_cannot_work_are_refused() -> None:
    for settings in (
        {"health_path": "healthz"},
        {"ready_path": "/mcp"},
        {"health_path": "/sse"},
        {"health_path": "/probe", "ready_path": "/probe"},
    ):
        with pytest.raises(ValueError, match="_path"):
            MCPConfig(**settings)  # type: ignore[arg-type]
    assert MCPConfig(legacy_sse=False, health_path="/sse").health_path == "/sse"


async def test_an_endpoint_not_yet_running_is_not_ready() -> None:
    endpoint = MCPEndpoint(hanging_app())
    request = Request("GET", "/readyz", 1, [(b"host", PROBE_HOST)], {b"host": PROBE_HOST}, b"")
    assert endpoint.route(request).status == 503  # type: ignore[union-attr]
    async with endpoint.running():
        assert endpoint.route(request).status == 200  # type: ignore[union-attr]
    assert endpoint.route(request).status == 503  # type: ignore[union-attr]


# ---- the drain -----------------------------------------------------------------

DELAY = 30.0


async def read_to_the_end(stream: EventReader) -> None:
    """Read events until the stream ends (its client sees the last chunk)."""
    while not stream.ended:
        try:
            await stream.event()
        except EOFError:
            return


async def refused(port: int) -> bool:
    try:
        stream = await trio.open_tcp_stream("127.0.0.1", port)
    except OSError:
        return True
    await stream.aclose()
    return False


async def test_the_drain_goes_unready_first_and_serves_until_its_delay_ends(
    start_mcp, autojump_clock
) -> None:
    server = await start_mcp(hanging_app(), http={"drain_delay_s": DELAY})
    port = server.ports[0]
    async with await connect(port) as before, await connect(port) as listening:
        # a keep-alive connection from before, and a GET stream of a session
        mcp = MCP(before)
        await mcp.initialize()
        stream = EventReader(listening)
        get = (
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            b"Mcp-Session-Id: %s\r\nMCP-Protocol-Version: %s\r\n\r\n"
            % (mcp.session.encode(), mcp.version.encode())
        )
        assert (await stream.head(get)).status_code == 200
        started = trio.current_time()
        server.shutdown()

        assert (await ask(port, probe(b"GET", b"/readyz"))).status == 503
        assert (await ask(port, probe(b"GET", b"/healthz"))).status == 200
        # a new connection is accepted and served, and told to close
        async with await connect(port) as late:
            await late.send(mcp_post(initialize_body()))
            reply = await late.read_reply()
            assert (reply.status, reply.header(b"connection")) == (200, b"close")
            assert await late.read_until_eof() == b""
        # so is the next request on a connection from before
        answered = await mcp.post(call("quick", 2))
        assert answered.status == 200 and answered.header(b"connection") == b"close"
        assert orjson.loads(answered.body)["result"]["content"][0]["text"] == "done"
        # the GET stream lives on while the listener is open (its keepalives
        # come; an end would raise EOFError)
        with trio.move_on_at(started + DELAY - 2):
            while True:
                await stream.event()
        async with await connect(port) as partial:
            # a request begun near the end of the delay (within the head time limit)
            await partial.send(post(b"{}")[:20])
            await trio.sleep_until(started + DELAY + 1)
            # the delay is over: the listener is closed, the stream has ended
            assert await refused(port)
            with trio.fail_after(5):
                await read_to_the_end(stream)
            # a request that arrives whole now is still served, with a close
            await partial.send(post(b"{}")[20:])
            reply = await partial.read_reply()
            assert reply.status != 503 and reply.header(b"connection") == b"close", reply
            assert await partial.read_until_eof() == b""
    with trio.fail_after(5):
        while server.statistics().connections_open:
            await trio.sleep(0.1)


async def test_without_a_delay_the_listener_closes_at_once(start_mcp) -> None:
    server = await start_mcp(hanging_app())
    port = server.ports[0]
    server.shutdown()
    await trio.sleep(0.05)
    assert await refused(port)


# ---- the deadline: a request still running gets an error answer -----------------

STOP = 5.0


async def start_hanging(start_mcp, started: trio.Event) -> HTTPServer:
    return await start_mcp(hanging_app(started), http={"shutdown_timeout_s": STOP})


async def shut_down_when(
    started: trio.Event, server: HTTPServer, moments: list[float] | None = None
) -> None:
    """Shut the server down once the handler runs (noting when in `moments`)."""
    await started.wait()
    server.shutdown()
    if moments is not None:
        moments.append(trio.current_time())


async def test_a_2025_json_call_running_at_the_deadline_is_answered(
    start_mcp, autojump_clock
) -> None:
    started = trio.Event()
    server = await start_hanging(start_mcp, started)
    async with await connect(server.ports[0]) as client, trio.open_nursery() as nursery:
        mcp = MCP(client)
        await mcp.initialize()
        stopping: list[float] = []
        nursery.start_soon(shut_down_when, started, server, stopping)
        reply = await mcp.post(call("hang", 2))
        assert trio.current_time() - stopping[0] >= STOP
    assert (reply.status, reply.header(b"connection")) == (200, b"close")
    assert reply.header(b"content-type") == b"application/json"
    assert_shutting_down(orjson.loads(reply.body), 2)


async def test_a_2025_streamed_call_running_at_the_deadline_ends_with_the_error(
    start_mcp, autojump_clock
) -> None:
    started = trio.Event()
    server = await start_hanging(start_mcp, started)
    async with await connect(server.ports[0]) as client, trio.open_nursery() as nursery:
        mcp = MCP(client)
        await mcp.initialize()
        nursery.start_soon(shut_down_when, started, server)
        reply = await mcp.post(call("hang_after_progress", 3, progress=True))
    assert reply.header(b"content-type") == b"text/event-stream"
    progress, answer = sse_messages(reply.body)
    assert progress["method"] == "notifications/progress"  # type: ignore[index]
    assert_shutting_down(answer, 3)  # type: ignore[arg-type]


async def test_a_2026_call_running_at_the_deadline_is_answered(start_mcp, autojump_clock) -> None:
    started = trio.Event()
    server = await start_hanging(start_mcp, started)
    body = modern_body("tools/call", {"name": "hang", "arguments": {}}, id=4)
    async with await connect(server.ports[0]) as client, trio.open_nursery() as nursery:
        nursery.start_soon(shut_down_when, started, server)
        await client.send(mcp_post(body, version="2026-07-28", extra=modern_headers(body)))
        with trio.fail_after(STOP + 5):
            reply = await client.read_reply()
    assert reply.header(b"connection") == b"close"
    assert_shutting_down(orjson.loads(reply.body), 4)


async def test_an_http_sse_call_running_at_the_deadline_is_answered_on_its_stream(
    start_mcp, autojump_clock
) -> None:
    started = trio.Event()
    server = await start_hanging(start_mcp, started)
    port = server.ports[0]
    client, reader, endpoint = await open_http_sse(port)
    async with client, trio.open_nursery() as nursery:
        await post_message(port, endpoint, call("hang", 5))
        nursery.start_soon(shut_down_when, started, server)
        with trio.fail_after(STOP + 5):
            _, answer = await reader.message()
            assert_shutting_down(answer, 5)
            await read_to_the_end(reader)  # and then the stream ends


# ---- a second signal -------------------------------------------------------------


async def test_a_second_signal_stops_at_once() -> None:
    """A real process with a long drain delay and shutdown time: the first
    SIGTERM starts the drain (not ready, still serving), the second ends
    everything at once; the call that was running is cut, unanswered."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(HANGING_SERVER), str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with trio.fail_after(30):
            caller = await connect_when_up(port)
            async with caller:
                mcp = MCP(caller)
                await mcp.initialize()
                await caller.send(
                    mcp_post(call("hang", 2), session=mcp.session, version=mcp.version)
                )
                await trio.sleep(0.2)
                proc.send_signal(signal.SIGTERM)
                while (await ask(port, probe(b"GET", b"/readyz"))).status != 503:
                    await trio.sleep(0.05)
                assert proc.poll() is None  # draining, for a minute
                proc.send_signal(signal.SIGTERM)
                while proc.poll() is None:
                    await trio.sleep(0.05)
                assert await Client(caller.stream).read_until_eof() == b""
        assert proc.returncode == 0
        assert proc.stdout is not None
        output = proc.stdout.read().decode()
        assert "draining" in output and "stopping at once" in output, output
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
