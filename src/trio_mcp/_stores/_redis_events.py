"""`RedisEventStore`: a session's events in Redis streams, for resumption on
any process.

Each SSE stream of a session is one Redis stream (``<prefix>:{<id>}:x:<n>``)
whose entry ids are the session's event sequence numbers (``<seq>-0``), so
a replay is one XRANGE after the client's last event. Beside them a hash
(``<prefix>:{<id>}:e``) keeps the session's event tag, its last sequence
number, its POST streams numbered so far, the bytes it buffers (``MAXLEN``
counts entries, not bytes) and, per stream, the newest sequence dropped;
for the POST streams the session's byte bound dropped whole (the oldest
first), one watermark, the newest such stream, so that the hash holds
fields for the streams Redis still has only.

`append` is one script, one round trip: it numbers the event, adds it,
drops what the bounds (`EventLimits`: count, bytes, age; the session's bytes
over all its streams) no longer allow, remembering what it dropped,
refreshes the TTL, and, for the GET stream (0) of a session whose stream
another process holds (the bus's lease, ``<prefix>:{<id>}:holder``),
publishes the event to that process, which offers it to its stream. A
replay never hides a loss: events the bounds dropped, events older than the
age bound, and a session whose events Redis no longer has at all (Redis
restarted without persistence) are `EventsLost`.

The events of a POST stream are numbered in the process instead, from a
block of sequence numbers its opening reserved (`SEQ_BLOCK`), and written
by a task in batches (`write`: one script for every event numbered since
the last, the append's own logic in a loop), so that an SSE answer costs one round trip
(its opening) rather than one per event. A resume elsewhere may see them a
moment later (its follower reads them as they come, ``_redis_posts.py``);
events that could not be written are marked lost, never left out silently.
"""

from __future__ import annotations

import contextlib
import math
import secrets
from typing import Any, Final

import trio

from .._config import MCPConfig
from .._errors import EventsLost
from .._json import dumps
from .._protocol._events import EVENT_OVERHEAD, StoredEvent, parse_event_id
from ._events import RequestIds
from ._redis import RedisLink, answering_503, logger
from ._stores import event_limits

#: How long the lease on a POST stream being produced lasts without renewal
#: (``_redis_posts.py`` renews it).
LEASE_MS: Final = 3000

