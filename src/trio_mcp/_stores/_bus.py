"""The notification `Bus` seam: which live streams a frame goes to.

Three kinds of stream listen here: a session's one standalone stream (the
2025 GET stream, or the 2024-11-05 HTTP+SSE stream, which is the session),
the POST streams still being produced (a client that lost one resumes it with
GET and takes over its live events), and the 2026-07-28 subscriptions/listen
streams. A stream is a `Subscriber`: it takes frames without waiting and says
when it can take no more (it is then dropped, and its client resumes).

Contract (what a bus must give, so that a shared one can take the memory
one's place without a change to the endpoint):

- `attach` gives a session its one standalone stream atomically (False: it
  has one, wherever it is); `detach` ends that, and only if it is still the
  one attached. `take_over` is the resume (GET with ``Last-Event-ID``) of
  that stream: the new subscriber replaces the one attached, wherever it is,
  which is closed. A client resumes because it lost its stream, and the
  server may not know yet (a dead socket is found when a write fails; a
  dead process's lease lapses later), so a resume is never refused with
  409 the way a second stream is; clients retry a refused resume only a
  few times, then go without their stream.
- `send` delivers an event (its data and the id the event store gave it) to
  a session's standalone stream, wherever that is (a shared bus publishes it
  to the process that holds the stream: one round trip, and a subscription
  wakes that process); `deliver` does the same for a broadcast to many
  sessions, each event with its own id, in one call. An event for a session
  with no stream is dropped: the event store keeps it for resumption.
  `resumable` says which sessions a broadcast is kept for at all: those
  whose standalone stream a client could resume (a bus that cannot tell,
  because the stream may be in another process, names them all).
- `resume` attaches a subscriber to a POST stream still being produced
  (False: none is), for a GET with ``Last-Event-ID``; a shared bus follows
  a stream produced by another process, and closes the subscriber when
  that stream ends.
- Delivery is at most once and in order per stream; a subscriber that
  cannot keep up is dropped, never waited for.
- `attach`, `take_over`, `send`, `deliver` and `resume` are async (they may cross
  processes); the rest act on this process's streams and are not.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Protocol

from .._protocol._events import MESSAGE_EVENT
from .._speedups import format_event

#: An SSE frame: its bytes, or pieces written one after another. A broadcast
#: frames its data once and gives every stream the same object as a piece
#: beside the stream's own (its event id, its subscription's ``_meta``), so
#: that streams which queue it hold one copy between them.
Frame = bytes | tuple[bytes, ...]


def frame_bytes(frame: Frame) -> bytes:
    """The frame as one bytes object (a copy, for pieces)."""
    return frame if isinstance(frame, bytes) else b"".join(frame)


def frame_size(frame: Frame) -> int:
    """How many bytes the frame writes."""
    return len(frame) if isinstance(frame, bytes) else sum(map(len, frame))


def shared_event(data: bytes) -> bytes:
    """What every stream's copy of a broadcast event `data` shares: the frame
    less its id line (`format_event` writes the id first)."""
    return format_event(data, event=MESSAGE_EVENT)


def with_event_id(event_id: str, shared: bytes) -> Frame:
    """The frame of the event `shared` (from `shared_event`) under `event_id`:
    the bytes `format_event(data, event_id=..., event=MESSAGE_EVENT)` gives.
    Event ids are the event store's own, free of line breaks."""
    return (b"id: %b\n" % event_id.encode(), shared)


class Subscriber(Protocol):
    """The live end of a stream (`_mcp._streams.Outbox`)."""

    closed: bool

    def offer(self, frame: Frame, now: float | None = None) -> bool:
        """Take `frame` without waiting; False when the stream is closed."""
        ...

    async def send(self, frame: Frame) -> bool:
        """`offer`, waiting while the stream's queue is full."""
        ...

    def close(self) -> None: ...


class Producer(Protocol):
    """A POST stream being produced (`_mcp._streams.PostStream`)."""

    def attach(self, subscriber: Subscriber) -> None:
        """From now on, the stream's live events go to `subscriber` too."""
        ...


