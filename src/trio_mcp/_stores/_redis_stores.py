"""`redis_stores`: the four stores for ``MCPConfig.redis_url`` (``_redis.py``
says what is shared and how)."""

from __future__ import annotations

from collections.abc import Callable

from .._config import MCPConfig
from .._protocol._sessions import new_session_id
from ._redis import RedisLink
from ._redis_broadcast import RedisBroadcast
from ._redis_bus import RedisBus
from ._redis_events import RedisEventStore
from ._redis_posts import PostLeases
from ._redis_requests import RedisRequestRegistry
from ._redis_sessions import RedisSessionStore
from ._stores import Stores


def redis_stores(
    config: MCPConfig,
    grace_s: float,
    principal_key: Callable[[object], str],
    new_id: Callable[[], str] = new_session_id,
) -> Stores:
    """The four stores on Redis with `config`'s bounds (a `Stores`, shared);
    `new_id` mints session ids."""
    link = RedisLink(config.redis_url, config.redis_password)
    sessions = RedisSessionStore(link, config, grace_s, principal_key, new_id)
    events = RedisEventStore(link, config, grace_s)
    bus = RedisBus(link, PostLeases(link, events))
    sessions.held = bus.attached
    return Stores(
        sessions,
        events,
        bus,
        RedisRequestRegistry(
            link, config.max_requests_per_session, config.max_client_requests_per_session
        ),
        shared=True,
        opened=link.opened,
        broadcast=RedisBroadcast(link, config.peer_broadcast_queue_bytes),
    )
