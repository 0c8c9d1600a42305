"""Event buffers for resumable SSE streams (2025-03-26 to 2025-11-25).

Every event the server sends on a session's streams gets an id that is
unique within the session, in production order, and names its stream and
its session: ``<session tag>-<stream>-<sequence>``. A client that lost a
stream reconnects with ``Last-Event-ID`` and receives exactly the events of
that stream that came after it. Buffers are bounded per stream by count,
bytes and age, and per session by the memory of all its streams together
(every POST answered with SSE opens a stream, so without that bound a busy
session would keep the last two minutes of streams, however many): a client
that never comes back costs a bounded amount.

The store interface is async and session-scoped so that a shared (Redis)
store can take the in-memory one's place; the in-memory store never awaits
and imports no trio.
"""

from __future__ import annotations

import secrets
from collections import deque
from dataclasses import dataclass
from typing import Final, Protocol

#: What one stored event costs beyond its data, counted against `max_session_bytes`.
EVENT_OVERHEAD: Final = 128


@dataclass(frozen=True, slots=True)
class EventLimits:
    """Bounds of one stream's buffer (the oldest events go first) and of one
    session's streams together (the oldest streams go first, whole)."""

    max_events: int = 256
    max_bytes: int = 256 * 1024
    max_age_s: float = 120.0
    #: data + EVENT_OVERHEAD per event, over all of a session's streams
    max_session_bytes: int = 1024 * 1024


@dataclass(frozen=True, slots=True)
class StoredEvent:
    event_id: str
    data: bytes


class EventStore(Protocol):
    """Where a session's events wait for a client that reconnects."""

    async def append(self, session_id: str, stream: int, data: bytes, now: float) -> str:
        """Store `data` as the next event of `stream`; returns its event id."""
        ...

    async def append_many(
        self, session_ids: list[str], stream: int, data: bytes, now: float
    ) -> list[str]:
        """`append` for each session in turn (a broadcast); returns the event ids
        in the same order. One call for all, so a shared store can batch them.

        A store may keep the events pending until its next call or `settle`,
        so that the frames reach the sockets before the buffers are written;
        `replay` must see them either way."""
        ...

    def settle(self) -> None:
        """Write what `append_many` left pending (nothing, for a store that
        writes at once). The broadcaster calls it once every stream has its frame."""
        ...

    async def replay(
        self, session_id: str, last_event_id: str, now: float
    ) -> tuple[int, list[StoredEvent]] | None:
        """The stream `last_event_id` belongs to and its events after it.

        None when the id does not name an event of this session.
        """
        ...

    async def drop_session(self, session_id: str) -> None: ...

    def prune(self, now: float) -> None:
        """Drop events older than the age bound everywhere (a store whose
        events expire by themselves does nothing)."""
        ...


class _SessionEvents:
    """One session's event buffers."""

    __slots__ = ("tag", "sequence", "streams", "sizes", "cost")

    def __init__(self) -> None:
        self.tag = secrets.token_hex(4)
        self.sequence = 0
        # stream -> deque of (sequence, event id, data, time), oldest stream first
        self.streams: dict[int, deque[tuple[int, str, bytes, float]]] = {}
        self.sizes: dict[int, int] = {}  # stream -> bytes of data in its buffer
        self.cost = 0  # data + EVENT_OVERHEAD per event, all streams

    def append(self, stream: int, data: bytes, now: float, limits: EventLimits) -> str:
        """Store `data` as the next event of `stream` within `limits`; its id."""
        self.sequence += 1
        event_id = f"{self.tag}-{stream}-{self.sequence}"
        self.store(stream, self.sequence, event_id, data, now, limits)
        return event_id

    def store(
        self,
        stream: int,
        sequence: int,
        event_id: str,
        data: bytes,
        now: float,
        limits: EventLimits,
    ) -> None:
        """Buffer event `sequence` (already numbered) of `stream` within `limits`."""
        buffer = dict.get(self.streams, stream)
        if buffer is None:
            buffer = self.streams[stream] = deque()
        buffer.append((sequence, event_id, data, now))
        self.cost += len(data) + EVENT_OVERHEAD
        size = dict.get(self.sizes, stream, 0) + len(data)
        while buffer and (
            len(buffer) > limits.max_events
            or size > limits.max_bytes
            or now - buffer[0][3] > limits.max_age_s
        ):
            dropped = buffer.popleft()
            size -= len(dropped[2])
            self.cost -= _cost(dropped)
        self.sizes[stream] = size
        if self.cost > limits.max_session_bytes:
            self.shed(limits.max_session_bytes, keep=stream)

    def shed(self, limit: int, keep: int) -> None:
        """Drop whole streams until the session fits `limit`: the oldest first,
        the GET stream (0) last, never `keep` (the stream being written)."""
        streams = self.streams
        while self.cost > limit:
            victim = next((n for n in streams if n != keep and n != 0), None)
            if victim is None:
                if keep == 0 or 0 not in streams:
                    return
                victim = 0
            self.cost -= sum(map(_cost, streams.pop(victim)))
            self.sizes.pop(victim, None)


