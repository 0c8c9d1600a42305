"""Hops between the processes of one group on one host (``_http/_relay.py``
has the bytes): a process listens on its unix socket for the requests the
others pass to it (`bind_peer_listener`, `serve_hop`), and passes a request
to another and relays the answer (`relay`).

The socket lives in a directory only its user can enter (0700, checked at
start-up), so only the group reaches it, and the owner believes a hop's
preamble about the client: its address counts in the per-address quotas and
the access log, its scheme and host in the Origin and Host checks, as if the
client had come straight here. A hop connection is an ordinary connection
after its preamble: the server's caps, time limits and client watch apply.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from .._config import ServerConfig
from .._errors import RemoteProtocolError, StartupError
from .._http._connection import Response
from .._http._relay import MAX_PREAMBLE_BYTES, HopReader, parse_preamble
from ._quotas import ConnectionQuota, refuse
from ._socketio import SocketIO, close_listener
from ._writer import ConnectionWriter

#: Errors of a connect that mean nobody listens there: the owner is gone.
_GONE_ERRNOS: Final = frozenset({errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK})
_BUSY: Final = Response(
    503,
    [(b"content-type", b"text/plain; charset=utf-8"), (b"retry-after", b"1")],
    b"503 Service Unavailable: the session's owner is busy\n",
)


def bind_peer_listener(path: str, backlog: int | None) -> socket.socket:
    """A listening unix socket at `path`, in a directory only this user can
    enter. It replaces what is there in one step: a socket left by a process
    that is gone, or the one of a process this one takes over from (a rolling
    restart: that one finishes what it has, new hops come here). The file
    stays when the listener closes: a hop to it is refused, which says "gone"
    as well as no file does, and the next process of the name replaces it."""
    directory = os.path.dirname(path) or "."
    try:
        info = os.stat(directory)
    except OSError as exc:
        raise StartupError(f"peer_sockets_dir {directory}: {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(info.st_mode) or info.st_mode & 0o077 or info.st_uid != os.getuid():
        raise StartupError(
            f"peer_sockets_dir {directory} must be a directory of this user that nobody "
            "else can enter (mode 0700): whoever reaches its sockets is believed about clients"
        )
    fresh = f"{path}.{os.getpid()}.new"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(fresh)
        sock.bind(fresh)
        os.chmod(fresh, 0o600)
        sock.listen(backlog or 0xFFFF)
        sock.setblocking(False)
        os.replace(fresh, path)
    except OSError as exc:
        sock.close()
        with contextlib.suppress(OSError):
            os.unlink(fresh)
        raise StartupError(f"cannot listen on {path}: {exc.strerror or exc}") from exc
    return sock


def with_peer_listener(
    listeners: list[socket.socket], path: str | None, backlog: int | None
) -> list[socket.socket]:
    """`listeners` and the peer listener at `path` (if any); `listeners`
    closed when it cannot be made."""
    if path is None:
        return listeners
    try:
        return [*listeners, bind_peer_listener(path, backlog)]
    except StartupError:
        for listener in listeners:
            close_listener(listener)
        raise


async def _read_preamble(io: SocketIO) -> tuple[str, str, bytes] | None:
    """(client, scheme, the bytes after the preamble line), or None."""
    received = b""
    while b"\n" not in received:
        if len(received) > MAX_PREAMBLE_BYTES:
            return None
        data = await io.receive_some(MAX_PREAMBLE_BYTES + 2)
        if not data:
            return None
        received += data
    line, _, rest = received.partition(b"\n")
    found = parse_preamble(line.removesuffix(b"\r"))
    if found is None:
        return None
    return found[0], found[1], rest


async def serve_hop(
    serve: Callable[..., Awaitable[None]],
    quota: ConnectionQuota,
    config: ServerConfig,
    sock: socket.socket,
) -> None:
    """Serve one hop connection: its preamble read within the head time
    limit, its client admitted by the quotas as any client is, then its
    request served as any other (`serve`: the server's ``_serve``)."""
    try:
        io = SocketIO(sock, None, config.write_timeout_s)
    except OSError:
        sock.close()
        return
    found = None
    with trio.move_on_after(config.head_timeout_s):
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            found = await _read_preamble(io)
    if found is None:
        io.close()
        return
    client, scheme, rest = found
    group = quota.admit(client)
    if group is None:
        refuse(sock, quota.refusal(client, trio.current_time()))
        return
    try:
        await serve(io, client, None, group, None, (scheme, rest))
    finally:
        quota.leave(group)


class Hop:
    """A hop connection to an owner, kept by a client's connection between
    its passed-on requests (`Connection.hop`)."""

    __slots__ = ("path", "preamble", "io")

    def __init__(self, path: str, preamble: bytes, io: SocketIO) -> None:
        self.path = path
        self.preamble = preamble
        self.io = io

    def close(self) -> None:
        self.io.close()


def _connect(path: str, preamble: bytes) -> Hop:
    """A new hop to the owner at `path` (OSError when nobody listens there)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        # (a unix socket connects at once, or not at all: EAGAIN is a full queue)
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return Hop(path, preamble, SocketIO(sock))


async def _ask(hop: Hop, data: bytes, reader: HopReader) -> list[bytes] | None:
    """Send a request on `hop` and read its answer's head; the body's first
    pieces, or None when the hop ended before the head."""
    io = hop.io
    pieces: list[bytes] = []
    try:
        await io.send_all(data)
        while not reader.status:
            received = await io.receive_some(65536)
            if not received:
                return None
            pieces = reader.receive(received)
    except (trio.BrokenResourceError, trio.ClosedResourceError, RemoteProtocolError):
        return None
    return pieces


async def relay(
    preamble: bytes,
    request_bytes: bytes,
    head_request: bool,
    path: str,
    gone: Response,
    time_limit_s: float,
    via: bytes,
    writer: ConnectionWriter,
) -> None:
    """Pass a request (`request_bytes`, made by `hop_request`; `preamble` by
    `hop_preamble`) to the owner listening at `path`, and write its answer
    with `writer`: `gone` when nobody listens there or the owner ends the
    hop before its answer's head.

    The client's connection keeps the hop for its next passed-on request
    (to the same owner, for the same client); a kept hop the owner has
    closed meanwhile (its idle time limit) is replaced once, at once, since
    the owner read nothing from it. The hop closes when this ends any other
    way: when the client goes, the server cancels this with the client's
    connection, and the owner sees its hop's client go."""
    writer.time_limit_s = time_limit_s
    conn = writer.connection
    kept_hop, conn.hop = conn.hop, None
    hop = kept_hop if isinstance(kept_hop, Hop) else None
    if hop is not None and (hop.path != path or hop.preamble != preamble):
        hop.close()
        hop = None
    reader = HopReader(head_request)
    kept = False
    try:
        pieces: list[bytes] | None = None
        if hop is not None:
            pieces = await _ask(hop, request_bytes, reader)
            if pieces is None:
                hop.close()
                hop = None
                reader = HopReader(head_request)
        if hop is None:
            try:
                hop = _connect(path, preamble)
            except OSError as exc:
                await writer.respond(gone if exc.errno in _GONE_ERRNOS else _BUSY)
                return
            pieces = await _ask(hop, preamble + request_bytes, reader)
        if pieces is None:
            await writer.respond(gone)
            return
        reader.headers.append((b"via", via))
        kept = await _relay_answer(hop.io, reader, pieces, gone, writer) and not reader.closes
    finally:
        if hop is not None:
            if kept:
                conn.hop = hop
            else:
                hop.close()


async def _relay_answer(
    io: SocketIO, reader: HopReader, pieces: list[bytes], gone: Response, writer: ConnectionWriter
) -> bool:
    """Write the answer whose head `reader` has read, and the rest of its
    body from `io`; whether it arrived whole."""
    try:
        if not reader.streamed:
            while not reader.done:
                data = await io.receive_some(65536)
                if not data and not reader.hop_ended():
                    raise trio.BrokenResourceError("the hop ended inside an answer")
                pieces += reader.receive(data)
            await writer.respond(Response(reader.status, reader.headers, b"".join(pieces)))
            return True
        await writer.start(reader.status, reader.headers, b"".join(pieces))
        while not reader.done:
            data = await io.receive_some(65536)
            if not data:
                reader.hop_ended()
                break
            for piece in reader.receive(data):
                await writer.send(piece)
            if writer.broken:
                return False
        if reader.done:
            await writer.end()
            return True
    except (trio.BrokenResourceError, trio.ClosedResourceError, RemoteProtocolError):
        if not writer.started:
            await writer.respond(gone)  # (the owner died inside its answer)
            return False
    # The owner ended the hop inside a stream: the client's connection closes
    # without the stream's end, so the client sees it cut short.
    writer.cancel_scope.cancel()
    await trio.lowlevel.checkpoint()
    return False
