"""`ResponseWriter.respond` (and `respond_nowait` with `send_rest`) over a
real socket: an answer goes to the kernel without waiting when it fits, and
the rest of one that does not fit is sent under the write time limit.

The connection is one end of a socket pair served by `HTTPServer` exactly as
an accepted connection is (`SocketIO`); the test reads the other end by hand.
Each case runs with answers sent at once and with every answer held for the
scheduler batch's end (as in a busy server); a connection's last answer goes
at once either way, under the write limit rather than the lingering close's.
"""

from __future__ import annotations

import socket

import pytest
import trio

from trio_mcp import (
    DeferredResponse,
    HTTPServer,
    Request,
    Response,
    ResponseWriter,
    ServerConfig,
)
from trio_mcp._trio._socketio import _SEND_AT_ONCE, BatchEndSender

BIG = bytes(range(256)) * (16 * 1024)  # 4 MiB: far more than the socket buffers hold


def serve(
    nursery: trio.Nursery,
    body: bytes,
    nowait: bool = False,
    batched: bool = False,
    **config: object,
) -> tuple[socket.socket, trio.Event]:
    async def answer(writer: ResponseWriter) -> None:
        response = Response(200, [(b"content-type", b"application/json")], body)
        if nowait:
            rest = writer.respond_nowait(response)
            if rest:
                await writer.send_rest(rest)
        else:
            await writer.respond(response)

    async def handler(request: Request) -> DeferredResponse:
        return DeferredResponse(answer)

    server = HTTPServer(handler, ServerConfig(**config))  # type: ignore[arg-type]
    if batched:  # as `serve` runs it, in a busy server: every answer held
        server._batch = BusyBatch()
        trio.lowlevel.add_instrument(server._batch)
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    done = trio.Event()

    async def run() -> None:
        group = server.quota.admit("")  # (as the accept loop does)
        assert group is not None
        await server._serve_socket(ours, group, "")
        done.set()

    nursery.start_soon(run)
    nursery.start_soon(server.enforce_timeouts)
    return theirs, done


class BusyBatch(BatchEndSender):
    """A batch-end sender as in a busy server: no answer goes at once."""

    def __init__(self) -> None:
        super().__init__()
        self.sent_at_once = _SEND_AT_ONCE

    def before_io_wait(self, timeout: float) -> None:
        super().before_io_wait(timeout)
        self.sent_at_once = _SEND_AT_ONCE


REQUEST = b"POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}"


async def read_reply(sock: socket.socket, pause: float) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        await trio.lowlevel.wait_readable(sock)
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        .split(b":")[1]
        .strip()
    )
    while len(body) < length:
        await trio.sleep(pause)  # a slow reader: the server must wait for room
        await trio.lowlevel.wait_readable(sock)
        body += sock.recv(65536)
    return head, body


WAYS = pytest.mark.parametrize("nowait", [False, True], ids=["respond", "respond_nowait"])
BATCHED = pytest.mark.parametrize("batched", [False, True], ids=["at-once", "batch-end"])


@WAYS
@BATCHED
async def test_an_answer_bigger_than_the_socket_buffers_arrives_whole(
    nursery, nowait, batched
) -> None:
    sock, _ = serve(nursery, BIG, nowait, batched)
    with trio.fail_after(20):
        for _ in range(2):  # and the connection goes on after it
            sock.sendall(REQUEST)
            head, body = await read_reply(sock, 0.001)
            assert head.startswith(b"HTTP/1.1 200 ")
            assert body == BIG
    sock.close()


@WAYS
@BATCHED
async def test_a_small_answer_goes_out_without_waiting_for_the_client(
    nursery, nowait, batched
) -> None:
    sock, _ = serve(nursery, b'{"ok":true}', nowait, batched)
    with trio.fail_after(5):
        for _ in range(3):
            sock.sendall(REQUEST)
            _, body = await read_reply(sock, 0)
            assert body == b'{"ok":true}'
    sock.close()


@WAYS
@BATCHED
async def test_the_rest_of_an_answer_is_sent_under_the_write_limit(
    nursery, autojump_clock, nowait, batched
) -> None:
    sock, done = serve(nursery, BIG, nowait, batched, write_timeout_s=5)
    sock.sendall(REQUEST)
    t0 = trio.current_time()
    with trio.fail_after(60):
        await done.wait()  # the client never reads: the server gives up on it
    assert 5 <= trio.current_time() - t0 <= 6
    sock.close()


@WAYS
@BATCHED
async def test_a_last_answer_is_sent_under_the_write_limit_not_the_lingering_close(
    nursery, autojump_clock, nowait, batched
) -> None:
    # The connection closes after this answer; reading it takes far longer than
    # the lingering close's second, well within the write limit.
    sock, done = serve(nursery, BIG, nowait, batched)
    sock.sendall(REQUEST.replace(b"host: x", b"host: x\r\nconnection: close"))
    with trio.fail_after(60):
        head, body = await read_reply(sock, 0.05)
        await done.wait()
    assert head.startswith(b"HTTP/1.1 200 ")
    assert body == BIG
    sock.close()