#: KEYS: meta, stream, holder; ARGV: data, n, max events, max bytes, max age ms,
#: max session bytes, ttl ms, a new tag, this process's channel, session id,
#: and the event's sequence number if this process numbered it ('' numbers it
#: here). Returns {tag, seq}.
APPEND_ONE = """
local function append(KEYS, ARGV)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local meta, stream, n = KEYS[1], KEYS[2], ARGV[2]
local tag = redis.call('HGET', meta, 'tag')
if not tag then
  tag = ARGV[8]
  redis.call('HSET', meta, 'tag', tag)
end
local seq = tonumber(ARGV[11])
if not seq then seq = redis.call('HINCRBY', meta, 'seq', 1) end
local size = string.len(ARGV[1])
redis.call('XADD', stream, seq .. '-0', 'd', ARGV[1], 't', now)
redis.call('HSET', meta, 'x:' .. n, 1)
local bytes = redis.call('HINCRBY', meta, 'b:' .. n, size)
local cost = redis.call('HINCRBY', meta, 'cost', size + OVERHEAD)
local max_events, max_bytes = tonumber(ARGV[3]), tonumber(ARGV[4])
local oldest_allowed = now - tonumber(ARGV[5])
while true do
  local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)[1]
  if not first then break end
  local first_time = tonumber(first[2][4])
  if not (redis.call('XLEN', stream) > max_events or bytes > max_bytes
          or first_time < oldest_allowed) then
    break
  end
  local dropped = string.len(first[2][2])
  redis.call('XDEL', stream, first[1])
  bytes = redis.call('HINCRBY', meta, 'b:' .. n, -dropped)
  cost = redis.call('HINCRBY', meta, 'cost', -(dropped + OVERHEAD))
  redis.call('HSET', meta, 'l:' .. n, string.match(first[1], '^(%d+)'))
end
local max_cost = tonumber(ARGV[6])
if cost > max_cost then
  -- drop whole streams, the oldest first, the GET stream last, never this one
  local streams = {}
  local fields = redis.call('HKEYS', meta)
  for _, field in ipairs(fields) do
    local other = string.match(field, '^x:(%d+)$')
    if other and other ~= n then streams[#streams + 1] = tonumber(other) end
  end
  table.sort(streams, function(a, b)
    if a == 0 then return false end
    if b == 0 then return true end
    return a < b
  end)
  for _, other in ipairs(streams) do
    if cost <= max_cost then break end
    local key = (string.gsub(stream, ':x:%d+$', ':x:' .. other))
    if other == 0 then
      local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)[1]
      if last then redis.call('HSET', meta, 'l:0', string.match(last[1], '^(%d+)')) end
    else
      -- (one watermark for the POST streams dropped whole, oldest first: a
      -- field for each would grow the hash for the session's whole life)
      redis.call('HDEL', meta, 'l:' .. other)
      if other > tonumber(redis.call('HGET', meta, 'lw') or '0') then
        redis.call('HSET', meta, 'lw', other)
      end
    end
    local count = redis.call('XLEN', key)
    local held = tonumber(redis.call('HGET', meta, 'b:' .. other) or '0')
    cost = redis.call('HINCRBY', meta, 'cost', -(held + count * OVERHEAD))
    redis.call('DEL', key)
    redis.call('HDEL', meta, 'x:' .. other, 'b:' .. other)
  end
end
local ttl = tonumber(ARGV[7])
redis.call('PEXPIRE', meta, ttl)
redis.call('PEXPIRE', stream, ttl)
if n == '0' then
  local holder = redis.call('GET', KEYS[3])
  if holder and holder ~= ARGV[9] then
    redis.call('PUBLISH', holder, ARGV[10] .. ' ' .. seq .. ' ' .. tag .. '-0-' .. seq
               .. ' ' .. ARGV[1])
  end
end
return {tag, seq}
end
""".replace("OVERHEAD", str(EVENT_OVERHEAD))
APPEND = APPEND_ONE + "return append(KEYS, ARGV)\n"

#: The events numbered here, all at once: ARGV: max events, max bytes, max age
#: ms, max session bytes, ttl ms, a new tag, this process's channel, the key
#: prefix, then per event: session id, n, seq, data.
WRITE = (
    APPEND_ONE
    + """
local prefix = ARGV[8]
for i = 9, #ARGV, 4 do
  local base = prefix .. ':{' .. ARGV[i] .. '}:'
  append({base .. 'e', base .. 'x:' .. ARGV[i + 1], base .. 'holder'},
         {ARGV[i + 3], ARGV[i + 1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5],
          ARGV[6], ARGV[7], ARGV[i], ARGV[i + 2]})
end
return 0
"""
)

#: KEYS: meta, stream; ARGV: n, after, max age ms. Returns a status and the entries:
#: {'gone'}, {'none'}, {'lost'} or {'ok', tag, entries}.
REPLAY = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local meta = KEYS[1]
local tag = redis.call('HGET', meta, 'tag')
if not tag then return {'gone'} end
local n, after = ARGV[1], tonumber(ARGV[2])
if after > tonumber(redis.call('HGET', meta, 'seq') or '0') then return {'none'} end
local opened = tonumber(redis.call('HGET', meta, 'opened') or '0')
local lost = redis.call('HGET', meta, 'l:' .. n)
if tonumber(n) > opened and redis.call('HEXISTS', meta, 'x:' .. n) == 0 and not lost then
  return {'none'}
end
if lost and tonumber(lost) > after then return {'lost'} end
if n ~= '0' and redis.call('HEXISTS', meta, 'x:' .. n) == 0
   and tonumber(n) <= tonumber(redis.call('HGET', meta, 'lw') or '0') then
  return {'lost'}
end
local entries = redis.call('XRANGE', KEYS[2], '(' .. after .. '-0', '+')
local oldest_allowed = now - tonumber(ARGV[3])
for _, entry in ipairs(entries) do
  if tonumber(entry[2][4]) < oldest_allowed then return {'lost'} end
