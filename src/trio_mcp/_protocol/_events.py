"""Event buffers for resumable SSE streams (2025-03-26 to 2025-11-25): the rules.

Every event the server sends on a session's streams gets an id that is
unique within the session, in production order, and names its stream and
its session: ``<session tag>-<stream>-<sequence>``. A client that lost a
stream reconnects with ``Last-Event-ID`` and receives exactly the events of
that stream that came after it. Buffers are bounded per stream by count,
bytes and age, and per session by the memory of all its streams together
(every POST answered with SSE opens a stream, so without that bound a busy
session would keep the last two minutes of streams, however many): a client
that never comes back costs a bounded amount.

Sans-IO: `SessionEvents` keeps one session's buffers within `EventLimits`;
the stores built on it (``_stores/_events.py``) decide where they live.
"""

from __future__ import annotations

import secrets
from collections import deque
from dataclasses import dataclass
from typing import Final

from .._errors import EventsLost

#: The SSE event type of every MCP message on a stream.
MESSAGE_EVENT: Final = b"message"
#: What one stored event costs beyond its data, counted against `max_session_bytes`.
EVENT_OVERHEAD: Final = 128
#: POST streams whose dropped events a session remembers by number; for
#: older ones it remembers only that they are older (and may have lost
#: events). The GET stream's are always remembered.
LOSSES_KEPT: Final = 64


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


class SessionEvents:
    """One session's event buffers."""

    __slots__ = ("tag", "sequence", "streams", "sizes", "cost", "opened", "lost", "forgotten")

    def __init__(self) -> None:
        self.tag = secrets.token_hex(4)
        self.sequence = 0
        #: The POST streams numbered so far (stream 0 is the GET stream).
        self.opened = 0
        # stream -> deque of (sequence, event id, data, time), oldest stream first
        self.streams: dict[int, deque[tuple[int, str, bytes, float]]] = {}
        self.sizes: dict[int, int] = {}  # stream -> bytes of data in its buffer
        self.cost = 0  # data + EVENT_OVERHEAD per event, all streams
        #: stream -> the newest sequence dropped from it (the GET stream and the
        #: last POST streams, LOSSES_KEPT in all)
        self.lost: dict[int, int] = {}
        #: the newest POST stream whose losses are no longer remembered one by one
        self.forgotten = -1

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
            self.cost -= len(dropped[2]) + EVENT_OVERHEAD
            self.lose(stream, dropped[0])
        self.sizes[stream] = size
        if self.cost > limits.max_session_bytes:
            self.shed(limits.max_session_bytes, keep=stream)

    def shed(self, limit: int, keep: int) -> None:
        """Drop whole streams until the session fits `limit`: the oldest first,
        the GET stream (0) last, never `keep` (the stream being written)."""
        streams = self.streams
        while self.cost > limit:
            victim = -1
            for number in streams:  # (oldest first)
                if number != keep and number != 0:
                    victim = number
                    break
            if victim == -1:
                if keep == 0 or 0 not in streams:
                    return
                victim = 0
            dropped = streams.pop(victim)
            # (`sizes` holds the stream's data bytes: no walk over its events)
            self.cost -= self.sizes.pop(victim) + EVENT_OVERHEAD * len(dropped)
            if dropped:
                self.lose(victim, dropped[-1][0])

    def prune(self, now: float, max_age_s: float) -> None:
        """Drop the events older than `max_age_s`, in every stream."""
        for stream, buffer in list(self.streams.items()):
            while buffer and now - buffer[0][3] > max_age_s:
                dropped = buffer.popleft()
                self.sizes[stream] -= len(dropped[2])
                self.cost -= len(dropped[2]) + EVENT_OVERHEAD
                self.lose(stream, dropped[0])
            if not buffer:
                del self.streams[stream]
                del self.sizes[stream]

    def lose(self, stream: int, sequence: int) -> None:
        """Remember that `stream`'s events up to `sequence` are gone."""
        lost = self.lost
        lost[stream] = sequence  # (events go in order: this is the newest gone)
        if len(lost) > LOSSES_KEPT:
            # The POST stream that lost events first (streams are numbered and
            # shed oldest first, so about the lowest number: one step, where
            # min() compared all of them). The GET stream's entry stays for as
            # long as the session: its resume must never be told of losses
            # it did not have.
            oldest = 0
            for oldest in lost:
                if oldest != 0:
                    break
            del lost[oldest]
            if oldest > self.forgotten:
                self.forgotten = oldest

    def missed(
        self, stream: int, after: int, now: float, max_age_s: float
    ) -> list[StoredEvent] | None:
        """What a client that saw event `after` of `stream` missed: None for a
        stream that never was; EventsLost when some of it is no longer kept."""
        if stream > self.opened and stream not in self.streams and stream not in self.lost:
            return None
        if dict.get(self.lost, stream, -1) > after or (
            stream != 0 and stream <= self.forgotten and stream not in self.lost
        ):
            raise EventsLost(stream)
        events = []
        for sequence, event_id, data, at in dict.get(self.streams, stream, ()):
            if sequence > after:
                if now - at > max_age_s:
                    raise EventsLost(stream)  # (expired; the sweep has not dropped it yet)
                events.append(StoredEvent(event_id, data))
        return events


def parse_event_id(event_id: str) -> tuple[str, int, int] | None:
    """(session id, stream number, sequence) of an id we wrote, else None."""
    parts = event_id.split("-")
    if len(parts) != 3 or not (_is_count(parts[1]) and _is_count(parts[2])):
        return None
    return parts[0], int(parts[1]), int(parts[2])


def _is_count(text: str) -> bool:
    # ASCII digits only (str.isdigit also takes "²", which int() refuses), and
    # no more of them than a count we write can have.
    return 0 < len(text) <= 19 and text.isascii() and text.isdigit()
