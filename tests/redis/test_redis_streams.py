"""Event buffers and GET streams shared through a real redis-server: a GET
stream held on one replica hears the notifications another replica sends; a
client whose replica went away resumes on another with Last-Event-ID and
gets every event once, in order; a Redis restart keeps what AOF kept, tells
a resume what it lost otherwise, and the bus recovers by itself."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from _support import MCP, EventReader, connect
from redis_fixtures import (
    COREDIS_LEFTOVERS,
    EVENT_WAIT_S,
    RedisServer,
    StartRedis,
    StartReplica,
    alive_processes,
    get_request,
    next_message,
    open_get,
)

from trio_mcp import MCPConfig, Server
from trio_mcp._errors import EventsLost
from trio_mcp._stores._bus import Frame, frame_bytes
from trio_mcp._stores._redis import RedisLink
from trio_mcp._stores._redis_bus import RedisBus
from trio_mcp._stores._redis_events import RedisEventStore
from trio_mcp._stores._redis_posts import PostLeases

pytestmark = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)


async def two_replicas(
    start_redis: StartRedis, start_replica: StartReplica
) -> tuple[RedisServer, list[Server], int, int]:
    """A redis-server and two replicas on it: their apps, and their ports."""
    redis = await start_redis()
    apps = [Server("r1"), Server("r2")]
    one, two = [await start_replica(app, redis.url) for app in apps]
    return redis, apps, one, two


async def session_on(port: int) -> MCP:
    mcp = MCP(await connect(port))
    await mcp.initialize()
    return mcp


def changed(app: Server, times: int = 1) -> None:
    for _ in range(times):
        app.notify_tools_changed()


async def test_a_get_stream_hears_what_another_replica_sends_and_resumes_elsewhere(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    _redis, apps, one, two = await two_replicas(start_redis, start_replica)
    mcp = await session_on(two)  # (replica 2 made it: its notifications go to it)
    stream = await open_get(one, mcp)
    changed(apps[1], 2)
    seen = [await next_message(stream) for _ in range(2)]
    assert [m["method"] for _, m in seen] == ["notifications/tools/list_changed"] * 2
    # replica 1 goes away (its lease on the stream lapses by itself)
    start_replica.stop(one)
    await stream.client.stream.aclose()
    changed(apps[1], 3)  # (stored in Redis, heard by nobody)
    await trio.sleep(0.2)
    resumed = await open_get(two, mcp, last_event_id=seen[-1][0])
    changed(apps[1], 1)  # live, after the resume
    got = [await next_message(resumed) for _ in range(4)]
    ids = [event_id for event_id, _ in seen + got]
    sequences = [int(event_id.rsplit("-", 1)[1]) for event_id in ids]  # type: ignore[union-attr]
    assert sequences == sorted(set(sequences)), ids  # once each, in order
    assert len(got) == 4
    await resumed.client.stream.aclose()
    await mcp.client.stream.aclose()


async def until_it_ends(stream: EventReader) -> None:
    while True:
        await stream.message()


async def test_a_resume_elsewhere_takes_the_stream_over_from_its_holder(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    """A client that lost its GET stream resumes with Last-Event-ID on another
    replica while the first still holds the lease (it has not noticed yet; had
    it died, its lease would last up to 3 s more): the resume is answered at
    once, not 409 (which the official clients retry only twice, a second
    apart, then go without a stream), gets what it missed and what comes
    next, and the first replica's stream ends."""
    _redis, apps, one, two = await two_replicas(start_redis, start_replica)
    mcp = await session_on(two)
    stream = await open_get(one, mcp)
    changed(apps[1], 1)
    first = await next_message(stream)
    changed(apps[1], 2)  # (the client never reads these from replica 1)
    resumed = EventReader(await connect(two))
    with trio.fail_after(EVENT_WAIT_S):
        head = await resumed.head(get_request(mcp, last_event_id=first[0]))
    assert head.status_code == 200
    changed(apps[1], 1)
    got = [await next_message(resumed) for _ in range(3)]
    ids = [event_id for event_id, _ in [first, *got]]
    sequences = [int(event_id.rsplit("-", 1)[1]) for event_id in ids]  # type: ignore[union-attr]
    assert sequences == sorted(set(sequences)), ids  # once each, in order
    with trio.fail_after(EVENT_WAIT_S), pytest.raises(EOFError):
        await until_it_ends(stream)
    await resumed.client.stream.aclose()
    await stream.client.stream.aclose()
    await mcp.client.stream.aclose()


