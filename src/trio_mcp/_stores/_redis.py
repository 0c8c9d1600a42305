"""The stores on Redis (``MCPConfig.redis_url``): what every process given the
same URL shares, and the one connection they share it through.

`RedisLink` owns the client (coredis, which runs on trio through anyio), the
Lua scripts, and this process's one pub/sub subscription, which carries what
the stores publish to each other: a session record changed or ended
somewhere (``<prefix>:changed``), events for the GET streams this process
holds (``<prefix>:process:<its id>``), answers to the requests it sent
clients and cancellations (``_redis_requests.py``), the application's
notifications to every session (``<prefix>:broadcast``,
``_redis_broadcast.py``). coredis's pub/sub iterator can end silently when
Redis restarts; `RedisLink.listen` loops around it, and the stores poll what
matters on each sweep as well, so a lost subscription costs freshness for a
moment, never correctness.

Keys: ``<prefix>:{<session id>}:<kind>`` for what belongs to one session
(one hash tag, so Redis Cluster would keep a session's keys on one node;
its events' keys also name their layout, `EVENTS_LAYOUT`),
and a few keys shared by all (``<prefix>:sessions``, the index of live
sessions; ``<prefix>:owner:<owner>``, one client's share; ``<prefix>:uri:<uri>``,
the sessions subscribed to a resource). The scripts reach the shared keys
beside a session's own, which a single Redis (or a replicated one with
Sentinel) allows and Redis Cluster does not: Cluster is not supported yet.

``_redis_stores.py`` builds the four stores; `Stores.opened` connects them
while the endpoint runs.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Final

import trio

from .._errors import MCPError, Rejection, StartupError
from .._protocol._jsonrpc import INTERNAL_ERROR

logger = logging.getLogger("trio_mcp.redis")

#: What every key starts with.
PREFIX: Final = "trio-mcp"
#: The layout of a session's event keys (``_redis_events.py``), part of their
#: names (``<prefix>:{<id>}:v2:e``): a version that lays them out otherwise
#: names them anew, so that during a rolling upgrade across the change
#: neither version reads the other's (a resume there is told its events are
#: gone, 410), where reading them would misread them. 2 since 2026-12-05 (one
#: lease per producing process, a POST stream's event count in ``b:<n>``);
#: the layout before had no version in its names.
EVENTS_LAYOUT: Final = "v2"
#: How long a connection attempt or one command may take before it fails.
TIMEOUT_S: Final = 5.0
#: Between two attempts to subscribe again after the subscription ended.
RESUBSCRIBE_S: Final = 0.5
#: How long leaving the subscription may take when the endpoint stops.
STOP_S: Final = 2.0

Handler = Callable[[bytes], None]


@contextlib.contextmanager
def answering_503(link: RedisLink) -> Iterator[None]:
    """Redis unreachable (restarting, say) is a 503 with ``Retry-After``, not a 500."""
    try:
        yield
    except (OSError, link.coredis.exceptions.RedisError) as error:
        logger.warning("Redis: %s", error)
        raise Rejection(
            503,
            MCPError(INTERNAL_ERROR, "Service Unavailable: the session store is unreachable"),
            [(b"retry-after", b"1")],
        ) from None


def coredis_module() -> Any:
    """coredis, or the one-line StartupError that says how to install it."""
    try:
        import coredis
    except ImportError:
        raise StartupError("redis_url needs coredis: pip install 'trio-mcp[redis]'") from None
    return coredis


class RedisLink:
    """The Redis client of this process, its scripts and its subscription."""

    def __init__(self, url: str, password: str) -> None:
        self.coredis = coredis_module()
        parts = urllib.parse.urlsplit(url)
        self._client_args: dict[str, Any] = {
            "host": parts.hostname,
            "port": parts.port or 6379,
            "db": int(parts.path.strip("/") or 0),
            "username": urllib.parse.unquote(parts.username) if parts.username else None,
            "password": password or None,
            "ssl": parts.scheme == "rediss",
            "connect_timeout": TIMEOUT_S,
            "stream_timeout": TIMEOUT_S,
            "decode_responses": False,
        }
        #: This process's name among those sharing the Redis (random, for its channel).
        self.process = secrets.token_hex(6)
        self.client: Any = None
        #: channel -> what a message on it goes to
        self.handlers: dict[bytes, Handler] = {}
        self._scripts: dict[str, Any] = {}
        #: Set whenever the subscription is (again) in place: a store that
        #: may have missed messages in between catches up.
        self.resubscribed: list[Callable[[], None]] = []
        self._stopping = False
        #: What the listener waits in (cancelled when `opened` ends).
        self._receiving = trio.CancelScope()
        self._shield = trio.CancelScope(shield=True)
        self._stop = trio.Event()
        #: What runs beside the subscription while connected (the bus's renewals).
        self.tasks: list[Callable[[], Awaitable[None]]] = []
        #: Streams (session id, number) just replayed: the newest sequence
        #: replayed and the session's event tag (the bus catches up from it).
        self.replayed: dict[tuple[str, int], tuple[int, str]] = {}
        #: Why the connection could not be made (raised by `opened`).
        self._failed: StartupError | None = None

    def key(self, *parts: str) -> str:
        return ":".join((PREFIX, *parts))

    def session_key(self, session_id: str, kind: str) -> str:
        return f"{PREFIX}:{{{session_id}}}:{kind}"

    def events_key(self, session_id: str, kind: str) -> str:
        """A key of the session's events (``e``, ``x:<n>``, ``xs``), in `EVENTS_LAYOUT`."""
        return f"{PREFIX}:{{{session_id}}}:{EVENTS_LAYOUT}:{kind}"

    @property
    def process_channel(self) -> bytes:
        return f"{PREFIX}:process:{self.process}".encode()

    def script(self, name: str, source: str) -> Any:
        """The script `source` registered once (coredis runs it by EVALSHA)."""
        found = self._scripts.get(name)
        if found is None:
            found = self._scripts[name] = self.client.register_script(source)
        return found

    @contextlib.asynccontextmanager
    async def opened(self) -> AsyncIterator[RedisLink]:
        """Connected, and subscribed in the background, until the block ends.

        The client and its subscription live in a task shielded from the
        endpoint's cancellation, which breaks coredis's own clean-up (its
        connections' tasks would be cancelled mid-close); leaving the block
        stops them in order, within STOP_S."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self._hold)
            if self._failed is None:
                try:
                    yield self
                finally:
                    self._stopping = True
                    self._receiving.cancel()
                    self._stop.set()
                    self._shield.deadline = trio.current_time() + STOP_S
        if self._failed is not None:
            raise self._failed

    async def _hold(self, *, task_status: trio.TaskStatus[None]) -> None:
        with self._shield:
            # (a first TCP connection of our own: coredis leaves a failed one's
            # buffers unclosed, which warns much later, somewhere else)
            try:
                with trio.fail_after(TIMEOUT_S):
                    probe = await trio.open_tcp_stream(
                        self._client_args["host"], self._client_args["port"]
                    )
            except (OSError, trio.TooSlowError) as error:
                self._failed = StartupError(f"cannot reach Redis at {self.describe()}: {error}")
                task_status.started()
                return
            await probe.aclose()
            async with self.coredis.Redis(**self._client_args) as client:
                self.client = client
                try:
                    with trio.fail_after(TIMEOUT_S):
                        await client.ping()
                except (OSError, trio.TooSlowError, self.coredis.exceptions.RedisError) as error:
                    self._failed = StartupError(f"cannot reach Redis at {self.describe()}: {error}")
                    task_status.started()
                    return
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.listen)
                    async with trio.open_nursery() as chore_nursery:
                        for chore in self.tasks:
                            chore_nursery.start_soon(chore)
                        task_status.started()
                        await self._stop.wait()
                        chore_nursery.cancel_scope.cancel()
            self.client = None

    def _handle(self, channel: bytes, data: bytes) -> None:
        """One message to its handler; one that fails is logged, and the next goes."""
        handler = self.handlers.get(channel)
        if handler is not None:
            try:
                handler(data)
            except Exception:
                logger.exception("a Redis message on %s failed", channel.decode("latin-1"))

    def describe(self) -> str:
        args = self._client_args
        return f"{args['host']}:{args['port']}/{args['db']}"

    async def listen(self, *, task_status: trio.TaskStatus[None]) -> None:
        """Deliver this process's messages until `opened` ends, subscribing
        again whenever the subscription ends (coredis's iterator ends silently
        when Redis restarts)."""
        started = False
        while not self._stopping:
            try:
                async with self.client.pubsub(
                    channels=list(self.handlers), ignore_subscribe_messages=True
                ) as pubsub:
                    if not started:
                        started = True
                        task_status.started()
                    for caught_up in self.resubscribed:
                        caught_up()
                    with self._receiving:
                        async for message in pubsub:
                            if message["type"] == "message":
                                self._handle(message["channel"], message["data"])
                    self._receiving = trio.CancelScope()
            except (OSError, self.coredis.exceptions.RedisError) as error:
                logger.warning("Redis subscription lost (%s); subscribing again", error)
            if not started:  # (Redis answered PING a moment ago: keep trying)
                started = True
                task_status.started()
            if not self._stopping:
                with self._receiving:
                    await trio.sleep(RESUBSCRIBE_S)
                self._receiving = trio.CancelScope()
