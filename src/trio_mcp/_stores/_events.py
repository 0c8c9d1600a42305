"""The session-scoped `EventStore` seam: where the events of a session's streams
wait for a client that resumes, and how streams are numbered.

Contract (what a store must give, so that a shared one can take the memory
one's place without a change to the endpoint):

- Event ids are unique within a session and increase in production order;
  `append` is one round trip that stores the event within the bounds and
  returns its id, atomically (two processes appending to one session get
  distinct, ordered ids).
- `replay` returns exactly the events of the stream the id names that came
  after it, in order; None when the id names no event of this session;
  `EventsLost` when some of those events are no longer kept (a bound or the
  age dropped them): a replay never hides a loss.
- Bounds (`EventLimits`) may be applied lazily, and old events may expire by
  time (a TTL); a replay never returns an event older than the age bound.
- `open_stream` numbers a session's next POST stream atomically.
- `append_many` and `settle` let a broadcast number its events first and
  store them after its frames are out; `replay` must see them either way.
- Everything that may need a round trip is async; `settle` and `prune` are
  not (a store whose events expire by themselves does nothing in `prune`).
  `append_nowait` and `open_stream_nowait` are `append` and `open_stream`
  for a store that can answer at once (the memory store; a shared store
  with sequence numbers in hand): they raise ``trio.WouldBlock`` when it
  cannot, and the caller then awaits the async call. A POST stream tries
  them first, so that its opening and its events cost no await.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .._protocol._events import (
    EventLimits,
    SessionEvents,
    StoredEvent,
    parse_event_id,
)

#: The ids of the requests a POST stream answers, and whether they came as a
#: batch (`_mcp._streams.PostStream.request_ids`).
RequestIds = Callable[[], tuple[list[Any], bool]]


class EventStore(Protocol):
    """Where a session's events wait for a client that reconnects."""

    async def append(self, session_id: str, stream: int, data: bytes, now: float) -> str:
        """Store `data` as the next event of `stream`; returns its event id."""
        ...

    def append_nowait(self, session_id: str, stream: int, data: bytes, now: float) -> str:
        """`append`, answered at once, or ``trio.WouldBlock``."""
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

    async def open_stream(self, session_id: str, request_ids: RequestIds | None = None) -> int:
        """The number of the session's next POST stream (from 1; 0 is its GET
        stream). `request_ids` says what the stream will answer (a shared store
        keeps it, so that another process can answer for a dead producer)."""
        ...

    def open_stream_nowait(self, session_id: str, request_ids: RequestIds | None = None) -> int:
        """`open_stream`, answered at once, or ``trio.WouldBlock``."""
        ...

    def buffered_bytes(self) -> int:
        """The event data this store keeps in this process (for statistics)."""
        ...

    def buffered_sessions(self) -> int:
        """How many sessions have events or an entry here (for statistics: a
        session whose events were dropped has none)."""
        ...


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
        self._sessions: dict[str, SessionEvents] = {}
        # numbered broadcast events not buffered yet: (sessions' events, their
        # sequence numbers, their ids, stream, data, time), oldest first
        self._pending: list[
            tuple[list[SessionEvents], list[int], list[str], int, bytes, float]
        ] = []

    async def append(self, session_id: str, stream: int, data: bytes, now: float) -> str:
        return self.append_nowait(session_id, stream, data, now)

    def append_nowait(self, session_id: str, stream: int, data: bytes, now: float) -> str:
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

    def _events(self, session_id: str) -> SessionEvents:
        events = dict.get(self._sessions, session_id)
        if events is None:
            events = self._sessions[session_id] = SessionEvents()
        return events

    async def replay(
        self, session_id: str, last_event_id: str, now: float
    ) -> tuple[int, list[StoredEvent]] | None:
        if self._pending:
            self.settle()
        events = self._sessions.get(session_id)
        parsed = parse_event_id(last_event_id)
        if events is None or parsed is None:
            return None
        tag, stream, sequence = parsed
        if tag != events.tag or sequence > events.sequence:
            return None
        missed = events.missed(stream, sequence, now, self.limits.max_age_s)
        return None if missed is None else (stream, missed)

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
            events.prune(now, max_age)

    def buffered_bytes(self) -> int:
        if self._pending:
            self.settle()
        return sum(sum(events.sizes.values()) for events in self._sessions.values())

    def buffered_sessions(self) -> int:
        if self._pending:
            self.settle()
        return len(self._sessions)

    async def open_stream(self, session_id: str, request_ids: RequestIds | None = None) -> int:
        return self.open_stream_nowait(session_id, request_ids)

    def open_stream_nowait(self, session_id: str, request_ids: RequestIds | None = None) -> int:
        events = self._events(session_id)
        events.opened += 1
        return events.opened