end
return {'ok', tag, entries}
"""

#: KEYS: meta; ARGV: ttl ms, a new tag, how many sequence numbers to reserve,
#: this process's channel, the lease ms, the stream's request ids (JSON, or '').
#: {the number of the session's next POST stream, the session's tag, the
#: first of the sequence numbers reserved for it}. With request ids, this
#: process takes the stream's lease and writes them (``_redis_posts.py``).
OPEN_STREAM = """
local opened = redis.call('HINCRBY', KEYS[1], 'opened', 1)
if ARGV[6] ~= '' then
  redis.call('SET', (string.gsub(KEYS[1], ':e$', ':p:' .. opened)), ARGV[4], 'PX', ARGV[5])
  redis.call('SET', (string.gsub(KEYS[1], ':e$', ':r:' .. opened)), ARGV[6], 'PX', ARGV[1])
end
local tag = redis.call('HGET', KEYS[1], 'tag')
if not tag then
  tag = ARGV[2]
  redis.call('HSET', KEYS[1], 'tag', tag)
end
local block = tonumber(ARGV[3])
local first = redis.call('HINCRBY', KEYS[1], 'seq', block) - block + 1
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return {opened, tag, first}
"""

#: KEYS: meta; ARGV: n, the newest sequence lost. Marks events that never
#: reached Redis as dropped, so that a resume is told (410), never shown less.
LOST = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local lost = tonumber(redis.call('HGET', KEYS[1], 'l:' .. ARGV[1]) or '0')
if tonumber(ARGV[2]) > lost then redis.call('HSET', KEYS[1], 'l:' .. ARGV[1], ARGV[2]) end
return 0
"""

#: Sequence numbers a POST stream reserves when it opens: its events are
#: numbered here and written to Redis by `RedisEventStore.write`, in batches,
#: without a round trip each; an event past them is numbered by Redis.
SEQ_BLOCK: Final = 64

#: KEYS: meta. Ends every stream of the session.
DROP = """
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  local n = string.match(field, '^x:(%d+)$')
  if n then redis.call('DEL', (string.gsub(KEYS[1], ':e$', ':x:' .. n))) end
end
redis.call('DEL', KEYS[1])
return 0
"""


