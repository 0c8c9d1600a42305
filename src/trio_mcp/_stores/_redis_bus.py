"""`RedisBus`: a session's GET stream may be held by any process, and the
events of the session reach it wherever they are produced.

The streams themselves are this process's (a `MemoryBus`); what is shared
is who holds each session's GET stream: a lease, ``<prefix>:{<id>}:holder``
= the holding process's channel, taken atomically by `attach` (a second GET
anywhere gets 409) and renewed every `RENEW_S` while the stream is open, so
that the GET stream of a process that died is free again after `LEASE_S`.
A resume takes the lease whoever holds it (`take_over`), and tells the
holder, if it lives, to close its stream (a message on its channel that
starts with a space, which no session id has): the client that resumes
left that stream, and does not wait for a dead holder's lease to lapse.
The event store's append script publishes each GET-stream event to the
holder (one round trip with the append); this process's handler offers it
to the stream. A resume (GET with ``Last-Event-ID``) replays from Redis,
then takes the lease, then catches up with what was added in between; an
event that both the catch-up and the channel bring is offered once.

A POST stream still being produced elsewhere is followed from Redis
(`PostLeases`, ``_redis_posts.py``). Not shared: the 2026-07-28 listen
streams and the HTTP+SSE streams, each held by one process, which hears
every process's broadcasts (``_redis_broadcast.py``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from typing import Final

import trio

from .._protocol._events import MESSAGE_EVENT
from .._speedups import format_event
from ._bus import Listening, MemoryBus, Producer, Subscriber
from ._redis import RedisLink, answering_503
from ._redis_posts import PostLeases

#: How long a GET stream's lease lasts without renewal (a dead holder frees
#: the session's GET stream after this), and how often it is renewed.
LEASE_S: Final = 3.0
RENEW_S: Final = 1.0

#: KEYS: holder; ARGV: channel, lease ms. 1 when this process took the lease.
TAKE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

#: KEYS: holder; ARGV: channel, lease ms, the message to the previous holder.
TAKE_OVER = """
local previous = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if previous and previous ~= ARGV[1] then redis.call('PUBLISH', previous, ARGV[3]) end
return 0
"""

#: ARGV: channel, lease ms, prefix, renewed ids..., '', released ids...
RENEW = """
local i = 4
while ARGV[i] ~= '' do
  local key = ARGV[3] .. ':{' .. ARGV[i] .. '}:holder'
  local holder = redis.call('GET', key)
  if holder == ARGV[1] or not holder then  -- (taken again after Redis lost it)
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
  end
  i = i + 1
