"""The official Python and TypeScript clients' full interop tours against three
replicas behind nginx: a real redis-server, three ``trio-mcp run`` processes
of the everything example (each its own ``--owner-name``, one requestState
key ring, one Redis) and nginx with the deployed ``deploy/nginx-replicas.conf``.
The tours and their checks are tests/interop's, unchanged; only the URL is
nginx's."""

from __future__ import annotations

import pytest
from interop_tours import (
    check_python_tour,
    check_typescript_tour,
    needs_python_sdk,
    needs_ts_sdk,
    python_tour,
    typescript_tour,
)
from redis_fixtures import COREDIS_LEFTOVERS, StartRedis
from replica_fixtures import StartProxy, StartReplicaProcesses

pytestmark = pytest.mark.filterwarnings(COREDIS_LEFTOVERS)

TRANSPORTS = [("streamable", "/mcp"), ("sse", "/sse")]


async def nginx_in_front_of_replicas(
    start_redis: StartRedis,
    start_replica_processes: StartReplicaProcesses,
    start_proxy: StartProxy,
) -> int:
    redis = await start_redis()
    replicas = await start_replica_processes(redis.url)
    return await start_proxy("nginx", {name: r.port for name, r in replicas.items()})


@needs_python_sdk
@pytest.mark.parametrize(("transport", "path"), TRANSPORTS)
async def test_python_sdk_tour_through_nginx_to_three_replicas(
    start_redis: StartRedis,
    start_replica_processes: StartReplicaProcesses,
    start_proxy: StartProxy,
    transport: str,
    path: str,
) -> None:
    port = await nginx_in_front_of_replicas(start_redis, start_replica_processes, start_proxy)
    seen = await python_tour(f"http://127.0.0.1:{port}{path}", transport)
    check_python_tour(seen, transport)


@needs_ts_sdk
@pytest.mark.parametrize(("transport", "path"), TRANSPORTS)
async def test_typescript_sdk_tour_through_nginx_to_three_replicas(
    start_redis: StartRedis,
    start_replica_processes: StartReplicaProcesses,
    start_proxy: StartProxy,
    transport: str,
    path: str,
) -> None:
    port = await nginx_in_front_of_replicas(start_redis, start_replica_processes, start_proxy)
    seen = await typescript_tour(f"http://127.0.0.1:{port}{path}", transport)
    check_typescript_tour(seen, transport)