class RedisEventStore:
    """Event buffers in Redis (see the module docstring)."""

    def __init__(self, link: RedisLink, config: MCPConfig, grace_s: float) -> None:
        self.link = link
        self.limits = limits = event_limits(config)
        self._max_age_ms = max(1, math.ceil(limits.max_age_s * 1000))
        #: the buffers live as long as their session may
        self.ttl_ms = max(1, math.ceil((config.session_idle_timeout_s + grace_s) * 1000))
        #: the bounds every append passes its script (events, bytes, age ms,
        #: the session's bytes, the TTL ms), in that order
        self._bounds = [
            limits.max_events,
            limits.max_bytes,
            self._max_age_ms,
            limits.max_session_bytes,
            self.ttl_ms,
        ]
        #: POST streams produced here: (session id, n) -> [tag, next seq, last seq]
        self._blocks: dict[tuple[str, int], list[Any]] = {}
        #: events numbered here, not yet in Redis: (session id, n, seq, data)
        self._unwritten: list[tuple[str, int, int, bytes]] = []
        self._wake = trio.Event()
        self._writing = trio.Lock()
        link.tasks.append(self._write_loop)

    async def append(self, session_id: str, stream: int, data: bytes, now: float) -> str:
        if stream:
            block = self._blocks.get((session_id, stream))
            if block is not None:
                tag, seq, last = block
                if seq <= last:
                    block[1] = seq + 1
                    self._unwritten.append((session_id, stream, seq, data))
                    self._wake.set()
                    return f"{tag}-{stream}-{seq}"
                del self._blocks[session_id, stream]
                await self.write()  # (what was numbered here goes first)
        keys, args = self._append_call(session_id, stream, data)
        tag, seq = await self.link.script("append", APPEND)(keys=keys, args=args)
        return f"{tag.decode()}-{stream}-{seq}"

    def closed_stream(self, session_id: str, stream: int) -> None:
        """POST stream `stream` has ended: number no more of its events here."""
        self._blocks.pop((session_id, stream), None)

    async def _write_loop(self) -> None:
        """Write the events numbered here, as they come, until cancelled."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            await self.write()

    async def write(self) -> None:
        """Put the events numbered here into Redis: one round trip for them all.
        Events that cannot be written (Redis is away) are marked lost there, so
        that a resume is told (410) rather than shown less."""
        async with self._writing:  # (a stream's events go in order)
            batch, self._unwritten = self._unwritten, []
            if not batch:
                return
            link = self.link
            args: list[Any] = [
                *self._bounds,
                secrets.token_hex(4),
                link.process_channel,
                link.key(),
            ]
            for session_id, stream, seq, data in batch:
                args += (session_id, stream, seq, data)
            try:
                await link.script("write", WRITE)(keys=[], args=args)
            except Exception as error:
                logger.warning("Redis: %d events not written: %r", len(batch), error)
                lost = {(s, n): seq for s, n, seq, _ in batch}
                with contextlib.suppress(Exception):
                    async with link.client.pipeline(transaction=False) as pipeline:
                        for (session_id, stream), seq in lost.items():
                            link.script("lost", LOST)(
                                keys=[link.session_key(session_id, "e")],
                                args=[stream, seq],
                                client=pipeline,
                            )

    async def append_many(
        self, session_ids: list[str], stream: int, data: bytes, now: float
    ) -> list[str]:
        """One pipeline for them all: one round trip (two when Redis must be
        given the script again)."""
        link = self.link
        script = link.script("append", APPEND)
        async with link.client.pipeline(transaction=False) as pipeline:
            for session_id in session_ids:
                keys, args = self._append_call(session_id, stream, data)
                script(keys=keys, args=args, client=pipeline)
        return [f"{tag.decode()}-{stream}-{seq}" for tag, seq in pipeline.results or ()]

    def _append_call(
        self, session_id: str, stream: int, data: bytes
    ) -> tuple[list[str], list[Any]]:
        """The keys and arguments of the append script."""
        link = self.link
        keys = [
            link.session_key(session_id, "e"),
            link.session_key(session_id, f"x:{stream}"),
            link.session_key(session_id, "holder"),
        ]
        args = [
            data,
            stream,
            *self._bounds,
            secrets.token_hex(4),
            link.process_channel,
            session_id,
            "",
        ]
        return keys, args

    def settle(self) -> None:
        pass

    async def replay(
        self, session_id: str, last_event_id: str, now: float
    ) -> tuple[int, list[StoredEvent]] | None:
        parsed = parse_event_id(last_event_id)
        if parsed is None:
            return None
        tag, stream, sequence = parsed
        link = self.link
        with answering_503(link):
            answer: list[Any] = await link.script("replay", REPLAY)(
                keys=[
                    link.session_key(session_id, "e"),
                    link.session_key(session_id, f"x:{stream}"),
                ],
                args=[stream, sequence, self._max_age_ms],
            )
        status = answer[0]
        if status == b"gone" or status == b"lost":
            raise EventsLost(stream)
        if status == b"none" or answer[1].decode() != tag:
            return None
        events = []
        last = sequence
        for entry_id, fields in answer[2]:
            last = int(entry_id.split(b"-", 1)[0])
            events.append(StoredEvent(f"{tag}-{stream}-{last}", fields[1]))
        # (the bus catches up from here once it holds or follows the stream)
        link.replayed[session_id, stream] = (last, tag)
        return stream, events

    async def drop_session(self, session_id: str) -> None:
        link = self.link
        await link.script("drop", DROP)(keys=[link.session_key(session_id, "e")], args=[])

    def prune(self, now: float) -> None:
        pass  # (Redis drops old events as it adds new ones, and the TTL does the rest)

    async def open_stream(self, session_id: str, request_ids: RequestIds | None = None) -> int:
        link = self.link
        ids = dumps(list(request_ids())) if request_ids is not None else b""
        opened, tag, first = await link.script("open_stream", OPEN_STREAM)(
            keys=[link.session_key(session_id, "e")],
            args=[
                self.ttl_ms,
                secrets.token_hex(4),
                SEQ_BLOCK,
                link.process_channel,
                LEASE_MS,
                ids,
            ],
        )
        self._blocks[session_id, opened] = [tag.decode(), first, first + SEQ_BLOCK - 1]
        return int(opened)

    def buffered_bytes(self) -> int:
        return 0  # (nothing is buffered in this process)

    def buffered_sessions(self) -> int:
        return 0
