"""Newline-delimited messages on trio byte streams, and this process's own
standard streams as such a pair: the I/O of the stdio transport, which knows
no MCP.

`read_lines` hands each line of a stream to a callback, bounded in length;
`write_lines` writes each message of a channel as one line from one task, so
lines never interleave; `run_on_standard_streams` runs a server on copies of
stdin and stdout while descriptors 0 and 1 point elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import Final

import trio

logger = logging.getLogger("trio_mcp.stdio")

_READ_BYTES: Final = 64 * 1024


async def read_lines(
    stream: trio.abc.ReceiveStream,
    max_line_bytes: int,
    take: Callable[[bytes | None], Awaitable[None]],
) -> None:
    """Await ``take(line)`` for each line of `stream` (without its newline;
    blank ones left out) until it ends, a last line without a newline
    included. A line longer than `max_line_bytes` is ``take(None)`` once, and
    its bytes are skipped up to its newline. Each byte is looked at once."""
    line = bytearray()
    skipping = False  # inside a line that was too long, up to its newline
    while True:
        try:
            chunk = await stream.receive_some(_READ_BYTES)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            chunk = b""
        if not chunk:
            if line.strip() and not skipping:
                await take(bytes(line))
            return
        start = 0
        end = chunk.find(b"\n")
        while end >= 0:
            if skipping:
                skipping = False
            elif len(line) + end - start > max_line_bytes:
                line.clear()
                await take(None)
            else:
                line += chunk[start:end]
                if line.strip():
                    await take(bytes(line))
                line.clear()
            start = end + 1
            end = chunk.find(b"\n", start)
        if not skipping:
            line += chunk[start:]
            if len(line) > max_line_bytes:
                line.clear()
                skipping = True
                await take(None)


async def write_lines(
    messages: trio.MemoryReceiveChannel[bytes],
    stream: trio.abc.SendStream,
    write_timeout_s: float,
    on_gone: Callable[[], object],
) -> None:
    """Write each message of `messages` as one line until the channel is
    closed, then close `stream`. A broken stream (the reader is gone) or a
    write blocked past `write_timeout_s` (a reader that stopped reading)
    calls `on_gone` and ends the writing."""
    try:
        async with messages:
            async for data in messages:
                with trio.move_on_after(write_timeout_s) as timer:
                    await stream.send_all(data + b"\n")
                if timer.cancelled_caught:
                    logger.warning("the client read nothing for %s s: ending", write_timeout_s)
                    on_gone()
                    return
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        logger.info("the output is closed: the client is gone")
        on_gone()
    finally:
        await stream.aclose()


def run_on_standard_streams(
    serve: Callable[[trio.abc.ReceiveStream, trio.abc.SendStream], Awaitable[object]],
) -> None:
    """``trio.run(serve, stdin, stdout)`` on copies of this process's stdin
    and stdout (POSIX). Meanwhile descriptor 1 is stderr and 0 the null
    device, so a stray ``print`` goes to stderr and cannot corrupt what is
    written on the real stdout; both are restored after."""
    with _diverted() as (stdin_fd, stdout_fd):
        trio.run(_serve_on, serve, stdin_fd, stdout_fd)


async def _serve_on(
    serve: Callable[[trio.abc.ReceiveStream, trio.abc.SendStream], Awaitable[object]],
    stdin_fd: int,
    stdout_fd: int,
) -> None:
    # (an FdStream owns, and closes, a copy of its descriptor; it makes it
    # non-blocking while it runs, and blocking again after)
    stdin = trio.lowlevel.FdStream(os.dup(stdin_fd))
    stdout = trio.lowlevel.FdStream(os.dup(stdout_fd))
    async with stdin, stdout:
        await serve(stdin, stdout)


@contextlib.contextmanager
def _diverted() -> Iterator[tuple[int, int]]:
    """Copies of descriptors 0 and 1, with those pointed elsewhere (see
    `run_on_standard_streams`) until the block ends."""
    if not hasattr(trio.lowlevel, "FdStream"):
        raise RuntimeError("serving on stdin and stdout needs a POSIX system")
    stdin_fd, stdout_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        sys.stdout.flush()  # what Python holds of earlier prints goes to stderr too
        yield stdin_fd, stdout_fd
    finally:
        sys.stdout.flush()
        os.dup2(stdin_fd, 0)
        os.dup2(stdout_fd, 1)
        for fd in (null, stdin_fd, stdout_fd):
            os.close(fd)
