from __future__ import annotations

from redis_fixtures import start_redis, start_replica  # noqa: F401
