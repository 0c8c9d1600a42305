"""Three replicas behind nginx and HAProxy, configured with the deployed files
(deploy/nginx-replicas.conf, deploy/haproxy.cfg): the requests of a session
reach the replica that owns it, on new connections and for the 2024-11-05
transport's POSTs too; requests without a session spread over the replicas;
and when the owner is gone, with no shared store, another replica answers 404
(the client starts a new session), never a 5xx or a hang. With Redis, any
replica serves any session: round robin works, and a gone owner's session
goes on elsewhere."""

from __future__ import annotations

import orjson
import pytest
import trio
from _support import (
    SSE_GET,
    EventReader,
    connect,
    initialize_body,
    mcp_post,
    sse_messages,
    tool_call,
)
from redis_fixtures import COREDIS_LEFTOVERS, StartRedis
from replica_fixtures import NAMES, StartProxy, StartReplicas

VERSION = "2025-11-25"
PROXIES = ("nginx", "haproxy")


async def exchange(port: int, data: bytes):
    async with await connect(port) as client:
        await client.send(data)
        with trio.fail_after(10):
            return await client.read_reply()


async def initialize(port: int) -> str:
    reply = await exchange(port, mcp_post(initialize_body(VERSION)))
    assert reply.status == 200, reply.body
    session = reply.header(b"mcp-session-id").decode()
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = await exchange(port, mcp_post(initialized, session=session, version=VERSION))
    assert done.status == 202, done.body
    return session


def answer_text(reply) -> str:
    if reply.header(b"content-type") == b"text/event-stream":
        message = sse_messages(reply.body)[-1]
    else:
        message = orjson.loads(reply.body)
    return message["result"]["content"][0]["text"]


async def whoami(port: int, session: str, id: int = 1):
    return await exchange(
        port, mcp_post(tool_call("whoami", id=id), session=session, version=VERSION)
    )


@pytest.mark.parametrize("proxy", PROXIES)
async def test_a_sessions_requests_reach_its_owner(
    proxy: str, start_replicas: StartReplicas, start_proxy: StartProxy
) -> None:
    replicas = await start_replicas()
    port = await start_proxy(proxy, {name: r.port for name, r in replicas.items()})
    owners = set()
    for _ in range(4):
        session = await initialize(port)
        owner = session.partition(".")[0]
        assert owner in NAMES
        owners.add(owner)
        for id in range(10):
            reply = await whoami(port, session, id)
            assert reply.status == 200, reply.body
            assert answer_text(reply) == owner
    # new sessions were spread: round robin over three replicas
    assert len(owners) >= 2


@pytest.mark.parametrize("proxy", PROXIES)
async def test_http_sse_posts_reach_the_owner_of_their_stream(
    proxy: str, start_replicas: StartReplicas, start_proxy: StartProxy
) -> None:
    replicas = await start_replicas()
    port = await start_proxy(proxy, {name: r.port for name, r in replicas.items()})
    async with await connect(port) as client:
        reader = EventReader(client)
        with trio.fail_after(10):
            assert (await reader.head(SSE_GET)).status_code == 200
            _, endpoint, _ = await reader.event()
        owner = endpoint.decode().partition("session_id=")[2].partition(".")[0]
        assert owner in NAMES
        posts = [
            initialize_body("2024-11-05"),
            tool_call("whoami", id=2),
            tool_call("whoami", id=3),
        ]
        posts.insert(1, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        for body in posts:
            reply = await exchange(port, mcp_post(body, path=endpoint, accept=None))
            assert reply.status == 202, reply.body
        with trio.fail_after(10):
            _, answer = await reader.message()
            assert answer["result"]["protocolVersion"] == "2024-11-05"
            for _ in range(2):
                _, answer = await reader.message()
                assert answer["result"]["content"][0]["text"] == owner


@pytest.mark.parametrize("proxy", PROXIES)
async def test_a_gone_owners_session_is_a_404_from_another_replica(
    proxy: str, start_replicas: StartReplicas, start_proxy: StartProxy
) -> None:
    replicas = await start_replicas()
    port = await start_proxy(proxy, {name: r.port for name, r in replicas.items()})
    session = await initialize(port)
    owner = session.partition(".")[0]
    replicas[owner].stop()
    with trio.fail_after(5):
        while True:  # (its listener closes once the cancelled task has run)
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", replicas[owner].port)
            except OSError:
                break
            await stream.aclose()
            await trio.sleep(0.01)
    for id in range(3):
        reply = await whoami(port, session, id)
        assert reply.status == 404, (reply.status, reply.body)
    # and the client's new session lives on a replica that is up
    fresh = await initialize(port)
    assert fresh.partition(".")[0] != owner
    reply = await whoami(port, fresh)
    assert (reply.status, answer_text(reply)) == (200, fresh.partition(".")[0])


@pytest.mark.filterwarnings(COREDIS_LEFTOVERS)
async def test_round_robin_with_redis_serves_a_session_on_every_replica(
    start_redis: StartRedis, start_replicas: StartReplicas, start_proxy: StartProxy
) -> None:
    redis = await start_redis()
    replicas = await start_replicas(redis_url=redis.url)
    port = await start_proxy("nginx-round-robin", {n: r.port for n, r in replicas.items()})
    session = await initialize(port)
    answered = []
    for id in range(10):
        reply = await whoami(port, session, id)
        assert reply.status == 200, reply.body
        answered.append(answer_text(reply))
    owner = session.partition(".")[0]
    assert set(answered) - {owner}, answered  # replicas other than the owner answered
    assert set(answered) <= set(NAMES)


@pytest.mark.filterwarnings(COREDIS_LEFTOVERS)
@pytest.mark.parametrize("proxy", PROXIES)
async def test_with_redis_a_gone_owners_session_goes_on_elsewhere(
    proxy: str, start_redis: StartRedis, start_replicas: StartReplicas, start_proxy: StartProxy
) -> None:
    redis = await start_redis()
    replicas = await start_replicas(redis_url=redis.url)
    port = await start_proxy(proxy, {name: r.port for name, r in replicas.items()})
    session = await initialize(port)
    owner = session.partition(".")[0]
    assert answer_text(await whoami(port, session)) == owner
    replicas[owner].stop()
    for id in range(3):
        reply = await whoami(port, session, id)
        assert reply.status == 200, (reply.status, reply.body)
        assert answer_text(reply) not in (owner, "")
