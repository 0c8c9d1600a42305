"""The memory stores keep the contracts their seams write down (``_stores/``)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from trio_mcp._errors import SessionsFull
from trio_mcp._protocol._jsonrpc import RPCResponse
from trio_mcp._stores._bus import Frame, MemoryBus, frame_bytes
from trio_mcp._stores._requests import BEGUN, ID_IN_USE, TOO_MANY, MemoryRequestRegistry
from trio_mcp._stores._sessions import MemorySessionStore


class Scope:
    def __init__(self) -> None:
        self.cancel_called = False

    def cancel(self) -> None:
        self.cancel_called = True


class Waiter:
    def __init__(self) -> None:
        self.responses: list[RPCResponse] = []

    def resolve(self, response: RPCResponse) -> None:
        self.responses.append(response)


class Stream:
    """A subscriber that takes `room` frames, then says it is closed."""

    def __init__(self, room: int = 100) -> None:
        self.frames: list[Frame] = []
        self.room = room
        self.closed = False

    def offer(self, frame: Frame, now: float | None = None) -> bool:
        if self.closed or len(self.frames) >= self.room:
            self.closed = True
            return False
        self.frames.append(frame)
        return True

    async def send(self, frame: Frame) -> bool:
        return self.offer(frame)

    def close(self) -> None:
        self.closed = True


def test_a_running_id_is_refused_until_it_ends() -> None:
    registry = MemoryRequestRegistry(max_running=8, max_waiting=8)
    first, second = Scope(), Scope()
    assert registry.begin("s", 1, first) == BEGUN
    assert registry.begin("s", 1, second) == ID_IN_USE
    assert registry.begin("t", 1, second) == BEGUN  # another session's ids are its own
    assert registry.busy() == {"s", "t"}
    assert registry.running() == 2
    registry.end("s", 1)
    assert registry.begin("s", 1, first) == BEGUN
    registry.end("s", 1)
    registry.end("t", 1)
    registry.end("unknown", 1)  # nothing to end: nothing happens
    assert registry.busy() == set()


def test_cancel_names_one_running_request_and_release_all() -> None:
    registry = MemoryRequestRegistry(max_running=8, max_waiting=8)
    scopes = [Scope() for _ in range(3)]
    for request_id, scope in zip((1, "two", 3), scopes, strict=True):
        assert registry.begin("s", request_id, scope) == BEGUN
    for hostile in ([1], None, 1.0, {"id": 1}):
        registry.cancel("s", hostile)  # not an id: ignored
    registry.cancel("s", "two")
    registry.cancel("other", 1)
    assert [s.cancel_called for s in scopes] == [False, True, False]
    registry.release("s")
    assert all(s.cancel_called for s in scopes)
    assert registry.busy() == set() and registry.running() == 0


def test_requests_to_the_client_get_ids_never_reused_while_the_session_lives() -> None:
    registry = MemoryRequestRegistry(max_running=8, max_waiting=8)
    waiter = Waiter()
    first = registry.expect("s", waiter)
    registry.forget("s", first)
    second = registry.expect("s", waiter)
    assert second > first
    registry.answer("s", RPCResponse(first, {}))  # forgotten: nobody waits
    registry.answer("s", RPCResponse(str(second), {}))  # not our kind of id
    registry.answer("t", RPCResponse(second, {}))  # another session's
    assert waiter.responses == []
    answer = RPCResponse(second, {"ok": True})
    registry.answer("s", answer)
    assert waiter.responses == [answer]


def test_a_session_runs_and_waits_for_its_quota_at_most() -> None:
    registry = MemoryRequestRegistry(max_running=2, max_waiting=2)
    assert [registry.begin("s", id, Scope()) for id in (1, 2, 3)] == [BEGUN, BEGUN, TOO_MANY]
    assert registry.begin("t", 1, Scope()) == BEGUN  # a quota per session
    registry.end("s", 1)
    assert registry.begin("s", 3, Scope()) == BEGUN
    assert registry.begin("s", 2, Scope()) == ID_IN_USE  # (in use comes first)
    waiter = Waiter()
    first, second = registry.expect("s", waiter), registry.expect("s", waiter)
    assert first is not None and second is not None
    assert registry.expect("s", waiter) is None
    assert registry.expect("t", waiter) is not None
    registry.forget("s", first)
    assert registry.expect("s", waiter) is not None


async def test_one_standalone_stream_per_session() -> None:
    bus = MemoryBus()
    one, two = Stream(), Stream()
    assert await bus.attach("s", one)
    assert not await bus.attach("s", two)
    assert bus.stream_of("s") is one and bus.attached() == ["s"]
    bus.detach("s", two)  # not the one attached: nothing happens
    assert bus.stream_of("s") is one
    bus.detach("s", one)
    assert bus.stream_of("s") is None
    assert await bus.attach("s", two)


async def test_a_broadcast_reaches_each_stream_under_its_own_id_and_drops_the_slow() -> None:
    bus = MemoryBus()
    fast, slow = Stream(), Stream(room=0)
    await bus.attach("a", fast)
    await bus.attach("b", slow)
    await bus.deliver(["a", "b", "c"], ["a-0-1", "b-0-1", "c-0-1"], b'{"x":1}', now=1.0)
    assert [frame_bytes(frame) for frame in fast.frames] == [
        b'id: a-0-1\nevent: message\ndata: {"x":1}\n\n'
    ]
    assert slow.closed and bus.stream_of("b") is None  # it must resume
    await bus.send("a", "a-0-2", b"two", now=2.0)
    await bus.send("nobody", "n-0-1", b"dropped", now=2.0)
    assert len(fast.frames) == 2


async def test_resume_takes_over_a_post_stream_only_while_it_is_produced() -> None:
    bus = MemoryBus()
    taken: list[Stream] = []

    class Producer:
        def attach(self, subscriber: Stream) -> None:
            taken.append(subscriber)

    resumed = Stream()
    bus.producing("s", 3, Producer())  # type: ignore[arg-type]
    assert await bus.resume("s", 3, resumed)
    assert taken == [resumed]
    bus.produced("s", 3)
    assert not await bus.resume("s", 3, Stream())
    bus.producing("s", 4, Producer())  # type: ignore[arg-type]
    await bus.attach("s", standalone := Stream())
    bus.release("s")
    assert standalone.closed and not await bus.resume("s", 4, Stream())


async def test_the_session_store_answers_at_once_or_after_a_wait_alike() -> None:
    store = MemorySessionStore(max_sessions=2, idle_timeout_s=10.0)
    store.tick(0.0)
    made = store.create_nowait("alice", "2025-11-25", {"roots": {}}, {"name": "c"})
    assert store.get_nowait(made.id) is await store.get(made.id) is made
    await store.set_log_level(made.id, "error")
    await store.subscribe(made.id, "x://1")
    assert (made.log_level, made.subscriptions) == ("error", {"x://1"})
    assert await store.audience("x://1") == [made]
    await store.unsubscribe(made.id, "x://1")
    assert await store.audience("x://1") == [] and await store.audience(None) == [made]
    other = await store.create(None, "2024-11-05", {}, {})
    await store.update(other.id, "2025-06-18", {"sampling": {}}, {"name": "late"})
    assert other.protocol_version == "2025-06-18"
    with pytest.raises(SessionsFull):
        store.create_nowait(None, "2025-11-25", {}, {})
    assert await store.delete(made.id) is True
    assert await store.delete(made.id) is False  # one caller releases it
    assert store.count() == 1


async def test_expiry_is_reported_once_and_touching_keeps_a_session() -> None:
    store = MemorySessionStore(max_sessions=4, idle_timeout_s=10.0)
    store.tick(0.0)
    busy = await store.create(None, "2025-11-25", {}, {})
    idle = await store.create(None, "2025-11-25", {}, {})
    for now in (5.0, 10.0, 15.0):
        store.tick(now)
        await store.touch([busy.id])
    assert await store.expire() == [idle.id]
    assert await store.expire() == []
    assert await store.get(idle.id) is None
    assert await store.get(busy.id) is busy


async def test_the_memory_stores_never_wait() -> None:
    # (their async calls answer without a checkpoint: the endpoint's fast path)
    store = MemorySessionStore(max_sessions=1, idle_timeout_s=10.0)
    with trio.testing.assert_no_checkpoints():
        session = await store.create(None, "2025-11-25", {}, {})
        assert await store.get(session.id) is session
        assert await MemoryBus().attach("s", Stream())