class Frames:
    """A GET stream's live end that keeps the event ids offered to it."""

    closed = False

    def __init__(self) -> None:
        self.ids: list[bytes] = []

    def offer(self, frame: Frame, now: float | None = None) -> bool:
        self.ids.append(frame_bytes(frame).split(b"\n", 1)[0].removeprefix(b"id: "))
        return True

    async def send(self, frame: Frame) -> bool:
        return self.offer(frame)

    def close(self) -> None:
        self.closed = True


async def test_a_live_event_during_the_catch_up_of_a_resume_waits_for_older_ones(
    start_redis: StartRedis,
) -> None:
    """A resume replays what Redis has, takes the stream, then reads what was
    added in between (the catch-up); an event that arrives live meanwhile (a
    newer one, published to the new holder) waits for those older ones, so
    neither is skipped."""
    redis = await start_redis()
    link = RedisLink(redis.url, "")
    bus = RedisBus(link, PostLeases(link, RedisEventStore(link, MCPConfig(), 0.0)))
    since = link.script

    def scripts(name: str, source: str) -> Any:
        script = since(name, source)
        if name != "since":
            return script

        async def first_a_live_event(**arguments: Any) -> Any:
            # (what the channel's handler does with event 7, published by the append)
            link.handlers[link.process_channel](b"s 7 t-0-7 " + b"{}")
            return await script(**arguments)

        return first_a_live_event

    link.script = scripts  # type: ignore[method-assign]
    async with link.opened():
        for seq in (6, 7):  # (added after the replay, which ended at 5)
            await link.client.xadd(
                link.events_key("s", "x:0"), {b"d": b"{}"}, identifier=f"{seq}-0"
            )
        stream = Frames()
        await bus.local.attach("s", stream)
        await bus.catch_up("s", 5, "t")
    assert stream.ids == [b"t-0-6", b"t-0-7"]