class Listening(Protocol):
    """A subscriptions/listen stream (`_mcp._streams.Listener`)."""

    honored: dict[str, Any]
    meta: bytes
    #: The resources it subscribed to.
    uris: frozenset[str]

    @property
    def outbox(self) -> Subscriber: ...


class Bus(Protocol):
    """The live streams (see the module docstring)."""

    async def attach(self, session_id: str, subscriber: Subscriber) -> bool:
        """Make `subscriber` the session's standalone stream; False if it has one."""
        ...

    async def take_over(self, session_id: str, subscriber: Subscriber) -> None:
        """Make `subscriber` the session's standalone stream, closing the one it
        had, wherever that is (a resume)."""
        ...

    def detach(self, session_id: str, subscriber: Subscriber) -> None:
        """`subscriber` is no longer the session's stream (if it still was)."""
        ...

    def stream_of(self, session_id: str) -> Subscriber | None:
        """The session's standalone stream, if it is in this process."""
        ...

    async def send(self, session_id: str, event_id: str, data: bytes, now: float) -> None:
        """Deliver one event to the session's standalone stream, if it has one."""
        ...

    async def deliver(
        self, session_ids: list[str], event_ids: list[str], data: bytes, now: float
    ) -> None:
        """Deliver the event `data` to each session's standalone stream, under
        the event id of the same position."""
        ...

    def resumable(self, session_ids: list[str]) -> list[str]:
        """Those of `session_ids` (live sessions) whose standalone stream a
        client could resume: a broadcast is numbered and kept only for them.
        A session that never had one has no event id of it to resume from,
        and a new stream starts with what comes after it. A bus that cannot
        tell (the stream may be in another process) returns them all."""
        ...

    def producing(self, session_id: str, number: int, producer: Producer) -> None:
        """POST stream `number` of the session is being produced here."""
        ...

    def produced(self, session_id: str, number: int) -> None:
        """POST stream `number` of the session has ended."""
        ...

    async def resume(self, session_id: str, number: int, subscriber: Subscriber) -> bool:
        """Give `subscriber` the live events of POST stream `number` (closing it
        when the stream ends); False if it has ended."""
        ...

    def listen(self, listener: Listening) -> None: ...

    def unlisten(self, listener: Listening) -> None: ...

    def listeners(self) -> Iterable[Listening]:
        """The listen streams, in the order they opened (a snapshot)."""
        ...

    def subscribers(self, uri: str) -> Iterable[Listening]:
        """The listen streams subscribed to resource `uri`, in the order they
        opened (a snapshot; found by the URI, not by looking at every stream)."""
        ...

    def release(self, session_id: str) -> None:
        """The session ended: close its standalone stream and forget its POST streams."""
        ...

    def close_all(self, keep: Collection[str] = (), farewell: bytes = b"") -> None:
        """The server drains: close every standalone and listen stream here,
        but the standalone streams of the sessions in `keep` (HTTP+SSE
        sessions whose requests still run: their answers go there); each
        standalone stream closed gets `farewell` last (a ``retry:`` hint)."""
        ...

    def attached(self) -> list[str]:
        """The sessions with a standalone stream here (they are busy)."""
        ...

    def open_streams(self) -> int:
        """How many standalone and listen streams are open here (for statistics)."""
        ...

    def producing_streams(self) -> int:
        """How many POST streams are being produced here (for statistics)."""
        ...


