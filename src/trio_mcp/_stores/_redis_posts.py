"""`PostLeases`: a 2025 POST stream resumed on a process other than the one
producing it gets its live events, and an error answer if that process dies.

The producing process keeps one lease for all its POST streams: a key named
by its channel (``<prefix>:process:<its id>``), renewed every `RENEW_S`
while it produces any, lapsing after `LEASE_S`; the opening's write sets
it too, before anything of the stream reaches its client. In the session's
event hash (``e``) it writes, per stream, its channel (field ``p:<n>``, the
stream's producer), the ids of the requests the stream will answer
(``r:<n>``) and, once the stream has ended, a mark (``a:<n>``): as
long-lived as the session's events, and dropped with the stream's
(``_redis_events.py``). A key per stream, set at each opening and lapsing
on its own, cost Redis more than the stream's events did. A GET with ``Last-Event-ID`` for such
a stream on another process, after its replay, follows the Redis stream by
polling it every `FOLLOW_S`; it ends the GET once every request of the
stream is answered, once the stream ended without answering (a cancelled
request), or when events were dropped (the client's next resume is told,
410). When the producer's lease lapses with requests unanswered, it died:
the first process to notice (the mark is set atomically) appends one
JSON-RPC error answer for them, which every resume, there or anywhere,
then delivers as the stream's last event, instead of leaving the client
waiting for an answer that will never come.

Polling rather than a subscription: resumes of a POST stream on another
process are rare (its client lost the connection, and the load balancer
sent it elsewhere), and a poll also survives a Redis restart.
"""

from __future__ import annotations

import math
from typing import Any, Final

import orjson
import trio

from .._errors import MCPError
from .._json import dumps
from .._protocol._events import MESSAGE_EVENT
from .._protocol._jsonrpc import INTERNAL_ERROR, error_message
from .._speedups import format_event
from ._bus import Subscriber
from ._redis import RedisLink, logger
from ._redis_events import LEASE_MS, RedisEventStore

#: How long a producing process's lease lasts without renewal, and how often
#: it renews it.
LEASE_S: Final = LEASE_MS / 1000
RENEW_S: Final = 1.0
#: How often a stream followed here is read again.
FOLLOW_S: Final = 0.1

#: The answer to the requests of a stream whose producing process is gone.
PRODUCER_GONE: Final = MCPError(
    INTERNAL_ERROR,
    "Internal error: the server process running this request stopped before it "
    "answered; send the request again",
)

#: KEYS: meta, stream; ARGV: n, after. {producer's lease held, ended mark,
#: request ids, event tag, newest sequence dropped, the entries after `after`}.
#: (The event store's ``WRITE`` writes the producer and the request ids, and
#: sets the producer's lease, when a stream opens, and marks its end.)
FOLLOW = """
local n = ARGV[1]
local got = redis.call('HMGET', KEYS[1], 'a:' .. n, 'r:' .. n, 'tag', 'l:' .. n, 'lw', 'x:' .. n,
                       'p:' .. n)
local lost = got[4] or '0'
if redis.call('EXISTS', KEYS[2]) == 0 then
  if tonumber(n) <= tonumber(got[5] or '0') then
    -- (dropped whole by the byte bound: only the watermark tells)
    lost = '9007199254740992'
  elseif tonumber(got[6] or '0') > tonumber(ARGV[2]) then
    -- (its key lapsed before the hash: its events up to the newest are gone)
    lost = got[6]
  end
end
return {
  got[7] and redis.call('EXISTS', got[7]) or 0,
  got[1] or '',
  got[2] or '',
  got[3] or '',
  lost,
  redis.call('XRANGE', KEYS[2], '(' .. ARGV[2] .. '-0', '+'),
}
"""

#: The ``a:<n>`` marks: the stream ended on its producer; its producer died and
#: a process is answering for it.
ENDED: Final = b"1"
ABANDONED: Final = b"2"

#: KEYS: meta; ARGV: n. 1 when the caller is the one to answer for the
#: stream's dead producer (its lease lapsed, and nobody has marked it).
ABANDON = """
local producer = redis.call('HGET', KEYS[1], 'p:' .. ARGV[1])
if producer and redis.call('EXISTS', producer) == 1 then return 0 end
-- (no mark in a hash that is gone: HSETNX would make one without a TTL)
if redis.call('PTTL', KEYS[1]) <= 0 then return 0 end
return redis.call('HSETNX', KEYS[1], 'a:' .. ARGV[1], 2)
"""


def answered_ids(data: bytes) -> list[Any]:
    """The ids of the JSON-RPC answers in one event's data (a batch's too)."""
    if not data:
        return []  # (a priming event)
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return []
    messages = message if type(message) is list else [message]
    return [
        m["id"]
        for m in messages
        if type(m) is dict and "id" in m and "method" not in m and ("result" in m or "error" in m)
    ]


