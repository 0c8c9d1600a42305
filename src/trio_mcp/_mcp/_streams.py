"""The streams of the MCP endpoint: what carries a request's messages back.

`PostStream` is the SSE answer of one POST (opened on its first message, with
event ids and resumption for sessions), `Outbox` the live end of a long-lived
stream (a session's GET stream, a subscriptions/listen stream, a 2024-11-05
HTTP+SSE stream), `Keepalives` the one task that writes the keepalives of
every idle GET and listen stream, `SSEStream` what the messages of one 2024-11-05 HTTP+SSE
request go through, `Listener` one subscriptions/listen stream, and `Waiter` a
request we sent to a client, waiting for its answer. `RequestStream` is what
the request runner needs of the first and the third.

This module is the bottom of the endpoint's folder: it imports nothing of it,
and what it needs from the endpoint comes in through `EventPublisher`.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable
from typing import Any, Final, Protocol

import trio
from trio.lowlevel import ParkingLot

from .._config import MCPConfig
from .._http._connection import Headers, Response
from .._http._handler import Cancellable, ResponseWriter
from .._protocol._answers import JSON_HEADERS
from .._protocol._events import MESSAGE_EVENT
from .._protocol._jsonrpc import Invalid, Message, RPCRequest, RPCResponse
from .._protocol._sessions import Session
from .._speedups import format_comment, format_event
from .._stores._bus import Frame, Subscriber, frame_bytes, frame_size
from .._trio._tasks import guarded

SSE_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
MESSAGE: Final = MESSAGE_EVENT
#: Frames waiting for a slow client before its stream is dropped (it must resume).
STREAM_QUEUE_BYTES: Final = 1024 * 1024
KEEPALIVE: Final = format_comment(b"keepalive")
#: Keepalives `Keepalives` writes in one scheduler batch: with 10,000 streams
#: opened together, their keepalives fall due together too.
KEEPALIVES_PER_BATCH: Final = 64


class Outbox:
    """The live end of one long-lived SSE response, fed by any task.

    `offer` never waits: when nothing is queued and the stream's task is not
    writing, the frame goes straight to the socket from the caller's task, so
    one notification fanned out to 10,000 streams costs 10,000 ``send`` calls
    and no task switches. What the socket does not take, and whatever arrives
    while the stream's task is writing, is queued (at most `limit_bytes` of
    frames; one frame passes whatever its size) and written by `pump`, which
    the stream's own task runs; it also writes keepalives when the stream is
    idle. A frame in pieces (a broadcast's, `Frame`) is queued as it is, so
    the streams that queue one broadcast share its bytes. A stream whose
    client falls further behind is closed: it must resume (or listen) again.

    While idle, `pump` watches the socket, so a client that closes its end is
    let go of at once rather than at the next keepalive. Given a running
    `Keepalives`, the pump leaves the keepalives to it and its idle wait
    lasts until the stream has something to write or the client goes.

    `close` ends the stream after what is queued; `pump` then returns.
    """

    __slots__ = (
        "_writer",
        "_queue",
        "_rest",
        "_idle",
        "_space",
        "_busy",
        "_last_direct",
        "closed",
        "limit_bytes",
        "_queued",
        "_kept",
    )

    def __init__(self, limit_bytes: int = STREAM_QUEUE_BYTES) -> None:
        self._writer: ResponseWriter | None = None
        self._queue: deque[Frame] = deque()
        self._rest = b""  # the framed tail of a frame the socket took only part of
        self._idle: trio.CancelScope | None = None  # the pump's wait, while idle
        self._space = ParkingLot()  # senders waiting for room in the queue
        self._busy = True  # until pump runs, everything queues
        # when offer last wrote (the pump did not see it), or, under
        # `Keepalives`, when the stream last wrote anything
        self._last_direct = -math.inf
        self.closed = False
        self.limit_bytes = limit_bytes
        self._queued = 0  # bytes of the frames in _queue
        self._kept = False  # whether a `Keepalives` writes its keepalives

    def _wake(self) -> None:
        if self._idle is not None:
            self._idle.cancel()

    def offer(self, frame: Frame, now: float | None = None) -> bool:
        """Send or queue `frame` without waiting; False when the stream is closed
        (now, or earlier) and the frame will not be delivered. `now`, when the
        caller knows it, saves reading the clock."""
        if self.closed:
            return False
        # (not busy means nothing is queued: frames queue only while busy, and
        # the pump stops being busy only with the queue empty)
        if not self._busy:
            writer = self._writer
            assert writer is not None  # (pump sets it before it stops being busy)
            rest = writer.send_nowait(frame_bytes(frame))
            if rest is None:  # the client is gone
                self.close()
                return False
            if not rest:
                self._last_direct = trio.current_time() if now is None else now
                return True
            self._rest = rest
            self._busy = True
            self._wake()
            return True
        queued = self._queued + frame_size(frame)
        if queued > self.limit_bytes and self._queue:
            self.close()  # too slow
            return False
        self._queue.append(frame)
        self._queued = queued
        self._wake()
        return True

    async def send(self, frame: Frame) -> bool:
        """`offer`, but wait while the queue is full instead of closing."""
        size = frame_size(frame)
        while self._queue and self._queued + size > self.limit_bytes and not self.closed:
            await self._space.park()
        return self.offer(frame)

    def close(self) -> None:
        self.closed = True
        # (offer writes no more, and the pump has its own reference: a
        # `Keepalives` that holds the outbox until its due time holds no
        # connection with it)
        self._writer = None
        self._wake()
        self._space.unpark_all()

    def keepalive_due(self, keepalive_s: float) -> float | None:
        """When `Keepalives` should write this stream's next keepalive: None
        once it is closed, and while it is writing, a keepalive from now (it
        cannot fall due sooner: it becomes idle later)."""
        if self.closed:
            return None
        if self._busy:
            return trio.current_time() + keepalive_s
        return self._last_direct + keepalive_s

    async def pump(
        self, writer: ResponseWriter, keepalive_s: float, keepalives: Keepalives | None = None
    ) -> None:
        """Write this stream's frames on `writer` (already started) until it is
        closed and flushed, or the client is gone. Run by the stream's task.
        The keepalives are `keepalives`'s to write while it runs."""
        self._writer = writer
        queue = self._queue
        # the socket's "readable": the client closed (or, rarely, sent more)
        watch = writer.peer_watch()
        while not writer.broken:
            if self._rest:
                rest, self._rest = self._rest, b""
                await writer.send_framed(rest)
            elif queue:
                self._busy = True
                frame = queue.popleft()
                self._queued -= frame_size(frame)
                await writer.send(frame_bytes(frame))
                if self._space:
                    self._space.unpark()
            elif self.closed:
                return
            elif keepalives is not None and keepalives.running:
                # Idle until there is something to write or the client goes:
                # one wait, not one per keepalive, so the objects it is made
                # of live as long as the stream (and stay frozen with it,
                # ``ServerConfig.gc_freeze``)
                self._busy = False
                self._last_direct = trio.current_time()
                if not self._kept:
                    self._kept = True
                    keepalives.add(self)
                with trio.CancelScope() as self._idle:
                    if watch is None:
                        await trio.sleep_forever()
                    elif await watch():
                        writer.broken = True  # the client closed its end
                    else:
                        watch = None  # it sent bytes: leave them for later
                self._idle = None
            else:
                self._busy = False
                idle_since = trio.current_time()
                while not (self._busy or queue or self.closed):
                    # idle means: neither we nor a direct offer wrote for keepalive_s
                    due = max(idle_since, self._last_direct) + keepalive_s
                    with trio.CancelScope(deadline=due) as self._idle:
                        if watch is None:
                            await trio.sleep_forever()
                        elif await watch():
                            writer.broken = True  # the client closed its end
                            break
                        else:
                            watch = None  # it sent bytes: leave them for later
                    self._idle = None
                    if self._busy or queue or self.closed:
                        break
                    if trio.current_time() >= max(idle_since, self._last_direct) + keepalive_s:
                        self._busy = True
                        await writer.send(KEEPALIVE)  # a dead socket shows up here
                        break
                self._idle = None
        self.close()


class Keepalives:
    """The keepalive comments of idle long-lived streams, written by one task.

    A stream's task that woke every ``keepalive_s`` to write its keepalive
    rebuilt its wait each time (a cancel scope and trio's wait for the
    socket: about 23 objects the garbage collector tracks), so every full
    collection found 10,000 idle streams' worth of young objects to walk.
    Here an idle `Outbox` joins once (`add`) and `run` writes its keepalive
    when due, with `Outbox.offer` (straight to the socket; a partial write
    wakes the stream's pump, and a client found gone closes the stream),
    `KEEPALIVES_PER_BATCH` per scheduler batch. A stream that wrote since
    is looked at again when its keepalive is due; a closed one is dropped.
    """

    __slots__ = ("keepalive_s", "running", "_due", "_order", "_added")

    def __init__(self, keepalive_s: float) -> None:
        self.keepalive_s = keepalive_s
        self.running = False
        #: (due, order, outbox), one per stream that joined: a heap
        self._due: list[tuple[float, int, Outbox]] = []
        self._order = itertools.count()  # (ties never compare outboxes)
        self._added = ParkingLot()  # `run`, while it has nothing to wait for

    def add(self, outbox: Outbox) -> None:
        """Write `outbox`'s keepalives from now on, until it is closed."""
        due = outbox.keepalive_due(self.keepalive_s)
        if due is not None:
            heapq.heappush(self._due, (due, next(self._order), outbox))
            self._added.unpark_all()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Write the keepalives as they fall due, until cancelled."""
        due = self._due
        self.running = True
        try:
            task_status.started()
            while True:
                if not due:
                    await self._added.park()
                    continue
                await trio.sleep_until(due[0][0])
                await self._write_due()
        finally:
            self.running = False

    async def _write_due(self) -> None:
        due, keepalive_s = self._due, self.keepalive_s
        written = 0
        now = trio.current_time()
        while due and due[0][0] <= now:
            outbox = heapq.heappop(due)[2]
            at = outbox.keepalive_due(keepalive_s)
            if at is None:
                continue  # closed
            if at <= now:
                sent = False
                with guarded("a stream's keepalive"):
                    sent = outbox.offer(KEEPALIVE, now)
                if not sent:
                    outbox.close()  # (closed already, unless the write failed)
                    continue
                at = now + keepalive_s
                written += 1
            heapq.heappush(due, (at, next(self._order), outbox))
            if written == KEEPALIVES_PER_BATCH:
                written = 0
                await trio.lowlevel.checkpoint()
                now = trio.current_time()


class Listener:
    """One open subscriptions/listen stream and what it honours."""

    __slots__ = ("id", "honored", "outbox", "meta", "uris")

    def __init__(
        self,
        id: str | int,
        honored: dict[str, Any],
        meta: bytes,
        limit_bytes: int = STREAM_QUEUE_BYTES,
    ) -> None:
        self.id = id
        self.honored = honored
        #: The resources it subscribed to, for a lookup per update.
        self.uris = frozenset(honored.get("resourceSubscriptions", ()))
        self.outbox = Outbox(limit_bytes)
        #: ``"_meta":{...subscriptionId...}`` encoded once, spliced into each notification.
        self.meta = meta


class EventPublisher(Protocol):
    """What the stream of a session's POST needs from its endpoint: the
    endpoint's settings, and its events numbered and kept for resumption."""

    config: MCPConfig

    async def publish(
        self, session: Session, number: int, data: bytes, now: float | None = None
    ) -> bytes:
        """Keep `data` as the next event of stream `number`; its SSE frame."""
        ...

    def publish_nowait(self, session: Session, number: int, data: bytes) -> bytes:
        """`publish`, done at once, or ``trio.WouldBlock``."""
        ...

    async def priming_event(self, session: Session, number: int) -> bytes:
        """An event with an id and no data, so the client can resume stream `number`."""
        ...

    async def open_stream(self, session: Session, stream: PostStream) -> int:
        """Number the session's next POST stream, producing here; its number."""
        ...

    def priming_event_nowait(self, session: Session, number: int) -> bytes:
        """`priming_event`, done at once, or ``trio.WouldBlock``."""
        ...

    def open_stream_nowait(self, session: Session, stream: PostStream) -> int:
        """`open_stream`, done at once, or ``trio.WouldBlock``."""
        ...

    def close_stream(self, session: Session, number: int) -> None:
        """POST stream `number` of the session has ended."""
        ...


class RequestStream(Protocol):
    """Where the messages of one running request go, as the runner sees it."""

    #: The request's session (None for a request without one) and revision.
    session: Session | None
    version: str

    @property
    def cancel_scope(self) -> Cancellable:
        """What cancels the request."""
        ...

    async def emit(self, data: bytes) -> None:
        """Send one message (a notification, a request to the client) of the request."""
        ...

    async def close_connection(self) -> None:
        """End the request's HTTP response now, while the request goes on (SEP-1699)."""
        ...


#: What a POST stream's handler side is doing (`PostStream._state`).
_IDLE: Final = 0
_WRITING: Final = 1  # inside a write of its own: a relay takes over after it
_FINISHED: Final = 2  # the request is over


class Relay:
    """A POST stream's writes once its keepalive task writes them (`PostStream.keep_alive`).

    The task owns the socket from then on: the handler's messages go through
    `outbox`, whose pump also writes the keepalives. `handed`: the write the
    handler was doing when the task came is over; `ready`: the stream is open
    (numbered, primed), so messages may follow; `done`: the pump has returned,
    so the response may end.
    """

    __slots__ = ("outbox", "handed", "ready", "done")

    def __init__(self, limit_bytes: int) -> None:
        self.outbox = Outbox(limit_bytes)
        self.handed = trio.Event()
        self.ready = trio.Event()
        self.done = trio.Event()


class PostStream:
    """The SSE answer of one POST: opened on the first event, ids and buffering
    for resumption (sessions only), and live hand-over to a client that resumes
    it with GET after losing the connection.

    It is also the answer's `SlowAnswer`: once the request has run for
    ``stream_slow_answers_after_s``, the server starts `keep_alive`, which opens
    the stream if the handler has not (with a comment for first bytes) and
    relays what follows with keepalives, so a proxy that cuts silent
    responses does not cut a long call. A quick answer never gets there.
    """

    __slots__ = (
        "_publisher",
        "_writer",
        "session",
        "version",
        "_cors",
        "number",
        "_subscriber",
        "on_broken",
        "cancel_scope",
        "_state",
        "_relay",
        "_messages",
        "_batch",
    )

    def __init__(
        self,
        publisher: EventPublisher,
        writer: ResponseWriter,
        session: Session | None,
        version: str,
        cors: Headers,
        messages: list[Message | Invalid] | None = None,
        batch: bool = False,
    ) -> None:
        self._publisher = publisher
        self._writer = writer
        self.session = session
        self.version = version
        self._cors = cors
        self.number = 0
        self._subscriber: Subscriber | None = None
        #: Called when the client is found gone (2026-07-28: that cancels the request).
        self.on_broken: Callable[[], None] | None = None
        #: What cancels this request: the scope of the connection it arrived on.
        #: A request answered on its own connection needs no scope of its own:
        #: cancelling it abandons the answer and closes the connection, which
        #: is also how a 2026-07-28 client cancels.
        self.cancel_scope = writer.cancel_scope
        self._state = _IDLE
        self._relay: Relay | None = None
        #: what the POST carried (for `request_ids`)
        self._messages = messages
        self._batch = batch
        writer.slow = self  # (the server lets go of it when the answer ends)

    def request_ids(self) -> tuple[list[Any], bool]:
        """The ids this stream's answer will carry, and whether as a batch
        (`RequestIds`, for a shared event store)."""
        ids = [
            m.id
            for m in self._messages or ()
            if type(m) is RPCRequest or (type(m) is Invalid and m.id is not None)
        ]
        return ids, self._batch

    def attach(self, subscriber: Subscriber) -> None:
        """A resumed GET takes over the live events of this stream."""
        if self._subscriber is not None:
            self._subscriber.close()
        self._subscriber = subscriber

    async def emit(self, data: bytes, *, last: bool = False) -> None:
        """Send one message, opening the stream first if needed; `last` marks the
        response, which ends the stream. The head goes out with the priming event
        and the first message, and the response with the end: one write each."""
        publisher = self._publisher
        if publisher.config.json_response_only:
            return
        if self._relay is not None and await self._relayed():
            await self._emit_relayed(data, last)
            return
        writer = self._writer
        session = self.session
        self._state = _WRITING
        try:
            opening = not writer.started
            prologue = await self._begin() if opening else b""
            if session is None:
                frame = format_event(data, event=MESSAGE)
            else:
                try:
                    frame = publisher.publish_nowait(session, self.number, data)
                except trio.WouldBlock:
                    frame = await publisher.publish(session, self.number, data)
                if writer.broken:
                    self._offer_resumed(frame)
                    return
            if opening:
                await writer.start(200, SSE_HEADERS + self._cors, prologue + frame)
                if last:
                    await writer.end()
            elif last:
                await writer.end(frame)
            else:
                await writer.send(frame)
            if writer.broken and session is None and self.on_broken is not None:
                self.on_broken()
        finally:
            self._written()

    def _offer_resumed(self, frame: bytes) -> None:
        """Hand `frame` to the GET that resumed this stream, if one has."""
        if self._subscriber is not None and not self._subscriber.offer(frame):
            self._subscriber = None

    def _written(self) -> None:
        """A write of the handler's is over: a keepalive task waiting for it takes over."""
        self._state = _IDLE
        relay = self._relay
        if relay is not None:
            relay.handed.set()

    async def _relayed(self) -> bool:
        """Whether this stream's writes go through its keepalive task now
        (waiting until that task has the stream open)."""
        relay = self._relay
        assert relay is not None
        await relay.ready.wait()
        return self._relay is relay  # (else the task found nothing to keep alive)

    async def _emit_relayed(self, data: bytes, last: bool) -> None:
        """`emit` through the keepalive task's outbox."""
        relay = self._relay
        assert relay is not None
        writer = self._writer
        session = self.session
        if session is None:
            frame = format_event(data, event=MESSAGE)
        else:
            frame = await self._publisher.publish(session, self.number, data)
        if writer.broken or not await relay.outbox.send(frame):
            if session is not None:
                self._offer_resumed(frame)
            elif self.on_broken is not None:
                self.on_broken()
            return  # (the server ends a stream whose client is gone)
        if last:
            await self._end_relayed(relay)
            await writer.end()

    async def _end_relayed(self, relay: Relay) -> None:
        """Let the keepalive task write what is queued, and wait until it has."""
        relay.outbox.close()
        await relay.done.wait()

    @property
    def slow_after_s(self) -> float:
        """`SlowAnswer`: when `keep_alive` starts (inf: never)."""
        config = self._publisher.config
        after = config.stream_slow_answers_after_s
        return math.inf if after is None or config.json_response_only else after

    async def keep_alive(self) -> None:
        """`SlowAnswer`: run by the server once the request has run long: take
        the stream over (opening it with a keepalive comment if the handler
        has sent nothing) and keep it alive until the answer has gone."""
        writer = self._writer
        if self._state == _FINISHED or writer.broken or (writer.started and not writer.streaming):
            return  # answered already, or no one to answer
        relay = self._relay = Relay(self._publisher.config.stream_queue_bytes)
        try:
            if self._state == _WRITING:
                await relay.handed.wait()
                if self._state == _FINISHED or writer.broken or not writer.streaming:
                    self._relay = None
                    return
            outbox = relay.outbox
            if not writer.started:
                # (start marks the answer begun at once: from here the handler
                # hands its answer to the stream, not to a JSON response)
                await writer.start(200, SSE_HEADERS + self._cors, KEEPALIVE)
                prologue = await self._begin()
                if prologue:
                    outbox.offer(prologue)  # (queued: the pump sends it first)
            relay.ready.set()
            await outbox.pump(writer, self._publisher.config.keepalive_s)
        finally:
            relay.ready.set()
            relay.done.set()

    @property
    def overdue(self) -> bool:
        """Whether the server ended this request for its time limit."""
        return self._writer.overdue

    async def answer_late(self, body: bytes, status: int) -> None:
        """Send `body`, the error answer of a request the server ended for its
        time limit (`ResponseWriter.overdue`), as the answer would have gone:
        from inside the connection's cancelled scope, so shielded, and for at
        most the write limit. The connection closes after it."""
        writer = self._writer
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + self._publisher.config.http.write_timeout_s
            if writer.started:
                await self.emit(body, last=True)
            else:
                await writer.respond(Response(status, JSON_HEADERS + self._cors, body))

    async def _begin(self) -> bytes:
        """Number a session's stream; returns its priming event (2025-11-25 on)."""
        session = self.session
        if session is None:
            return b""
        publisher = self._publisher
        try:
            self.number = publisher.open_stream_nowait(session, self)
        except trio.WouldBlock:
            self.number = await publisher.open_stream(session, self)
        if self.version < "2025-11-25":
            return b""
        try:
            return publisher.priming_event_nowait(session, self.number)
        except trio.WouldBlock:
            return await publisher.priming_event(session, self.number)

    async def close_connection(self) -> None:
        """End this POST's HTTP response now; later events wait for a resuming GET."""
        writer = self._writer
        session = self.session
        if session is None or writer.broken or self._publisher.config.json_response_only:
            return
        relay = self._relay
        if relay is not None and await self._relayed():
            await relay.outbox.send(await self._publisher.priming_event(session, self.number))
            await self._end_relayed(relay)
            await writer.end_and_close()
            return
        self._state = _WRITING
        try:
            if not writer.started:
                await writer.start(200, SSE_HEADERS + self._cors, await self._begin())
            await writer.send(await self._publisher.priming_event(session, self.number))
            await writer.end_and_close()
        finally:
            self._written()

    def finish(self) -> None:
        self._state = _FINISHED  # (the server lets go of `writer.slow`)
        if self.session is not None and self.number:
            self._publisher.close_stream(self.session, self.number)
        if self._subscriber is not None:
            self._subscriber.close()
        if self._relay is not None:
            self._relay.outbox.close()  # (its task ends once the pump sees it)


class SSEStream:
    """Where the messages of one 2024-11-05 HTTP+SSE request go: its session's
    one stream. Such a request runs in a task of its own, under `cancel_scope`."""

    __slots__ = ("session", "version", "cancel_scope", "_outbox")

    def __init__(
        self, session: Session, outbox: Subscriber, cancel_scope: trio.CancelScope
    ) -> None:
        self.session: Session | None = session
        self.version = session.protocol_version
        self.cancel_scope = cancel_scope
        self._outbox = outbox

    async def emit(self, data: bytes) -> None:
        # (False when the stream is gone, and the session with it)
        await self._outbox.send(format_event(data, event=MESSAGE))

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