class MemoryBus:
    """The live streams of this process (the default)."""

    __slots__ = ("_streams", "_streamed", "_producers", "_listeners", "_by_uri")

    def __init__(self) -> None:
        self._streams: dict[str, Subscriber] = {}
        #: The sessions that have had a standalone stream here (`resumable`),
        #: until they end.
        self._streamed: set[str] = set()
        self._producers: dict[tuple[str, int], Producer] = {}
        #: The listen streams in the order they opened (a dict for that order):
        #: a fan-out walks them as they were allocated, in memory order.
        self._listeners: dict[Listening, None] = {}
        #: The listen streams subscribed to each resource, in the same order.
        self._by_uri: dict[str, dict[Listening, None]] = {}

    async def attach(self, session_id: str, subscriber: Subscriber) -> bool:
        if session_id in self._streams:
            return False
        self._streams[session_id] = subscriber
        self._streamed.add(session_id)
        return True

    async def take_over(self, session_id: str, subscriber: Subscriber) -> None:
        previous = dict.get(self._streams, session_id)
        self._streams[session_id] = subscriber
        self._streamed.add(session_id)
        if previous is not None:
            previous.close()

    def detach(self, session_id: str, subscriber: Subscriber) -> None:
        if dict.get(self._streams, session_id) is subscriber:
            del self._streams[session_id]

    def stream_of(self, session_id: str) -> Subscriber | None:
        return dict.get(self._streams, session_id)

    async def send(self, session_id: str, event_id: str, data: bytes, now: float) -> None:
        stream = dict.get(self._streams, session_id)
        if stream is not None:
            frame = format_event(data, event_id=event_id.encode(), event=MESSAGE_EVENT)
            if not stream.offer(frame, now):
                del self._streams[session_id]  # too slow: the client must resume

    async def deliver(
        self, session_ids: list[str], event_ids: list[str], data: bytes, now: float
    ) -> None:
        streams = self._streams
        shared = shared_event(data)
        for session_id, event_id in zip(session_ids, event_ids, strict=True):
            stream = dict.get(streams, session_id)
            if stream is not None and not stream.offer(with_event_id(event_id, shared), now):
                del streams[session_id]

    def resumable(self, session_ids: list[str]) -> list[str]:
        streamed = self._streamed
        return [session_id for session_id in session_ids if session_id in streamed]

    def producing(self, session_id: str, number: int, producer: Producer) -> None:
        self._producers[session_id, number] = producer

    def produced(self, session_id: str, number: int) -> None:
        self._producers.pop((session_id, number), None)

    async def resume(self, session_id: str, number: int, subscriber: Subscriber) -> bool:
        producer = dict.get(self._producers, (session_id, number))
        if producer is None:
            return False
        producer.attach(subscriber)
        return True

    def listen(self, listener: Listening) -> None:
        if listener in self._listeners:
            return
        self._listeners[listener] = None
        by_uri = self._by_uri
        for uri in listener.uris:
            subscribed = dict.get(by_uri, uri)
            if subscribed is None:
                by_uri[uri] = {listener: None}
            else:
                subscribed[listener] = None

    def unlisten(self, listener: Listening) -> None:
        if self._listeners.pop(listener, 0) is None:
            by_uri = self._by_uri
            for uri in listener.uris:
                subscribed = by_uri[uri]
                del subscribed[listener]
                if not subscribed:
                    del by_uri[uri]

    def listeners(self) -> list[Listening]:
        return list(self._listeners)

    def subscribers(self, uri: str) -> list[Listening]:
        subscribed = dict.get(self._by_uri, uri)
        return list(subscribed) if subscribed is not None else []

    def release(self, session_id: str) -> None:
        self._streamed.discard(session_id)
        stream = self._streams.pop(session_id, None)
        if stream is not None:
            stream.close()
        for key in [key for key in self._producers if key[0] == session_id]:
            del self._producers[key]

    def close_all(self, keep: Collection[str] = (), farewell: bytes = b"") -> None:
        for listener in list(self._listeners):
            listener.outbox.close()
        streams = self._streams
        for session_id, stream in list(streams.items()):
            if session_id not in keep:
                if farewell:
                    stream.offer(farewell)
                stream.close()
                del streams[session_id]

    def attached(self) -> list[str]:
        return list(self._streams)

    def open_streams(self) -> int:
        return len(self._streams) + len(self._listeners)

    def producing_streams(self) -> int:
        return len(self._producers)