end
for j = i + 1, #ARGV do
  local key = ARGV[3] .. ':{' .. ARGV[j] .. '}:holder'
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
end
return 0
"""

#: KEYS: stream 0; ARGV: after. The entries added since.
SINCE = """
return redis.call('XRANGE', KEYS[1], '(' .. ARGV[1] .. '-0', '+')
"""


class RedisBus:
    """The live streams of this process, and the GET-stream leases in Redis."""

    def __init__(self, link: RedisLink, posts: PostLeases) -> None:
        self.link = link
        self.local = MemoryBus()
        self.posts = posts
        self._lease_ms = math.ceil(LEASE_S * 1000)
        #: sessions whose lease this process gave up, not yet deleted in Redis
        self._released: set[str] = set()
        #: the newest event sequence each GET stream here was offered
        self._offered: dict[str, int] = {}
        #: the live events of the GET streams catching up, kept until the
        #: older ones read from Redis are offered (else those would be skipped)
        self._catching_up: dict[str, list[tuple[int, bytes, bytes]]] = {}
        self._wake = trio.Event()
        link.handlers[link.process_channel] = self._rung
        link.tasks.append(self._renew)

    # ---- what other processes send ---------------------------------------------

    def _rung(self, message: bytes) -> None:
        """An event for a GET stream held here (published by the append script),
        or, after a space, a session whose GET stream another process took over."""
        if message[:1] == b" ":
            self._taken_away(message[1:].decode())
            return
        session_id, seq, event_id, data = message.split(b" ", 3)
        self._arrived(session_id.decode(), int(seq), event_id, data)

    def _arrived(self, session_id: str, seq: int, event_id: bytes, data: bytes) -> None:
        """A live event of a GET stream here: offered, or kept while it catches up."""
        waiting = self._catching_up.get(session_id)
        if waiting is not None:
            waiting.append((seq, event_id, data))
        else:
            self._offer(session_id, seq, event_id, data)

    def _taken_away(self, session_id: str) -> None:
        stream = self.local.stream_of(session_id)
        if stream is not None:
            self.local.detach(session_id, stream)
            self._offered.pop(session_id, None)
            stream.close()

    def _offer(self, session_id: str, seq: int, event_id: bytes, data: bytes) -> None:
        stream = self.local.stream_of(session_id)
        if stream is None or seq <= self._offered.get(session_id, 0):
            return
        self._offered[session_id] = seq
        frame = format_event(data, event_id=event_id, event=MESSAGE_EVENT)
        if not stream.offer(frame):
            self.detach(session_id, stream)  # too slow: the client must resume

    async def _renew(self) -> None:
        """Renew the leases of the streams here, give up released ones, until cancelled."""
        link = self.link
        while True:
            with trio.move_on_after(RENEW_S):
                await self._wake.wait()
            self._wake = trio.Event()
            held = self.local.attached()
            released, self._released = self._released, set()
            if held or released:
                try:
                    await link.script("renew", RENEW)(
                        keys=[],
                        args=[
                            link.process_channel,
                            self._lease_ms,
                            link.key(),
                            *held,
                            "",
                            *released,
                        ],
                    )
                except Exception:
                    # (Redis is away, say: next time; the lease lapses meanwhile)
                    self._released |= released

    # ---- the Bus protocol ------------------------------------------------------

    async def attach(self, session_id: str, subscriber: Subscriber) -> bool:
        link = self.link
        if self.local.stream_of(session_id) is not None:
            return False
        self._released.discard(session_id)
        with answering_503(link):
            taken = await link.script("take", TAKE)(
                keys=[link.session_key(session_id, "holder")],
                args=[link.process_channel, self._lease_ms],
            )
        replayed = self.link.replayed.pop((session_id, 0), None)
        if not taken or not await self.local.attach(session_id, subscriber):
            return False
        self._offered[session_id] = 0
        if replayed is not None:
            await self.catch_up(session_id, *replayed)
        return True

    async def take_over(self, session_id: str, subscriber: Subscriber) -> None:
        link = self.link
        self._released.discard(session_id)
        with answering_503(link):
            await link.script("take_over", TAKE_OVER)(
                keys=[link.session_key(session_id, "holder")],
                args=[link.process_channel, self._lease_ms, b" " + session_id.encode()],
            )
        replayed = self.link.replayed.pop((session_id, 0), None)
        await self.local.take_over(session_id, subscriber)
        self._offered[session_id] = 0
        if replayed is not None:
            await self.catch_up(session_id, *replayed)

    async def catch_up(self, session_id: str, after: int, tag: str) -> None:
        """Offer the GET stream here what was added after `after` (the end of a
        replay) before its lease was taken."""
        link = self.link
        self._offered[session_id] = after
        waiting: list[tuple[int, bytes, bytes]] = []
        self._catching_up[session_id] = waiting
        try:
            entries = await link.script("since", SINCE)(
                keys=[link.events_key(session_id, "x:0")], args=[after]
            )
        finally:
            if self._catching_up.get(session_id) is waiting:
                del self._catching_up[session_id]
        for entry_id, fields in entries:
            seq = int(entry_id.split(b"-", 1)[0])
            self._offer(session_id, seq, f"{tag}-0-{seq}".encode(), fields[1])
        for seq, event_id, data in waiting:
            self._offer(session_id, seq, event_id, data)

    def detach(self, session_id: str, subscriber: Subscriber) -> None:
        if self.local.stream_of(session_id) is subscriber:
            self.local.detach(session_id, subscriber)
            self._give_up(session_id)

    def _give_up(self, session_id: str) -> None:
        self._offered.pop(session_id, None)
        self._released.add(session_id)
        self._wake.set()

    def stream_of(self, session_id: str) -> Subscriber | None:
        return self.local.stream_of(session_id)

    async def send(self, session_id: str, event_id: str, data: bytes, now: float) -> None:
        # (a stream elsewhere was rung by the append script)
        stream = self.local.stream_of(session_id)
        if stream is not None:
            seq = int(event_id.rsplit("-", 1)[1])
            self._arrived(session_id, seq, event_id.encode(), data)

    async def deliver(
        self, session_ids: list[str], event_ids: list[str], data: bytes, now: float
    ) -> None:
        for session_id, event_id in zip(session_ids, event_ids, strict=True):
            await self.send(session_id, event_id, data, now)

    def resumable(self, session_ids: list[str]) -> list[str]:
        return session_ids  # (its stream may have been in another process)

    def producing(self, session_id: str, number: int, producer: Producer) -> None:
        self.local.producing(session_id, number, producer)
        self.posts.producing(session_id, number)

    def produced(self, session_id: str, number: int) -> None:
        self.local.produced(session_id, number)
        self.posts.produced(session_id, number)

    async def resume(self, session_id: str, number: int, subscriber: Subscriber) -> bool:
        if not await self.local.resume(session_id, number, subscriber):
            self.posts.follow(session_id, number, subscriber)  # (produced elsewhere, or over)
        return True

    def listen(self, listener: Listening) -> None:
        self.local.listen(listener)

    def unlisten(self, listener: Listening) -> None:
        self.local.unlisten(listener)

    def listeners(self) -> Iterable[Listening]:
        return self.local.listeners()

    def subscribers(self, uri: str) -> Iterable[Listening]:
        return self.local.subscribers(uri)

    def release(self, session_id: str) -> None:
        if self.local.stream_of(session_id) is not None:
            self._give_up(session_id)
        self.local.release(session_id)

    def close_all(self, keep: Collection[str] = (), farewell: bytes = b"") -> None:
        for session_id in self.local.attached():
            if session_id not in keep:
                self._give_up(session_id)
        self.local.close_all(keep, farewell)

    def attached(self) -> list[str]:
        return self.local.attached()

    def open_streams(self) -> int:
        return self.local.open_streams()

    def producing_streams(self) -> int:
        return self.local.producing_streams()