async def test_with_aof_a_redis_restart_keeps_the_events_and_the_bus_recovers(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis = await start_redis(aof=True)
    apps = [Server("r1"), Server("r2")]
    one, two = [await start_replica(app, redis.url) for app in apps]
    mcp = await session_on(two)
    stream = await open_get(one, mcp)
    changed(apps[1], 1)
    first = await next_message(stream)
    await stream.client.stream.aclose()
    changed(apps[1], 2)  # (sent while the client is away)
    probe = await open_get(one, mcp, last_event_id=first[0])  # (they are stored)
    missed = [await next_message(probe) for _ in range(2)]
    await probe.client.stream.aclose()
    redis.kill()  # SIGKILL
    await redis.start()
    resumed = await open_get(one, mcp, last_event_id=first[0])
    again = [await next_message(resumed) for _ in range(2)]
    assert [event_id for event_id, _ in again] == [event_id for event_id, _ in missed]
    # the bus recovers: an event sent from replica 2 reaches the stream on replica 1
    with trio.fail_after(EVENT_WAIT_S):
        while True:
            changed(apps[1], 1)
            with trio.move_on_after(0.5):
                _, message = await resumed.message()
                break
    assert message["method"] == "notifications/tools/list_changed"
    await resumed.client.stream.aclose()
    await mcp.client.stream.aclose()


async def test_without_persistence_a_resume_after_a_redis_restart_is_told_so(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis, apps, one, two = await two_replicas(start_redis, start_replica)
    mcp = await session_on(two)
    stream = await open_get(one, mcp)
    changed(apps[1], 1)
    first = await next_message(stream)
    await stream.client.stream.aclose()
    redis.kill()
    await redis.start()
    # the session and its events are gone: the client learns it must start again
    with trio.fail_after(EVENT_WAIT_S):
        while True:
            reader = EventReader(await connect(one))
            head = await reader.head(get_request(mcp, last_event_id=first[0]))
            await reader.client.stream.aclose()
            if head.status_code != 503:  # (while coredis reconnects)
                break
            await trio.sleep(0.1)
    assert head.status_code in (404, 410), head
    # the bus recovers: a new session's GET stream on replica 1 hears replica 2
    fresh = await session_on(two)
    stream = await open_get(one, fresh)
    with trio.fail_after(EVENT_WAIT_S):
        while True:
            changed(apps[1], 1)
            with trio.move_on_after(0.5):
                _, message = await stream.message()
                break
    assert message["method"] == "notifications/tools/list_changed"
    await stream.client.stream.aclose()
    await mcp.client.stream.aclose()
    await fresh.client.stream.aclose()


async def test_a_second_get_stream_anywhere_is_refused(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis = await start_redis()
    one, two = [await start_replica(Server(f"r{i}"), redis.url) for i in (1, 2)]
    mcp = await session_on(one)
    stream = await open_get(one, mcp)
    reader = EventReader(await connect(two))
    head = await reader.head(get_request(mcp))
    assert head.status_code == 409
    await reader.client.stream.aclose()
    await stream.client.stream.aclose()
    await mcp.client.stream.aclose()


async def test_a_broadcast_reaches_every_session_s_stream_on_another_replica(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    _redis, apps, one, two = await two_replicas(start_redis, start_replica)
    sessions = [await session_on(two) for _ in range(3)]
    streams = [await open_get(one, mcp) for mcp in sessions]
    changed(apps[1], 2)
    for stream in streams:
        got = [await next_message(stream) for _ in range(2)]
        assert [m["method"] for _, m in got] == ["notifications/tools/list_changed"] * 2
        sequences = [int(event_id.rsplit("-", 1)[1]) for event_id, _ in got]  # type: ignore[union-attr]
        assert sequences == sorted(set(sequences))
    for stream in streams:
        await stream.client.stream.aclose()
    for mcp in sessions:
        await mcp.client.stream.aclose()


async def test_a_notification_from_any_replica_reaches_each_session_once(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    _redis, apps, one, two = await two_replicas(start_redis, start_replica)
    made_on_two, made_on_one = await session_on(two), await session_on(one)
    # both GET streams on replica 1: one of a session it made, one of replica 2's
    streams = [await open_get(one, made_on_two), await open_get(one, made_on_one)]
    sent = [
        (apps[0].notify_tools_changed, "notifications/tools/list_changed"),
        (apps[1].notify_prompts_changed, "notifications/prompts/list_changed"),
        (apps[0].notify_resources_changed, "notifications/resources/list_changed"),
    ]
    for notify, method in sent:
        notify()
        for stream in streams:  # (a second copy of the one before would come first)
            _, message = await next_message(stream)
            assert message["method"] == method
    for stream in streams:
        await stream.client.stream.aclose()
    for mcp in (made_on_two, made_on_one):
        await mcp.client.stream.aclose()


async def test_a_session_whose_maker_is_gone_hears_the_others_on_its_stream(
    start_redis: StartRedis, start_replica: StartReplica
) -> None:
    redis, apps, one, two = await two_replicas(start_redis, start_replica)
    mcp = await session_on(two)
    stream = await open_get(one, mcp)
    assert await alive_processes(redis.url) == 2
    start_replica.stop(two)  # (its maker: replica 1 holds its GET stream, and adopts it)
    with trio.fail_after(10):
        while await alive_processes(redis.url) != 1:
            await trio.sleep(0.05)
    apps[0].notify_tools_changed()
    apps[0].notify_prompts_changed()
    got = [(await next_message(stream))[1]["method"] for _ in range(2)]
    assert got == ["notifications/tools/list_changed", "notifications/prompts/list_changed"]
    await stream.client.stream.aclose()
    await mcp.client.stream.aclose()


async def test_post_streams_dropped_whole_leave_no_field_each_and_resume_as_lost(
    start_redis: StartRedis,
) -> None:
    # (a long session's many SSE answers: its event hash stays bounded, and
    # a resume of a stream the byte bound dropped is told so, 410)
    redis = await start_redis()
    link = RedisLink(redis.url, "")
    config = MCPConfig(event_buffer_session_bytes=4096)
    events = RedisEventStore(link, config, 0.0)
    async with link.opened():
        first_ids = []
        for _ in range(60):
            number = await events.open_stream("s")
            first_ids.append(await events.append("s", number, b"", 0.0))
            await events.append("s", number, b"x" * 300, 0.0)
        await events.write()
        fields = await link.client.hkeys(link.events_key("s", "e"))
        # (the streams still kept: at most the bound over the smallest stream)
        assert len(fields) < 4 + 3 * (4096 // 300), fields
        with pytest.raises(EventsLost):
            await events.replay("s", first_ids[0], 0.0)
        found = await events.replay("s", first_ids[-1], 0.0)
        assert found is not None and [e.data for e in found[1]] == [b"x" * 300]
