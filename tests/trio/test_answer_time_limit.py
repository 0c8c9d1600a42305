"""A deferred answer's `ResponseWriter.time_limit_s`: the server cancels a
handler that runs past it (from its first look, up to two ticks late) and
sets `overdue`, so the handler can still answer in a shielded scope; an
answer with no limit runs as long as it likes."""

from __future__ import annotations

import socket

import trio

from trio_mcp import DeferredResponse, HTTPServer, Request, Response, ResponseWriter, ServerConfig

REQUEST = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
#: Ticks of 0.1 s (an eighth of the shortest time limit).
CONFIG = ServerConfig(write_timeout_s=0.8)


async def exchange(nursery: trio.Nursery, answer, last: bytes) -> bytes:
    """Serve one connection of a socket pair with `answer`; what the client
    reads, up to the end of a body that ends with `last`."""

    async def handler(request: Request) -> DeferredResponse:
        return DeferredResponse(answer)

    server = HTTPServer(handler, CONFIG)
    ours, theirs = socket.socketpair()
    group = server.quota.admit("")  # (as the accept loop does)
    assert group is not None
    nursery.start_soon(server._serve_socket, ours, group, "")
    nursery.start_soon(server.enforce_timeouts)
    client = trio.socket.from_stdlib_socket(theirs)
    await client.send(REQUEST)
    received = b""
    with trio.fail_after(5), client:
        while not received.endswith(last):
            chunk = await client.recv(65536)
            assert chunk, received
            received += chunk
    return received


async def test_an_answer_past_its_limit_is_cancelled_and_may_say_so(nursery) -> None:
    seen: list[bool] = []

    async def answer(writer: ResponseWriter) -> None:
        writer.time_limit_s = 0.3
        assert not writer.overdue
        started = trio.current_time()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            seen.append(writer.overdue)
            assert 0.3 <= trio.current_time() - started <= 0.3 + 2 * 0.1 + 0.2
            with trio.CancelScope(shield=True):
                await writer.respond(Response(504, [], b"late"))
            raise

    received = await exchange(nursery, answer, b"late")
    assert seen == [True]
    assert received.startswith(b"HTTP/1.1 504 ") and received.endswith(b"late")


async def test_an_answer_without_a_limit_runs_on(nursery) -> None:
    async def answer(writer: ResponseWriter) -> None:
        await trio.sleep(0.8)  # eight ticks
        assert not writer.overdue
        await writer.respond(Response(200, [], b"done"))

    received = await exchange(nursery, answer, b"done")
    assert received.startswith(b"HTTP/1.1 200 ") and received.endswith(b"done")
