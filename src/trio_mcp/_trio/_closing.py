"""How the HTTP server ends a connection without losing what it sent: a
lingering close after a last answer, and sends and closes that never raise
for a peer already gone."""

from __future__ import annotations

from typing import Final

import trio

from ._connection import ByteStream


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