class Following:
    """One GET here that resumed a POST stream produced elsewhere."""

    __slots__ = (
        "session_id",
        "number",
        "subscriber",
        "after",
        "shown",
        "pending",
        "batch",
        "since",
        "answered_for_since",
    )

    def __init__(
        self, session_id: str, number: int, subscriber: Subscriber, shown: int, since: float
    ) -> None:
        self.session_id = session_id
        self.number = number
        self.subscriber = subscriber
        #: the newest sequence read (0: read the stream from its start once,
        #: to learn which requests are answered already)
        self.after = 0
        #: the newest sequence the client has (the replay's end)
        self.shown = shown
        #: the ids of the requests not answered yet (None: not known yet), and
        #: whether they came as a batch (answered with an array)
        self.pending: set[Any] | None = None
        self.batch = False
        #: when the following began (ids not known a lease later never will be)
        self.since = since
        #: when it saw another process begin to answer for a dead producer
        #: (an answer not there a lease later never will be)
        self.answered_for_since: float | None = None


class PostLeases:
    """The lease of this process on its POST streams, and the streams of other
    processes that GETs here follow (see the module docstring)."""

    def __init__(self, link: RedisLink, events: RedisEventStore) -> None:
        self.link = link
        self.events = events
        self._lease_ms = math.ceil(LEASE_S * 1000)
        #: streams produced here (the lease is renewed while there are any)
        self._producing: set[tuple[str, int]] = set()
        self._following: dict[int, Following] = {}
        self._more = trio.Event()
        link.tasks.append(self._renew)
        link.tasks.append(self._follow)

    # ---- the streams produced here --------------------------------------------

    def producing(self, session_id: str, number: int) -> None:
        self._producing.add((session_id, number))

    def produced(self, session_id: str, number: int) -> None:
        self._producing.discard((session_id, number))
        self.events.closed_stream(session_id, number)  # (its end is marked there)

    async def _renew(self) -> None:
        """Renew this process's lease every `RENEW_S` while it produces streams,
        until cancelled."""
        link = self.link
        while True:
            await trio.sleep(RENEW_S)
            if self._producing:
                try:
                    await link.client.set(link.process_channel, b"1", px=self._lease_ms)
                except Exception as error:
                    logger.warning("Redis: renewing the lease: %r", error)  # (next time)

    # ---- the streams of other processes followed here ---------------------------

    def follow(self, session_id: str, number: int, subscriber: Subscriber) -> None:
        """Give `subscriber` what stream `number` gets after the replay just made
        here, and its end (`link.replayed` has where that replay ended)."""
        shown, _tag = self.link.replayed.pop((session_id, number), (0, ""))
        following = Following(session_id, number, subscriber, shown, trio.current_time())
        self._following[id(following)] = following
        self._more.set()

    async def _follow(self) -> None:
        """Read every followed stream each `FOLLOW_S`, until cancelled."""
        while True:
            if not self._following:
                await self._more.wait()
                self._more = trio.Event()
            for key, following in list(self._following.items()):
                try:
                    done = await self._read(following)
                except Exception as error:
                    logger.warning("Redis: following a POST stream: %r", error)
                    done = False  # (Redis is away, say: next time)
                if done or following.subscriber.closed:
                    following.subscriber.close()
                    del self._following[key]
            await trio.sleep(FOLLOW_S)

    async def _read(self, following: Following) -> bool:
        """Offer the subscriber the stream's new events; whether it has ended."""
        link = self.link
        session_id, number = following.session_id, following.number
        meta = link.events_key(session_id, "e")
        held, ended, request_ids, tag, lost, entries = await link.script("follow", FOLLOW)(
            keys=[meta, link.events_key(session_id, f"x:{number}")],
            args=[number, following.after],
        )
        if int(lost) > following.shown:
            return True  # (events were dropped: the client's next resume hears of it)
        if following.pending is None and request_ids:
            ids, following.batch = orjson.loads(request_ids)
            following.pending = set(ids)
        pending = following.pending
        subscriber = following.subscriber
        for entry_id, fields in entries:
            seq = int(entry_id.split(b"-", 1)[0])
            following.after = seq
            data = fields[1]
            if pending is not None:
                pending.difference_update(answered_ids(data))
            if seq > following.shown:
                following.shown = seq
                event_id = f"{tag.decode()}-{number}-{seq}".encode()
                if not subscriber.offer(format_event(data, event_id=event_id, event=MESSAGE_EVENT)):
                    return True
        now = trio.current_time()
        if pending is None:
            # (the producer has not written its ids yet, or never will: it ended
            # too soon, or died first)
            return ended == ENDED or now - following.since > LEASE_S
        if not pending or ended == ENDED:
            return True  # (answered, or ended unanswered: a cancelled request)
        if ended == ABANDONED:
            # (another process answers for the dead producer: its answer comes next)
            if following.answered_for_since is None:
                following.answered_for_since = now
            return now - following.answered_for_since > LEASE_S
        if not held and await link.script("abandon", ABANDON)(keys=[meta], args=[number]):
            await self._answer_for_the_dead(session_id, number, following)
        return False

    async def _answer_for_the_dead(
        self, session_id: str, number: int, following: Following
    ) -> None:
        """Append the error answer for the requests of a stream whose producer died
        (the next read delivers it, here and on every other follower)."""
        ids = sorted(following.pending or (), key=repr)
        answers = [error_message(request_id, PRODUCER_GONE) for request_id in ids]
        data = dumps(answers if following.batch else answers[0])
        await self.events.append(session_id, number, data, trio.current_time())
