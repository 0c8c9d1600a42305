"""Test stores that copy on every read and wait on every call that may wait.

They wrap the memory stores and behave as a store in another process would:
a record the endpoint got is never the one the store keeps (so a change the
endpoint makes to it, instead of asking the store, is lost and a test fails),
every async call reaches a checkpoint before it answers (so other tasks run
in between, as they would while a network store answers), and the
``*_nowait`` calls always raise ``trio.WouldBlock`` (so the endpoint's slow
paths run). The endpoint's tests run against these as well as the memory
stores (the ``start_mcp`` fixture).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import trio

from trio_mcp._config import MCPConfig
from trio_mcp._protocol._sessions import Session
from trio_mcp._stores._bus import Listening, Producer, Subscriber
from trio_mcp._stores._events import StoredEvent
from trio_mcp._stores._stores import Stores, memory_stores


def _copy(session: Session | None) -> Session | None:
    return None if session is None else session.copy()


class CopyingSessionStore:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # what tests read of the memory store
        return getattr(self.inner, name)

    def tick(self, now: float) -> None:
        self.inner.tick(now)

    async def create(self, *args: Any, **kwargs: Any) -> Session:
        await trio.lowlevel.checkpoint()
        session = await self.inner.create(*args, **kwargs)
        return session.copy()

    def create_nowait(self, *args: Any, **kwargs: Any) -> Session:
        raise trio.WouldBlock

    async def get(self, session_id: str) -> Session | None:
        await trio.lowlevel.checkpoint()
        return _copy(await self.inner.get(session_id))

    def get_nowait(self, session_id: str) -> Session | None:
        raise trio.WouldBlock

    async def update(self, *args: Any) -> None:
        await trio.lowlevel.checkpoint()
        await self.inner.update(*args)

    async def set_log_level(self, session_id: str, level: str) -> None:
        await trio.lowlevel.checkpoint()
        await self.inner.set_log_level(session_id, level)

    async def subscribe(self, session_id: str, uri: str) -> None:
        await trio.lowlevel.checkpoint()
        await self.inner.subscribe(session_id, uri)

    async def unsubscribe(self, session_id: str, uri: str) -> None:
        await trio.lowlevel.checkpoint()
        await self.inner.unsubscribe(session_id, uri)

    async def delete(self, session_id: str) -> bool:
        await trio.lowlevel.checkpoint()
        deleted: bool = await self.inner.delete(session_id)
        return deleted

    async def touch(self, session_ids: Iterable[str]) -> None:
        await trio.lowlevel.checkpoint()
        await self.inner.touch(list(session_ids))

    async def expire(self) -> list[str]:
        await trio.lowlevel.checkpoint()
        expired: list[str] = await self.inner.expire()
        return expired

    async def audience(self, uri: str | None) -> list[Session]:
        await trio.lowlevel.checkpoint()
        return [session.copy() for session in await self.inner.audience(uri)]

    def count(self) -> int:
        count: int = self.inner.count()
        return count


class AwaitingEventStore:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def append(self, session_id: str, stream: int, data: bytes, now: float) -> str:
        await trio.lowlevel.checkpoint()
        event_id: str = await self.inner.append(session_id, stream, data, now)
        return event_id

    def append_nowait(self, session_id: str, stream: int, data: bytes, now: float) -> str:
        raise trio.WouldBlock

    def open_stream_nowait(self, session_id: str, request_ids: Any = None) -> int:
        raise trio.WouldBlock

    async def append_many(
        self, session_ids: list[str], stream: int, data: bytes, now: float
    ) -> list[str]:
        await trio.lowlevel.checkpoint()
        event_ids: list[str] = await self.inner.append_many(list(session_ids), stream, data, now)
        return event_ids

    def settle(self) -> None:
        self.inner.settle()

    async def replay(
        self, session_id: str, last_event_id: str, now: float
    ) -> tuple[int, list[StoredEvent]] | None:
        await trio.lowlevel.checkpoint()
        found = await self.inner.replay(session_id, last_event_id, now)
        return None if found is None else (found[0], list(found[1]))

    async def drop_session(self, session_id: str) -> None:
        await trio.lowlevel.checkpoint()
        await self.inner.drop_session(session_id)

    def prune(self, now: float) -> None:
        self.inner.prune(now)

    async def open_stream(self, session_id: str, request_ids: Any = None) -> int:
        await trio.lowlevel.checkpoint()
        number: int = await self.inner.open_stream(session_id, request_ids)
        return number

    def buffered_bytes(self) -> int:
        buffered: int = self.inner.buffered_bytes()
        return buffered


class AwaitingBus:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def attach(self, session_id: str, subscriber: Subscriber) -> bool:
        await trio.lowlevel.checkpoint()
        attached: bool = await self.inner.attach(session_id, subscriber)
        return attached

    async def take_over(self, session_id: str, subscriber: Subscriber) -> None:
        await trio.lowlevel.checkpoint()
        await self.inner.take_over(session_id, subscriber)

    async def send(self, session_id: str, event_id: str, data: bytes, now: float) -> None:
        await trio.lowlevel.checkpoint()
        await self.inner.send(session_id, event_id, data, now)

    async def deliver(
        self, session_ids: list[str], event_ids: list[str], data: bytes, now: float
    ) -> None:
        await trio.lowlevel.checkpoint()
        await self.inner.deliver(list(session_ids), list(event_ids), data, now)

    async def resume(self, session_id: str, number: int, subscriber: Subscriber) -> bool:
        await trio.lowlevel.checkpoint()
        resumed: bool = await self.inner.resume(session_id, number, subscriber)
        return resumed

    def producing(self, session_id: str, number: int, producer: Producer) -> None:
        self.inner.producing(session_id, number, producer)

    def listen(self, listener: Listening) -> None:
        self.inner.listen(listener)


def copying_stores(config: MCPConfig) -> Stores:
    """The memory stores for `config`, each behind its copying, waiting twin."""
    from trio_mcp._mcp._fanout import sweep_interval_s

    memory = memory_stores(config, grace_s=2 * sweep_interval_s(config))
    return Stores(
        CopyingSessionStore(memory.sessions),  # type: ignore[arg-type]
        AwaitingEventStore(memory.events),  # type: ignore[arg-type]
        AwaitingBus(memory.bus),  # type: ignore[arg-type]
        memory.requests,
    )
