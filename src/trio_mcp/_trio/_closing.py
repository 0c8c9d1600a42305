"""How the HTTP server ends a connection without losing what it sent: a
lingering close after a last answer, and sends and closes that never raise
for a peer already gone (`close_connection`, at a connection's end)."""

from __future__ import annotations

from typing import Final

import trio

from .._http._connection import IDLE
from ._connection import ByteStream, Connection


async def send_quietly(stream: ByteStream, data: bytes) -> None:
    try:
        await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


LINGER_S: Final = 1.0
LINGER_BYTES: Final = 16 * 1024 * 1024


async def lingering_close(stream: ByteStream) -> None:
    """Close after our last response without destroying it.

    Closing a socket with unread input makes the kernel send a reset, which
    can throw away a response (a 413, say) before the client reads it. So:
    send FIN, read and drop what the client still sends, for a bounded time
    and size, then close.
    """
    try:
        with trio.move_on_after(LINGER_S):
            await stream.send_eof()
            drained = 0
            while drained < LINGER_BYTES:
                data = await stream.receive_some(65536)
                if not data:
                    break
                drained += len(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await close_quietly(stream)


async def close_quietly(stream: ByteStream) -> None:
    with trio.CancelScope() as scope:
        scope.cancel()  # close at once, like trio.aclose_forcefully
        try:
            await stream.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


async def close_connection(stream: ByteStream, conn: Connection, at_once: bool) -> None:
    """A connection's end: `at_once`, or after its last answer is read."""
    if conn.hop is not None:
        conn.hop.close()
        conn.hop = None
    interruptible = conn.interruptible
    if at_once and interruptible is not None:
        interruptible.close()  # (with no scope and no wait: nothing to wait for)
        return
    with trio.CancelScope(shield=True):
        if at_once or (conn.timer.cancelled_caught and conn.http.phase is IDLE):
            await close_quietly(stream)
        else:
            await lingering_close(stream)
