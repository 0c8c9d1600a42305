"""Metrics on ``metrics_path``, read with prometheus_client's own parser after
real requests over real sockets: operations by method, tool and error type
(names nobody registered count as ``other``), HTTP requests by status,
session durations, refusals by reason, and the gauges read at scrape time."""

from __future__ import annotations

import sys

import pytest
import trio
from _support import MCP, EventReader, connect, mcp_post, modern_body, modern_headers
from _support import tool_call as call
from prometheus_client.parser import text_string_to_metric_families

from trio_mcp import MCPConfig, Server
from trio_mcp._observe._metrics import HTTP_BUCKETS_S, MCP_BUCKETS_S, RAW_KEYS_MAX, Metrics
from trio_mcp._observe._observer import Observer

Samples = dict[str, list[tuple[dict[str, str], float]]]


async def scrape(port: int, path: bytes = b"/metrics") -> Samples:
    client = await connect(port)
    try:
        await client.send(b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        with trio.fail_after(10):
            reply = await client.read_reply()
    finally:
        await client.stream.aclose()
    assert reply.status == 200, reply.body
    assert reply.header(b"content-type").startswith(b"text/plain; version=")
    samples: Samples = {}
    for family in text_string_to_metric_families(reply.body.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def hanging_app() -> Server:
    app = Server("hanging")

    @app.tool()
    async def hang() -> str:
        await trio.sleep_forever()
        return "never"  # pragma: no cover

    return app


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of `name` whose labels include `labels` (0 when none)."""
    found = [v for got, v in samples.get(name, []) if labels.items() <= got.items()]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else 0


async def test_tool_calls_are_counted_by_tool_and_error_type(start_mcp) -> None:
    port = (await start_mcp(metrics_path="/metrics")).ports[0]
    mcp = MCP(await connect(port))
    await mcp.initialize()
    for id in (1, 2):
        answer = await mcp.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, id)
        assert "error" not in answer
    answer = await mcp.call("tools/call", {"name": "test_error_handling", "arguments": {}}, 3)
    assert answer["result"]["isError"] is True
    answer = await mcp.call("tools/call", {"name": "no-such-tool-4711", "arguments": {}}, 4)
    assert answer["error"]["code"] == -32602
    answer = await mcp.call("no/such/method", {}, 5)
    assert answer["error"]["code"] == -32601
    samples = await scrape(port)
    name = "mcp_server_operation_duration_seconds"
    ok = {"mcp_method_name": "tools/call", "gen_ai_tool_name": "echo", "error_type": ""}
    assert value(samples, name + "_count", **ok, mcp_protocol_version="2025-11-25") == 2
    assert value(samples, name + "_bucket", **ok, le="+Inf") == 2
    assert (
        len([s for s in samples[name + "_bucket"] if s[0].items() >= ok.items()])
        == len(MCP_BUCKETS_S) + 1
    )
    assert value(samples, name + "_sum", **ok) > 0
    failed = {"gen_ai_tool_name": "test_error_handling", "error_type": "tool_error"}
    assert value(samples, name + "_count", **failed) == 1
    # a name nobody registered is "other": clients cannot mint series
    unknown = {"gen_ai_tool_name": "other", "error_type": "-32602"}
    assert value(samples, name + "_count", **unknown) == 1
    assert value(samples, name + "_count", mcp_method_name="other", error_type="-32601") == 1
    labels = {labels_.get("gen_ai_tool_name") for labels_, _ in samples[name + "_count"]}
    labels |= {labels_.get("mcp_method_name") for labels_, _ in samples[name + "_count"]}
    assert "no-such-tool-4711" not in labels and "no/such/method" not in labels
    assert value(samples, name + "_count", mcp_method_name="initialize") == 1
    http = "http_server_request_duration_seconds"
    post = {"http_request_method": "POST"}
    assert value(samples, http + "_count", **post, http_response_status_code="200") == 6
    assert value(samples, http + "_count", **post, http_response_status_code="202") == 1
    ok_posts = {**post, "http_response_status_code": "200"}
    http_buckets = [s for s in samples[http + "_bucket"] if s[0].items() >= ok_posts.items()]
    assert [float(s[0]["le"]) for s in http_buckets] == [*HTTP_BUCKETS_S, float("inf")]
    await mcp.client.stream.aclose()


async def test_the_modern_era_is_counted_with_its_version(start_mcp) -> None:
    port = (await start_mcp(metrics_path="/metrics")).ports[0]
    client = await connect(port)
    body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    await client.send(
        mcp_post(body, version="2026-07-28", extra=modern_headers(body))  # type: ignore[arg-type]
    )
    reply = await client.read_reply()
    assert reply.status == 200, reply.body
    await client.stream.aclose()
    samples = await scrape(port)
    count = value(
        samples,
        "mcp_server_operation_duration_seconds_count",
        mcp_method_name="tools/call",
        gen_ai_tool_name="echo",
        mcp_protocol_version="2026-07-28",
    )
    assert count == 1


async def test_refusals_are_counted_by_reason(start_mcp) -> None:
    server = await start_mcp(
        hanging_app(),
        metrics_path="/metrics",
        max_requests_per_session=1,
        http={"max_body_bytes": 4096},
    )
    port = server.ports[0]
    big = await connect(port)
    await big.send(mcp_post(b"x" * 5000, session="not-a-session", version="2025-11-25"))
    assert (await big.read_reply()).status == 413
    await big.stream.aclose()
    client = await connect(port)
    await client.send(mcp_post(call("hang", 1), session="not-a-session", version="2025-11-25"))
    assert (await client.read_reply()).status == 404
    mcp = MCP(await connect(port))
    await mcp.initialize()
    hanging = await connect(port)
    await hanging.send(mcp_post(call("hang", 1), session=mcp.session, version=mcp.version))
    while (await scrape(port)).get("mcp_server_requests_running") != [({}, 1.0)]:
        await trio.sleep(0.01)  # (the call is on its way: nothing to await from here)
    assert (await mcp.post(call("hang", 2))).status == 429
    samples = await scrape(port)
    assert value(samples, "mcp_server_refusals_total", reason="404") == 1
    assert value(samples, "mcp_server_refusals_total", reason="429") == 1
    assert value(samples, "mcp_server_refusals_total", reason="413") == 1
    assert value(samples, "mcp_server_refusals_total", reason="401") == 0
    http = "http_server_request_duration_seconds_count"
    assert value(samples, http, http_request_method="POST", http_response_status_code="404") == 1
    assert value(samples, http, http_request_method="POST", http_response_status_code="429") == 1
    assert value(samples, "mcp_server_requests_running") == 1  # the hanging call
    for each in [hanging, client, mcp.client]:
        await each.stream.aclose()


async def test_unauthenticated_requests_count_as_401(start_mcp) -> None:
    async def nobody(request: object) -> None:
        return None

    port = (await start_mcp(authenticate=nobody, metrics_path="/metrics")).ports[0]
    client = await connect(port)
    await client.send(mcp_post(call("hang", 1), session="s", version="2025-11-25"))
    assert (await client.read_reply()).status == 401
    await client.stream.aclose()
    samples = await scrape(port)  # (the metrics path asks for no credentials)
    assert value(samples, "mcp_server_refusals_total", reason="401") == 1


async def test_gauges_are_read_at_scrape_time(start_mcp) -> None:
    server = await start_mcp(metrics_path="/metrics")
    port = server.ports[0]
    first, second = MCP(await connect(port)), MCP(await connect(port))
    await first.initialize()
    await second.initialize()
    stream = EventReader(await connect(port))
    head = await stream.head(
        b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        b"MCP-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: "
        + first.session.encode()
        + b"\r\n\r\n"
    )
    assert head.status_code == 200
    samples = await scrape(port)
    assert value(samples, "mcp_server_sessions") == 2
    assert value(samples, "mcp_server_streams") == 1
    assert value(samples, "http_server_open_connections") == 4  # and the scrape's own
    assert value(samples, "http_server_active_requests") == 1  # the GET stream
    assert value(samples, "mcp_server_requests_running") == 0
    assert "mcp_server_event_buffer_bytes" in samples
    # a session that ends is timed
    delete = mcp_post(b"", session=second.session, version="2025-11-25").replace(
        b"POST", b"DELETE", 1
    )
    await second.client.send(delete)
    assert (await second.client.read_reply()).status == 200
    samples = await scrape(port)
    assert value(samples, "mcp_server_sessions") == 1
    assert value(samples, "mcp_server_session_duration_seconds_count") == 1
    for each in (first.client, second.client, stream.client):
        await each.stream.aclose()


async def test_the_metrics_path_answers_get_only(start_mcp) -> None:
    port = (await start_mcp(metrics_path="/internal/metrics")).ports[0]
    client = await connect(port)
    await client.send(b"POST /internal/metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    reply = await client.read_reply()
    assert reply.status == 405 and reply.header(b"allow") == b"GET"
    await client.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await client.read_reply()).status == 404
    await client.stream.aclose()
    assert "process_cpu_seconds_total" in await scrape(port, b"/internal/metrics")


async def test_without_a_metrics_path_there_is_no_observer(start_mcp) -> None:
    server = await start_mcp()
    assert server.observer is None
    client = await connect(server.ports[0])
    await client.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (await client.read_reply()).status == 404
    await client.stream.aclose()


@pytest.mark.parametrize("path", ["metrics", "/mcp", "/mcp/"])
def test_a_metrics_path_must_be_its_own(path: str) -> None:
    with pytest.raises(ValueError, match="metrics_path"):
        MCPConfig(metrics_path=path)


def test_names_nobody_registered_make_no_series() -> None:
    metrics = Metrics({"tools/call"}, {"echo": object()}, {}, {"2025-11-25"})
    observer = Observer(metrics, None, 1024)
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "unknown"}}
    unknown = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "unknown"}}
    ok = {"jsonrpc": "2.0", "id": 1, "result": {}}
    for n in range(RAW_KEYS_MAX + 100):
        params = {"name": f"tool-{n}"}
        observer.answered("", "tools/call", params, error, 200, "2025-11-25", None, None, 0.0)
        observer.answered("", f"method-{n}", {}, unknown, 200, f"v{n}", None, None, 0.0)
    observer.answered("", "tools/call", {"name": "echo"}, ok, 200, "2025-11-25", None, None, 0.0)
    assert sorted(metrics.operations) == [
        ("other", "", "", "-32601", "other"),
        ("tools/call", "echo", "", "", "2025-11-25"),
        ("tools/call", "other", "", "-32602", "2025-11-25"),
    ]
    # (and the keys kept for the fast path stay bounded too)
    assert len(observer._operations) <= RAW_KEYS_MAX
    other = metrics.operations[("tools/call", "other", "", "-32602", "2025-11-25")]
    assert other.count() == RAW_KEYS_MAX + 100


def test_notifications_a_worker_could_not_pass_on_are_counted() -> None:
    from types import SimpleNamespace

    from trio_mcp._observe._exposition import Exposition

    metrics = Metrics({"tools/call"}, {}, {}, {"2025-11-25"})
    observer = Observer(metrics, None, 1024)
    exposition = Exposition(observer)
    assert "trio_mcp_peer_broadcast_dropped" not in exposition.render().decode()
    observer.peer_broadcast = SimpleNamespace(dropped=3)  # (a group's `PeerBroadcast`)
    text = exposition.render().decode()
    samples = {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert samples["trio_mcp_peer_broadcast_dropped_total"] == 3


def test_metrics_without_prometheus_client_is_one_line(monkeypatch) -> None:
    from trio_mcp._errors import StartupError
    from trio_mcp._mcp._endpoint import MCPEndpoint

    # (None in sys.modules makes any import of it fail, in either build)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(StartupError, match=r"pip install 'trio-mcp\[metrics\]'"):
        MCPEndpoint(Server("m"), MCPConfig(metrics_path="/metrics"))