def _cost(event: tuple[int, str, bytes, float]) -> int:
    return len(event[2]) + EVENT_OVERHEAD


class MemoryEventStore:
    """Event buffers in this process's memory (the default).

    `append_many` numbers a broadcast's events at once and buffers them at
    `settle` or at the store's next call, whichever comes first: the
    broadcaster sends every frame in between, so buffering (about a microsecond
    per session in a large fan-out) is not on the way to the last stream.
    Nothing else can see the difference: every other call settles first.
    """

    __slots__ = ("limits", "_sessions", "_pending")

    def __init__(self, limits: EventLimits | None = None) -> None:
        self.limits = limits or EventLimits()
        self._sessions: dict[str, _SessionEvents] = {}
        # numbered broadcast events not buffered yet: (sessions' events, their
        # sequence numbers, their ids, stream, data, time), oldest first
        self._pending: list[
            tuple[list[_SessionEvents], list[int], list[str], int, bytes, float]
        ] = []

    async def append(self, session_id: str, stream: int, data: bytes, now: float) -> str:
        if self._pending:
            self.settle()
        return self._events(session_id).append(stream, data, now, self.limits)

    async def append_many(
        self, session_ids: list[str], stream: int, data: bytes, now: float
    ) -> list[str]:
        events = list(map(self._events, session_ids))
        sequences = []
        event_ids = []
        for session_events in events:
            session_events.sequence += 1
            sequence = session_events.sequence
            sequences.append(sequence)
            event_ids.append(f"{session_events.tag}-{stream}-{sequence}")
        self._pending.append((events, sequences, event_ids, stream, data, now))
        return event_ids

    def settle(self) -> None:
        pending, self._pending = self._pending, []
        limits = self.limits
        for events, sequences, event_ids, stream, data, now in pending:
            for session_events, sequence, event_id in zip(
                events, sequences, event_ids, strict=True
            ):
                session_events.store(stream, sequence, event_id, data, now, limits)

    def _events(self, session_id: str) -> _SessionEvents:
        events = dict.get(self._sessions, session_id)
        if events is None:
            events = self._sessions[session_id] = _SessionEvents()
        return events

    async def replay(
        self, session_id: str, last_event_id: str, now: float
    ) -> tuple[int, list[StoredEvent]] | None:
        if self._pending:
            self.settle()
        events = self._sessions.get(session_id)
        parsed = _parse(last_event_id)
        if events is None or parsed is None:
            return None
        tag, stream, sequence = parsed
        if tag != events.tag or sequence > events.sequence:
            return None
        buffer = events.streams.get(stream, deque())
        max_age = self.limits.max_age_s
        return stream, [
            StoredEvent(event_id, data)
            for seq, event_id, data, at in buffer
            if seq > sequence and now - at <= max_age
        ]

    async def drop_session(self, session_id: str) -> None:
        if self._pending:
            self.settle()
        self._sessions.pop(session_id, None)

    def prune(self, now: float) -> None:
        """Drop events older than the age bound everywhere (buffers of quiet streams too)."""
        if self._pending:
            self.settle()
        max_age = self.limits.max_age_s
        for events in list(self._sessions.values()):
            for stream, buffer in list(events.streams.items()):
                while buffer and now - buffer[0][3] > max_age:
                    dropped = buffer.popleft()
                    events.sizes[stream] -= len(dropped[2])
                    events.cost -= _cost(dropped)
                if not buffer:
                    del events.streams[stream]
                    del events.sizes[stream]

    def buffered_bytes(self) -> int:
        if self._pending:
            self.settle()
        return sum(sum(events.sizes.values()) for events in self._sessions.values())


def _parse(event_id: str) -> tuple[str, int, int] | None:
    parts = event_id.split("-")
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    return parts[0], int(parts[1]), int(parts[2])
