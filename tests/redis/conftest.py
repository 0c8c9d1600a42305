from __future__ import annotations

from redis_fixtures import collect_coredis_leftovers, start_redis, start_replica  # noqa: F401
