"""The writer of a `DeferredResponse`'s answer, on the connection's own task.

`ConnectionWriter` is the trio shell's `ResponseWriter`: one complete
response, or a stream, written through the connection's sans-IO HTTP state;
each write runs under the write time limit, and a JSON answer on a socket is
handed to `SocketIO.hold` without a coroutine (it goes now, or with the rest
of the scheduler batch's answers).

While an answer takes long (the server's sweeper sees it running twice),
`watch_peer` watches its client: when the client closes its end or resets,
the answer's handler is cancelled with the connection, or, for an answer that
`outlives_peer` (its events are kept for resumption), goes on while the
socket is closed at once, so a vanished client holds no file descriptor.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from math import inf
from typing import Final

import trio
from trio.lowlevel import wait_readable

from .._errors import LocalProtocolError
from .._http._connection import Headers, Response
from .._http._handler import Cancellable, SlowAnswer
from ._connection import ByteStream, Connection, DateCache
from ._socketio import SocketIO


class _WriterState(enum.Enum):
    NEW = "new"
    STREAMING = "streaming"
    DONE = "done"


# As module globals: read per request, and Enum members read through their
# class are slow on CPython 3.11 (see _http._connection.IDLE).
NEW: Final = _WriterState.NEW
STREAMING: Final = _WriterState.STREAMING
DONE: Final = _WriterState.DONE


class ConnectionWriter:
    """Writes the answer of a `DeferredResponse`: one full response, or a stream.

    Either `respond` once (or `respond_nowait`, then `send_rest` with what it
    returned), or `start` then any number of `send` then `end`.
    Writes to a peer that has gone away are dropped (`broken` tells); the
    connection closes after the answer.
    """

    __slots__ = (
        "_stream",
        "_conn",
        "_dates",
        "_write_timeout",
        "_frame",
        "state",
        "broken",
        "outlives_peer",
        "seen",
        "time_limit_s",
        "overdue",
        "watched",
        "_watch",
        "slow",
    )

    def __init__(
        self,
        stream: ByteStream,
        conn: Connection,
        dates: DateCache,
        write_timeout: float,
    ) -> None:
        self._stream = stream
        self._conn = conn
        self._dates = dates
        self._write_timeout = write_timeout
        #: How each piece of a streamed answer is framed; set by `start`.
        self._frame: Callable[[bytes], bytes] = _not_started
        self.state = NEW
        #: True once a write failed: the peer is gone.
        self.broken = False
        #: When the client goes, the answer goes on and only the connection
        #: closes (else the answer is cancelled with it): the DeferredResponse's
        #: choice, which the handler may still change.
        self.outlives_peer = False
        #: When the server's sweeper first saw this answer running (None: not yet).
        self.seen: float | None = None
        self.time_limit_s = inf
        self.overdue = False
        #: Someone watches the client (the server, or the handler through
        #: `peer_watch`): nobody else may wait for the socket to be readable.
        self.watched = False
        self._watch: trio.CancelScope | None = None
        #: What the sweeper starts once the answer has run long (`SlowAnswer`).
        self.slow: SlowAnswer | None = None
        # (through the typed attribute: a C store in the compiled build)
        self._conn.answering = self

    @property
    def cancel_scope(self) -> Cancellable:
        """The connection's own cancel scope: cancelling it abandons the request
        being answered and closes the connection (nothing more is written)."""
        return self._conn.timer

    @property
    def connection(self) -> Connection:
        """The connection this answer goes out on."""
        return self._conn

    @property
    def started(self) -> bool:
        """True once the status line is out (nothing can change it any more)."""
        return self.state is not NEW

    @property
    def streaming(self) -> bool:
        """True between `start` and `end`."""
        return self.state is STREAMING

    async def _write(self, data: bytes) -> None:
        if self.broken or not data:
            return
        conn = self._conn
        conn.limit_phase(self._write_timeout)
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.broken = True
        finally:
            conn.limit = inf

    async def respond(self, response: Response) -> None:
        """Send one complete response."""
        rest = self.respond_nowait(response)
        if rest:
            await self._write(rest)

    def respond_nowait(self, response: Response) -> bytes:
        """`respond` without a coroutine: hand one complete response to the
        socket, which sends it now or at the scheduler batch's end
        (`SocketIO.hold`), and return the rest (b"" when the socket took it
        all, or the peer is gone; all of it on a stream that is not a
        socket). A non-empty rest must go to `send_rest` before anything else
        is written; on a socket a JSON answer almost always goes whole."""
        if self.state is not NEW:
            raise LocalProtocolError("this request was already answered")
        self.state = DONE
        if self.broken:
            return b""
        return self._respond_now(response)

    async def send_rest(self, rest: bytes) -> None:
        """Send the rest that `respond_nowait` returned, waiting for the socket."""
        await self._write(rest)

    def _respond_now(self, response: Response) -> bytes:
        """The synchronous part of `respond`: what the socket did not take of
        the response (b"" when it all went, or the peer is gone)."""
        conn = self._conn
        data = conn.http.full_response(response, self._dates.get())
        stream = self._stream
        if type(stream) is not SocketIO:
            return data
        # This is every JSON answer: the socket holds it for the scheduler
        # batch's end (or takes it now), with no coroutine and no time limit
        # to set. The last answer of a connection goes now, so that its rest
        # is sent under the write limit, not the lingering close's. (`sio` is
        # typed SocketIO in the .pxd, so that hold is a C call.)
        sio = stream
        try:
            if conn.http.must_close:
                sent = sio.send_nowait(data)
                return data[sent:] if sent < len(data) else b""
            return sio.hold(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.broken = True
            return b""
        finally:
            conn.limit = inf

    async def start(self, status: int, headers: Headers, first: bytes = b"") -> None:
        """Send the head of a streamed answer, and `first` piece of the body with it
        (one write instead of two)."""
        if self.state is not NEW:
            raise LocalProtocolError("this request was already answered")
        self.state = STREAMING
        http = self._conn.http
        head = http.start_stream(status, headers, self._dates.get())
        self._frame = frame = http.stream_framer()
        await self._write(head + frame(first) if first else head)

    async def send(self, piece: bytes) -> None:
        """Send one piece of the streamed body."""
        if self.state is not STREAMING:
            raise LocalProtocolError("send() needs start() first, and no end()")
        await self._write(self._frame(piece))

    def send_nowait(self, piece: bytes) -> bytes | None:
        """Send one piece of the streamed body now if the socket takes it.

        Returns b"" when it all went, the framed rest (for `send_framed`) when
        the socket took only part of it or would block, and None when the
        client is gone. Only for a caller that knows no write is under way.
        """
        if self.broken:
            return None
        # (the framing start fixed: a broadcast to many streams touches no
        # connection or HTTP state per frame)
        data = self._frame(piece)
        stream = self._stream
        if type(stream) is not SocketIO or not data:
            return data  # a trio stream: the stream's task writes it
        sio = stream  # (typed SocketIO in the .pxd)
        try:
            sent = sio.send_nowait(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.broken = True
            return None
        return data[sent:] if sent < len(data) else b""

    def peer_watch(self) -> Callable[[], Awaitable[bool]] | None:
        """For an idle stream: an awaitable that returns when the client sends
        more bytes (False) or closes its end (True); None for a transport
        that cannot watch, or when the server watches this client already
        (it then ends the answer itself when the client goes)."""
        if self.watched:
            return None
        self.watched = True
        stream = self._stream
        return stream.wait_peer if type(stream) is SocketIO else None

    def peer_gone_already(self) -> bool:
        """Whether the client has gone (closed its end or reset) by now, seen
        without waiting. The sweeper asks this before it starts a watch: a
        client that sent its call and left at once needs no watching task,
        and the sweeper ends its answer (`peer_left`) a few per batch."""
        stream = self._stream
        return type(stream) is SocketIO and bool(stream.peer_gone())

    async def watch_peer(self) -> None:
        """Run by the server while this answer is produced: when the client
        closes its end or resets, end the answer (`outlives_peer`). Bytes the
        client sends meanwhile (a pipelined request) end the watch and stay
        unread, for the connection to serve; `finished` ends it too."""
        stream = self._stream
        if type(stream) is not SocketIO:
            return
        sock = stream.sock
        gone: bool | None = False
        with trio.CancelScope() as scope:
            self._watch = scope
            while True:
                try:
                    await wait_readable(sock)
                except trio.ClosedResourceError:  # (closed under us: the answer is over)
                    return
                # Woken, the answer may have finished before this task ran:
                # the connection's task may wait on the socket itself by now.
                if scope.cancel_called:
                    return
                gone = stream.peer_gone()
                if gone is not None:
                    break
        if gone:
            self.peer_left()

    def peer_left(self) -> None:
        """The client has gone: free its socket now if the answer outlives it
        (a 2025 session's), else cancel the answer with its connection."""
        if self.broken:
            return
        self.broken = True
        stream = self._stream
        if self.outlives_peer and type(stream) is SocketIO:
            stream.close()  # (the fd is free now; the answer's writes are dropped)
        else:
            self._conn.timer.cancel()

    def finished(self) -> None:
        """The answer's handler has returned: the sweeper no longer sees it
        running, and a watch of its client stops, before the connection's
        task waits on the socket again; its `slow` is let go of (it
        refers back to this writer)."""
        self._conn.answering = None
        self.slow = None
        if self.watched:
            watch = self._watch
            if watch is not None:
                watch.cancel()

    async def send_framed(self, data: bytes) -> None:
        """Send the rest that `send_nowait` returned."""
        await self._write(data)

    async def end_and_close(self) -> None:
        """Finish the streamed body and close the connection at once.

        Whatever the handler writes afterwards is dropped (`broken` is set);
        the connection is closed when the handler returns.
        """
        await self.end()
        if not self.broken:
            try:
                await self._stream.send_eof()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
        self.broken = True

    async def end(self, last: bytes = b"") -> None:
        """Finish the streamed body, sending `last` piece with the end (one write)."""
        if self.state is not STREAMING:
            raise LocalProtocolError("end() needs start() first")
        self.state = DONE
        end = self._conn.http.end_stream()
        await self._write(self._frame(last) + end if last else end)


def _not_started(piece: bytes) -> bytes:
    raise LocalProtocolError("a piece of a streamed answer before start()")
