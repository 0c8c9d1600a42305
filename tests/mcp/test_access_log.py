"""The access log: one line per JSON-RPC request, in the text or the JSON
format, written by a thread from a bounded buffer; sampled; a writer that
cannot keep up drops lines and counts them, and requests go on."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from _support import MCP, connect, mcp_post, modern_body, modern_headers
from mcp_fixtures import everything

from trio_mcp import HTTPServer, MCPConfig, ServerConfig, serve_mcp
from trio_mcp._observe._access_log import session_hash


@asynccontextmanager
async def serving(**config: Any) -> AsyncIterator[HTTPServer]:
    """The everything example served with `config`; on exit, the server has
    stopped, so the log's writer has written its last batch."""
    http = ServerConfig(port=0, forwarded_allow_ips=("127.0.0.1",))
    mcp_config = MCPConfig(http=http, **config)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            server: HTTPServer = await nursery.start(partial(serve_mcp, everything, mcp_config))
            try:
                yield server
            finally:
                server.shutdown()


async def some_requests(port: int) -> str:
    """initialize, a good call, a failing call, an unknown method, through a
    proxy that says the client is 203.0.113.7; then a 2026 call and a
    scrape. Returns the session id."""
    mcp = MCP(await connect(port))
    forwarded = [(b"X-Forwarded-For", b"203.0.113.7")]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}},
    }
    reply = await mcp.post(initialize, session=None, version=None, extra=forwarded)
    session = reply.header(b"mcp-session-id").decode()
    mcp.session, mcp.version = session, "2025-11-25"
    echo = {"name": "echo", "arguments": {"text": "hi"}}
    for id, method, params in (
        (2, "tools/call", echo),
        (3, "tools/call", {"name": "test_error_handling", "arguments": {}}),
        (4, "no/such method", {}),
    ):
        body = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
        assert (await mcp.post(body, extra=forwarded)).status == 200
    body = modern_body("tools/call", echo)
    await mcp.client.send(mcp_post(body, version="2026-07-28", extra=modern_headers(body)))
    assert (await mcp.client.read_reply()).status == 200
    await mcp.client.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await mcp.client.read_reply()).status in (200, 404)
    await mcp.client.stream.aclose()
    return session


async def test_text_lines_have_every_field(tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    async with serving(access_log=True, access_log_path=str(log), metrics_path="/metrics") as s:
        session = await some_requests(s.ports[0])
    lines = log.read_text().splitlines()
    assert len(lines) == 5, lines  # initialize, three calls, the 2026 call; no scrape
    fields = [line.split(" ") for line in lines]
    assert all(len(f) == 10 for f in fields if '"' not in f[4]), lines
    first = fields[0]
    assert first[0].endswith("Z") and first[0][10] == "T"  # ISO 8601, UTC
    assert first[1:7] == ["203.0.113.7", "-", "2025-11-25", "initialize", "-", "200"]
    good = fields[1]
    assert good[1:8] == ["203.0.113.7", "-", "2025-11-25", "tools/call", "echo", "200", "-"]
    assert good[8].endswith("us") and int(good[8][:-2]) >= 0  # microseconds
    assert good[9] == session_hash(session) and session not in lines[1]
    assert fields[2][4:8] == ["tools/call", "test_error_handling", "200", "-"]
    # a client's method name with a space is one quoted field
    assert lines[3].split(" ")[4:8] == ['"no/such', 'method"', "-", "200"]
    assert " -32601 " in lines[3]
    modern = fields[4]
    assert modern[1:8] == ["127.0.0.1", "-", "2026-07-28", "tools/call", "echo", "200", "-"]
    assert modern[9] == "-"  # no session in 2026


async def test_json_lines_have_every_field(tmp_path: Path) -> None:
    log = tmp_path / "access.jsonl"
    async with serving(access_log=True, access_log_path=str(log), access_log_format="json") as s:
        session = await some_requests(s.ports[0])
    lines = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    assert len(lines) == 5
    call = lines[1]
    assert set(call) == {
        "time",
        "client",
        "principal",
        "era",
        "method",
        "name",
        "status",
        "code",
        "duration_us",
        "session",
    }
    assert call["client"] == "203.0.113.7" and call["principal"] == "-"
    assert (call["era"], call["method"], call["name"]) == ("2025-11-25", "tools/call", "echo")
    assert (call["status"], call["code"]) == (200, None)
    assert isinstance(call["duration_us"], int) and call["duration_us"] >= 0
    assert call["session"] == session_hash(session)
    assert lines[3]["method"] == "no/such method" and lines[3]["code"] == -32601
    assert lines[4]["era"] == "2026-07-28" and lines[4]["session"] is None


async def test_lines_are_sampled(tmp_path: Path) -> None:
    log = tmp_path / "sampled.log"
    async with serving(access_log=True, access_log_path=str(log), access_log_sample=0.5) as s:
        mcp = MCP(await connect(s.ports[0]))
        mcp.version = "2025-11-25"
        await mcp.initialize()
        for id in range(200):
            await mcp.call("ping", id=id)
        await mcp.client.stream.aclose()
    logged = len(log.read_text().splitlines())
    assert 40 < logged < 160  # (about half of 201; 8 standard deviations either side)


async def test_a_writer_that_cannot_keep_up_drops_and_counts(tmp_path: Path) -> None:
    fifo = tmp_path / "full.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # (never read)
    filler = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        _fill(filler)  # the log's writes block
        os.close(filler)
        async with serving(
            access_log=True,
            access_log_path=str(fifo),
            access_log_buffer_lines=4,
            metrics_path="/metrics",
        ) as server:
            port = server.ports[0]
            mcp = MCP(await connect(port))
            await mcp.initialize()
            for id in range(30):
                assert (await mcp.call("ping", id=id))["result"] == {}
            await mcp.client.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = await mcp.client.read_reply()
            dropped = next(
                line
                for line in reply.body.decode().splitlines()
                if line.startswith("trio_mcp_access_log_dropped_lines_total ")
            )
            # 31 lines; at most the buffer's 4 and the writer's stuck batch of 4 kept
            assert float(dropped.split(" ")[1]) >= 31 - 8
            await mcp.client.stream.aclose()
            os.close(reader)  # the stuck write fails now, and the writer ends
            reader = -1
    finally:
        if reader >= 0:
            os.close(reader)


def _fill(fd: int) -> None:
    """Write to a non-blocking pipe until it is full."""
    try:
        while True:
            os.write(fd, b"x" * 65536)
    except BlockingIOError:
        return


@pytest.mark.parametrize(
    ("setting", "value"),
    [("access_log_format", "xml"), ("access_log_sample", 0.0), ("access_log_buffer_lines", 0)],
)
def test_bad_settings_are_refused(setting: str, value: object) -> None:
    with pytest.raises(ValueError, match=setting):
        MCPConfig(**{setting: value})  # type: ignore[arg-type]
