"""The streams of the MCP endpoint: what carries a request's messages back.

`PostStream` is the SSE answer of one POST (opened on its first message, with
event ids and resumption for sessions), `LegacyStream` the one stream of a
2024-11-05 HTTP+SSE session, `Listener` one subscriptions/listen stream, and
`Waiter` a request we sent to a client, waiting for its answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import trio

from .._jsonrpc import Response as RPCResponse
from .._sessions import Session
from .._speedups import format_comment, format_event

if TYPE_CHECKING:
    from .._http11 import Headers
    from ._endpoint import MCPEndpoint

SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
MESSAGE: Final = b"message"
#: Frames waiting for a slow client before its stream is dropped (it must resume).
STREAM_QUEUE: Final = 256
KEEPALIVE: Final = format_comment(b"keepalive")


class Listener:
    """One open subscriptions/listen stream and what it honours."""

    __slots__ = ("id", "honored", "channel")

    def __init__(self, id: Any, honored: dict[str, Any]) -> None:
        self.id = id
        self.honored = honored
        self.channel: trio.MemorySendChannel[bytes] | None = None


class PostStream:
    """The SSE answer of one POST: opened on the first event, ids and buffering
    for resumption (sessions only), and live hand-over to a client that resumes
    it with GET after losing the connection."""

    __slots__ = (
        "_endpoint",
        "_writer",
        "_session",
        "_version",
        "_cors",
        "number",
        "_subscriber",
        "on_broken",
    )

    def __init__(
        self,
        endpoint: MCPEndpoint,
        writer: Any,
        session: Session | None,
        version: str,
        cors: Headers,
    ) -> None:
        self._endpoint = endpoint
        self._writer = writer
        self._session = session
        self._version = version
        self._cors = cors
        self.number = 0
        self._subscriber: trio.MemorySendChannel[bytes] | None = None
        #: Called when the client is found gone (2026-07-28: that cancels the request).
        self.on_broken: Callable[[], None] | None = None

    def attach(self, subscriber: trio.MemorySendChannel[bytes]) -> None:
        """A resumed GET takes over the live events of this stream."""
        if self._subscriber is not None:
            self._subscriber.close()
        self._subscriber = subscriber

    async def emit(self, data: bytes) -> None:
        endpoint = self._endpoint
        if endpoint.config.json_response_only:
            return
        writer = self._writer
        session = self._session
        if not writer.started:
            await self._open()
        if session is None:
            await writer.send(format_event(data, event=MESSAGE))
            if writer.broken and self.on_broken is not None:
                self.on_broken()
            return
        frame = await endpoint.publish(session, self.number, data)
        if not writer.broken:
            await writer.send(frame)
        elif self._subscriber is not None:
            try:
                self._subscriber.send_nowait(frame)
            except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscriber.close()
                self._subscriber = None

    async def _open(self) -> None:
        session = self._session
        await self._writer.start(200, SSE_HEADERS + self._cors)
        if session is not None:
            session.next_stream += 1
            self.number = session.next_stream
            session.live_streams[self.number] = self
            if self._version >= "2025-11-25":
                await self._prime()

    async def _prime(self) -> None:
        # SEP-1699: an id (and the retry hint) before anything else, so a
        # client can resume even if the connection drops before the first event.
        assert self._session is not None
        endpoint = self._endpoint
        event_id = await endpoint.events.append(
            self._session.id, self.number, b"", trio.current_time()
        )
        frame = format_event(b"", event_id=event_id.encode(), retry_ms=endpoint.config.sse_retry_ms)
        await self._writer.send(frame)

    @property
    def cancel_scope(self) -> trio.CancelScope:
        """What cancels this request: the scope of the connection it arrived on.

        A request answered on its own connection needs no scope of its own
        (entering one per request was a sixth of a tools/call's CPU time):
        cancelling it abandons the answer and closes the connection, which is
        also how a 2026-07-28 client cancels.
        """
        scope: trio.CancelScope = self._writer.cancel_scope
        return scope

    async def close_connection(self) -> None:
        """End this POST's HTTP response now; later events wait for a resuming GET."""
        writer = self._writer
        if self._session is None or writer.broken or self._endpoint.config.json_response_only:
            return
        if not writer.started:
            await self._open()
        await self._prime()
        await writer.end_and_close()

    def finish(self) -> None:
        if self._session is not None and self.number:
            self._session.live_streams.pop(self.number, None)
        if self._subscriber is not None:
            self._subscriber.close()


class LegacyStream:
    """Where a legacy HTTP+SSE request's messages go: its session's one stream."""

    __slots__ = ("_session",)

    def __init__(self, session: Session) -> None:
        self._session = session

    async def emit(self, data: bytes) -> None:
        channel = self._session.get_stream
        if channel is not None:
            try:
                await channel.send(format_event(data, event=MESSAGE))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the stream is gone, and the session with it

    async def close_connection(self) -> None:
        """Nothing to do: on HTTP+SSE every answer shares the session's stream."""


class Waiter:
    """A request we sent to the client, waiting for the response to arrive in a POST."""

    __slots__ = ("done", "response")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.response: RPCResponse | None = None

    def resolve(self, response: RPCResponse) -> None:
        if self.response is None:
            self.response = response
            self.done.set()
