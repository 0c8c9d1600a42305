"""Answers held for the scheduler batch's end (`SocketIO.hold`, `BatchEndSender`).

A held answer leaves when trio's batch ends, before anything else is written
to its socket, before the socket is shut down or closed, and even when no
batch sender is there to send it (the connection's next read does). What the
kernel does not take at the batch's end is sent by the connection's task
under the write time limit; a failed send is reported by its next call.

Each test holds answers on one end of a real socket pair and reads the other
end by hand.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator

import pytest
import trio

from trio_mcp import (
    DeferredResponse,
    HTTPServer,
    MCPConfig,
    Request,
    Response,
    ResponseWriter,
    ServerConfig,
    serve,
)
from trio_mcp._trio._socketio import _EAGER_PAUSE, _SEND_AT_ONCE, BatchEndSender, SocketIO

BIG = bytes(range(256)) * (16 * 1024)  # 4 MiB: far more than the socket buffers hold


@pytest.fixture
async def batch() -> AsyncIterator[BatchEndSender]:
    sender = BatchEndSender()
    trio.lowlevel.add_instrument(sender)
    yield sender
    trio.lowlevel.remove_instrument(sender)


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made: list[tuple[socket.socket, socket.socket]] = []
    yield made
    for ours, theirs in made:
        ours.close()
        theirs.close()


def connect(
    pairs: list[tuple[socket.socket, socket.socket]],
    batch: BatchEndSender | None,
    write_timeout: float = 30.0,
) -> tuple[SocketIO, socket.socket]:
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    pairs.append((ours, theirs))
    return SocketIO(ours, batch, write_timeout), theirs


def hold(io: SocketIO, data: bytes) -> bytes:
    """`io.hold` in a busy batch: one whose first answers already went at once."""
    if io._batch is not None:
        io._batch.sent_at_once = _SEND_AT_ONCE
    return io.hold(data)


def unread(sock: socket.socket) -> bytes:
    """What the peer can read now, without waiting."""
    data = b""
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


async def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        await trio.lowlevel.wait_readable(sock)
        data += sock.recv(1 << 20)
    return data


async def test_a_held_answer_leaves_when_the_batch_ends(batch, pairs) -> None:
    io, peer = connect(pairs, batch)
    assert hold(io, b"answer") == b""  # nothing left for the caller to send
    assert unread(peer) == b""  # not yet: the batch has not ended
    await trio.lowlevel.checkpoint()
    assert unread(peer) == b"answer"


async def test_the_answers_of_one_batch_leave_together(batch, pairs) -> None:
    ends = [connect(pairs, batch) for _ in range(3)]
    for number, (io, _) in enumerate(ends):
        hold(io, b"answer %d" % number)
    assert [unread(peer) for _, peer in ends] == [b"", b"", b""]
    await trio.lowlevel.checkpoint()
    assert [unread(peer) for _, peer in ends] == [b"answer 0", b"answer 1", b"answer 2"]


async def test_the_first_answers_of_each_batch_go_at_once(batch, pairs) -> None:
    # A quiet server (a few answers per batch) answers as soon as it can.
    ends = [connect(pairs, batch) for _ in range(_SEND_AT_ONCE + 2)]
    answers = [b"answer %d" % number for number in range(len(ends))]
    for (io, _), answer in zip(ends, answers, strict=True):
        assert io.hold(answer) == b""
    assert [unread(peer) for _, peer in ends] == answers[:_SEND_AT_ONCE] + [b"", b""]
    await trio.lowlevel.checkpoint()
    assert [unread(peer) for _, peer in ends[_SEND_AT_ONCE:]] == answers[_SEND_AT_ONCE:]
    io, peer = ends[-1]
    io.hold(b"again")  # a new batch: at once again
    assert unread(peer) == b"again"


async def test_without_a_batch_sender_an_answer_goes_at_once(pairs) -> None:
    io, peer = connect(pairs, None)
    assert io.hold(b"answer") == b""
    assert unread(peer) == b"answer"


async def test_a_second_answer_sends_the_held_one_first(batch, pairs) -> None:
    # (a client that pipelines: two answers in one step of the task)
    io, peer = connect(pairs, batch)
    hold(io, b"first,")
    assert hold(io, b"second") == b""  # sent now, after the first
    assert unread(peer) == b"first,second"


async def test_a_second_answer_the_kernel_cannot_take_returns_its_rest(batch, pairs) -> None:
    io, peer = connect(pairs, batch)
    received = []

    async def client() -> None:
        received.append(await read_exactly(peer, len(b"first,") + len(BIG)))

    hold(io, b"first,")
    rest = hold(io, BIG)
    assert 0 < len(rest) < len(BIG)
    assert BIG.endswith(rest)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client)
            await io.send_all(rest)
    assert received == [b"first," + BIG]


@pytest.mark.parametrize("how", ["send_all", "send_nowait", "send_eof", "aclose"])
async def test_any_other_write_or_close_sends_the_held_answer_first(batch, pairs, how) -> None:
    io, peer = connect(pairs, batch)
    hold(io, b"answer;")
    if how == "send_all":
        await io.send_all(b"more")
        assert unread(peer) == b"answer;more"
    elif how == "send_nowait":
        assert io.send_nowait(b"more") == 4
        assert unread(peer) == b"answer;more"
    elif how == "send_eof":
        await io.send_eof()
        assert unread(peer) == b"answer;"
        assert peer.recv(10) == b""  # then the end of the stream
    else:
        await io.aclose()
        assert unread(peer) == b"answer;"
        assert peer.recv(10) == b""


@pytest.mark.parametrize("paused", [False, True], ids=["eager-read", "paused-read"])
async def test_the_next_read_sends_a_held_answer_no_batch_end_sent(pairs, paused) -> None:
    # The sender exists but is no instrument of this run (as if trio had
    # dropped it): the connection's own next read is the backstop.
    io, peer = connect(pairs, BatchEndSender())
    if paused:
        io._eager = _EAGER_PAUSE  # the read waits for readiness at once

    async def client() -> None:
        assert await read_exactly(peer, 6) == b"answer"
        peer.send(b"next request")

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            hold(io, b"answer")
            nursery.start_soon(client)
            assert await io.receive_some(100) == b"next request"


async def test_what_the_kernel_leaves_at_the_batch_end_goes_before_the_next_read(
    batch, pairs
) -> None:
    io, peer = connect(pairs, batch)

    async def client() -> None:
        assert await read_exactly(peer, len(BIG)) == BIG
        peer.send(b"next request")

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            hold(io, BIG)
            nursery.start_soon(client)
            assert await io.receive_some(100) == b"next request"
    assert io._unsent is None


async def test_what_the_kernel_leaves_goes_before_the_next_write(batch, pairs) -> None:
    io, peer = connect(pairs, batch)
    received = []

    async def client() -> None:
        received.append(await read_exactly(peer, len(BIG) + 4))

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            hold(io, BIG)
            await trio.lowlevel.checkpoint()  # the batch's end sent part of it
            assert io._unsent is not None
            assert io.send_nowait(b"more") == 0  # not before the rest
            nursery.start_soon(client)
            await io.send_all(b"more")
    assert received == [BIG + b"more"]


async def test_a_client_that_does_not_read_its_answer_is_given_up_after_the_write_limit(
    batch, pairs, autojump_clock
) -> None:
    io, _ = connect(pairs, batch, write_timeout=5)
    hold(io, BIG)
    t0 = trio.current_time()
    with trio.fail_after(60), pytest.raises(trio.BrokenResourceError, match="did not read"):
        await io.receive_some(100)
    assert 5 <= trio.current_time() - t0 < 6


async def test_a_failed_batch_end_send_is_reported_by_the_next_call(batch, pairs) -> None:
    gone, gone_peer = connect(pairs, batch)
    live, live_peer = connect(pairs, batch)
    gone_peer.close()
    hold(gone, b"answer")
    hold(live, b"answer")
    await trio.lowlevel.checkpoint()  # the send fails quietly: no exception here
    assert unread(live_peer) == b"answer"  # and the others' answers went
    with trio.fail_after(5), pytest.raises(trio.BrokenResourceError, match="send failed"):
        await gone.receive_some(100)
    with pytest.raises(trio.BrokenResourceError, match="send failed"):
        await gone.send_all(b"more")
    # the sender is still an instrument of the run: the next batch's answers go
    hold(live, b"again")
    await trio.lowlevel.checkpoint()
    assert unread(live_peer) == b"again"


@pytest.mark.parametrize("enabled", [True, False])
async def test_the_server_holds_answers_only_while_it_runs_and_only_if_configured(
    nursery, enabled
) -> None:
    config = ServerConfig(port=0, batch_end_sends=enabled)

    async def answer(writer: ResponseWriter) -> None:
        await writer.respond(Response(200, [(b"content-type", b"application/json")], b"{}"))

    async def handler(request: Request) -> DeferredResponse:
        return DeferredResponse(answer)

    server: HTTPServer = await nursery.start(serve, handler, config)
    assert isinstance(server._batch, BatchEndSender) is enabled
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream("127.0.0.1", server.ports[0])
        await stream.send_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        data = b""
        while not data.endswith(b"{}"):
            data += await stream.receive_some(65536)
        await stream.aclose()
    assert data.startswith(b"HTTP/1.1 200 ")
    server.shutdown()
    with trio.fail_after(10):
        while server.statistics().connections_open or server._batch is not None:
            await trio.sleep(0.01)


def test_the_mcp_configs_default_holds_answers() -> None:
    assert MCPConfig().http.batch_end_sends is True
