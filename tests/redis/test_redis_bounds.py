"""The Redis event store keeps the memory store's bounds, event for event: the
same appends (GET stream and POST streams, written one by one or in batches
of many streams) leave the same events to replay and the same losses (410)
under the count, byte and session-byte bounds, checked for every event id
handed out, against a real redis-server. (One difference, on the safe side:
see `test_the_bounds_drop_what_the_memory_store_drops`.)"""

from __future__ import annotations

import random

import pytest
from redis_fixtures import COREDIS_LEFTOVERS, StartRedis

from trio_mcp import MCPConfig
from trio_mcp._errors import EventsLost
from trio_mcp._protocol._events import EVENT_OVERHEAD, EventLimits
from trio_mcp._stores._events import MemoryEventStore
from trio_mcp._stores._redis import RedisLink
from trio_mcp._stores._redis_events import RedisEventStore
from trio_mcp._stores._stores import event_limits

pytestmark = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)

Outcome = str | list[bytes] | None


async def outcome(store: MemoryEventStore | RedisEventStore, event_id: str) -> Outcome:
    """What a resume from `event_id` gets: "lost" (410), the data after it, or None."""
    try:
        found = await store.replay("s", event_id, 0.0)
    except EventsLost:
        return "lost"
    return None if found is None else [event.data for event in found[1]]


@pytest.mark.parametrize("seed", range(6))
async def test_the_bounds_drop_what_the_memory_store_drops(
    start_redis: StartRedis, seed: int
) -> None:
    redis = await start_redis()
    link = RedisLink(redis.url, "")
    per_event = 40 + EVENT_OVERHEAD
    config = MCPConfig(
        event_buffer_events=4,
        event_buffer_bytes=120,
        event_buffer_session_bytes=9 * per_event,
    )
    limits = event_limits(config)
    assert limits == EventLimits(4, 120, limits.max_age_s, 9 * per_event)
    memory = MemoryEventStore(limits)
    events = RedisEventStore(link, config, 0.0)
    rng = random.Random(seed)
    # (event ids of both stores, side by side: stream, memory id, Redis id)
    issued: list[tuple[int, str, str]] = []
    async with link.opened():
        streams = [0]  # (those still produced)

        async def append(stream: int, data: bytes) -> None:
            if stream == 0:
                # (the GET stream's events go to Redis at once, those numbered
                # here later: the same order for both stores takes a write)
                await events.write()
            memory_id = await memory.append("s", stream, data, 0.0)
            issued.append((stream, memory_id, await events.append("s", stream, data, 0.0)))

        for step in range(120):
            if rng.random() < 0.2 and len(streams) < 30:
                opened = await events.open_stream("s")
                assert opened == await memory.open_stream("s")
                streams.append(opened)
                await append(opened, b"")  # (a priming event: streams begin in order)
            stream = rng.choice(streams[-4:] + [0])
            await append(stream, b"%d:" % step + b"x" * rng.choice((0, 5, 30, 40, 70)))
            if rng.random() < 0.3:
                await events.write()  # (else the next write takes a bigger batch)
            if stream and rng.random() < 0.1:
                events.closed_stream("s", stream)
                streams.remove(stream)
        await events.write()
        watermark = int(await link.client.hget(link.session_key("s", "e"), "lw") or 0)
        lost = 0
        for stream, memory_id, redis_id in issued:
            expected = await outcome(memory, memory_id)
            got = await outcome(events, redis_id)
            # (the one difference: of a POST stream dropped whole, Redis keeps
            # only the watermark, not its last event, so a resume from that
            # last event is told of a loss too; never the reverse)
            if got != expected:
                assert got == "lost" and 0 < stream <= watermark, (stream, memory_id, got)
            lost += expected == "lost"
        assert 0 < lost < len(issued)  # (the bounds did drop, and not everything)


async def test_a_post_stream_dropped_whole_then_written_again_tells_a_resume_of_its_loss(
    start_redis: StartRedis,
) -> None:
    redis = await start_redis()
    link = RedisLink(redis.url, "")
    config = MCPConfig(event_buffer_session_bytes=4 * (100 + EVENT_OVERHEAD))
    events = RedisEventStore(link, config, 0.0)
    memory = MemoryEventStore(event_limits(config))
    async with link.opened():
        for store in (events, memory):
            slow = await store.open_stream("s")
            first = await store.append("s", slow, b"a" * 100, 0.0)
            await store.append("s", slow, b"a" * 100, 0.0)
            for _ in range(3):  # (other streams push the slow one out, whole)
                other = await store.open_stream("s")
                await store.append("s", other, b"b" * 100, 0.0)
            later = await store.append("s", slow, b"c" * 10, 0.0)
            if store is events:
                await events.write()
            with pytest.raises(EventsLost):
                await store.replay("s", first, 0.0)
            found = await store.replay("s", later, 0.0)
            assert found is not None and found[1] == []
