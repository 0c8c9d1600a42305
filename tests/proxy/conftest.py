from __future__ import annotations

from nginx_fixtures import start_mcp_upstream, start_nginx  # noqa: F401
from redis_fixtures import collect_coredis_leftovers, start_redis  # noqa: F401
from replica_fixtures import start_proxy, start_replica_processes, start_replicas  # noqa: F401
