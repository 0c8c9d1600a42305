"""The 2026-07-28 revision on the same endpoint: envelopes, header rules, results."""

from __future__ import annotations

import orjson
import pytest
import trio
from _support import connect, mcp_post, sse_messages

V = "2026-07-28"
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def modern_body(
    method: str, params: dict | None = None, *, id: int = 1, meta: dict | None = None
) -> dict:
    params = dict(params or {})
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        **(meta or {}),
    }
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


def modern_headers(body: dict, **override: bytes | None) -> list[tuple[bytes, bytes]]:
    headers = {b"Mcp-Method": body["method"].encode()}
    name_param = NAMED.get(body["method"])
    if name_param and name_param in body["params"]:
        headers[b"Mcp-Name"] = body["params"][name_param].encode()
    for name, value in override.items():
        headers[name.replace("_", "-").encode()] = value  # type: ignore[assignment]
    return [(k, v) for k, v in headers.items() if v is not None]


async def call(
    port: int, body: dict | bytes, version: str | None = V, extra=None, session: str | None = None
):
    if extra is None and isinstance(body, dict):
        extra = modern_headers(body)
    async with await connect(port) as client:
        await client.send(mcp_post(body, version=version, extra=extra, session=session))
        with trio.fail_after(10):
            reply = await client.read_reply()
    if reply.header(b"content-type") == b"text/event-stream":
        return reply, sse_messages(reply.body)
    return reply, orjson.loads(reply.body) if reply.body else None


async def test_discover(mcp_port: int) -> None:
    reply, answer = await call(mcp_port, modern_body("server/discover"))
    assert reply.status == 200
    assert reply.header(b"mcp-session-id") is None
    result = answer["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"][0] == V
    assert "2025-11-25" in result["supportedVersions"]
    assert set(result["capabilities"]) >= {"tools", "resources", "prompts", "completions"}
    assert (result["ttlMs"], result["cacheScope"]) == (0, "private")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "trio-mcp-everything"


async def test_results_carry_result_type_server_info_and_cache_hints(mcp_port: int) -> None:
    _, listed = await call(mcp_port, modern_body("tools/list"))
    assert listed["result"]["resultType"] == "complete"
    assert "ttlMs" in listed["result"] and "cacheScope" in listed["result"]
    _, called = await call(
        mcp_port, modern_body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    )
    assert called["result"]["content"] == [{"type": "text", "text": "x"}]
    assert called["result"]["resultType"] == "complete"
    assert "ttlMs" not in called["result"]  # not a cacheable result
    assert "io.modelcontextprotocol/serverInfo" in called["result"]["_meta"]


async def test_cache_hints_are_configurable(start_mcp) -> None:
    server = await start_mcp(cache_ttl_ms=60000, cache_scope="public")
    _, answer = await call(server.ports[0], modern_body("resources/list"))
    assert (answer["result"]["ttlMs"], answer["result"]["cacheScope"]) == (60000, "public")


@pytest.mark.parametrize(
    ("mutate", "code", "words"),
    [
        (lambda b, h: b["params"].pop("_meta"), -32602, "_meta"),
        (
            lambda b, h: b["params"]["_meta"].pop("io.modelcontextprotocol/clientCapabilities"),
            -32602,
            "clientCapabilities",
        ),
        (lambda b, h: h.__setitem__(b"Mcp-Method", None), -32020, "Mcp-Method"),
        (lambda b, h: h.__setitem__(b"Mcp-Method", b"TOOLS/CALL"), -32020, "Mcp-Method"),
        (lambda b, h: h.__setitem__(b"Mcp-Name", None), -32020, "Mcp-Name"),
        (lambda b, h: h.__setitem__(b"Mcp-Name", b"other"), -32020, "Mcp-Name"),
        (
            lambda b, h: h.__setitem__(b"Mcp-Name", b"=?base64?ZWNobw?="),
            -32020,
            "Mcp-Name",
        ),  # bad padding
        (
            lambda b, h: b["params"]["_meta"].__setitem__(
                "io.modelcontextprotocol/protocolVersion", "v999"
            ),
            -32020,
            "MCP-Protocol-Version",
        ),
    ],
)
async def test_envelope_and_header_ladder(mcp_port: int, mutate, code: int, words: str) -> None:
    body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "x"}}, id=7)
    headers = dict(modern_headers(body))
    mutate(body, headers)
    extra = [(k, v) for k, v in headers.items() if v is not None]
    reply, answer = await call(mcp_port, body, extra=extra)
    assert reply.status == 400
    assert answer["id"] == 7
    assert answer["error"]["code"] == code
    assert words in answer["error"]["message"]


async def test_missing_version_header_with_modern_body_is_32020(mcp_port: int) -> None:
    body = modern_body("tools/list")
    reply, answer = await call(mcp_port, body, version=None)
    assert reply.status == 400
    assert answer["error"]["code"] == -32020


async def test_unsupported_version_is_32022_with_the_list(mcp_port: int) -> None:
    body = modern_body("tools/list")
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2027-01-01"
    reply, answer = await call(mcp_port, body, version="2027-01-01")
    assert reply.status == 400
    assert answer["error"]["code"] == -32022
    assert answer["error"]["data"]["requested"] == "2027-01-01"
    assert V in answer["error"]["data"]["supported"]


async def test_sentinel_encoded_and_padded_names_are_accepted(mcp_port: int) -> None:
    body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    for value in (b"=?base64?ZWNobw==?=", b"  echo  "):
        reply, answer = await call(mcp_port, body, extra=modern_headers(body, Mcp_Name=value))
        assert reply.status == 200, answer


@pytest.mark.parametrize(
    "method",
    [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "unknown/method",
    ],
)
async def test_removed_and_unknown_methods_are_404(mcp_port: int, method: str) -> None:
    reply, answer = await call(
        mcp_port, modern_body(method, {"uri": "test://x"} if "subscribe" in method else {})
    )
    assert reply.status == 404
    assert answer["error"]["code"] == -32601


async def test_no_session_is_minted_or_needed_and_stale_ids_are_ignored(mcp_port: int) -> None:
    reply, answer = await call(mcp_port, modern_body("tools/list"), session="f" * 32)
    assert reply.status == 200
    assert reply.header(b"mcp-session-id") is None
    assert answer["result"]["tools"]


async def test_no_log_messages_without_log_level(mcp_port: int) -> None:
    body = modern_body("tools/call", {"name": "test_tool_with_logging"})
    reply, answer = await call(mcp_port, body)
    assert reply.header(b"content-type") == b"application/json"
    assert answer["result"]["content"][0]["text"] == "Logging test completed"
    body = modern_body(
        "tools/call",
        {"name": "test_tool_with_logging"},
        meta={"io.modelcontextprotocol/logLevel": "info"},
    )
    reply, messages = await call(mcp_port, body)
    assert [m.get("method") for m in messages[:-1]] == ["notifications/message"] * 3
    bad = modern_body("tools/list", meta={"io.modelcontextprotocol/logLevel": "loud"})
    reply, answer = await call(mcp_port, bad)
    assert (reply.status, answer["error"]["code"]) == (400, -32602)


async def test_progress_goes_on_the_request_stream(mcp_port: int) -> None:
    body = modern_body(
        "tools/call", {"name": "test_tool_with_progress"}, meta={"progressToken": "p"}
    )
    reply, messages = await call(mcp_port, body)
    assert reply.header(b"content-type") == b"text/event-stream"
    assert [m["params"]["progress"] for m in messages[:-1]] == [0, 50, 100]
    assert messages[-1]["result"]["resultType"] == "complete"


async def test_notifications_are_accepted_and_responses_refused(mcp_port: int) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"_meta": {}}}
    reply, _ = await call(mcp_port, note, extra=[(b"Mcp-Method", b"notifications/whatever")])
    assert reply.status == 202
    response = {"jsonrpc": "2.0", "id": 3, "result": {}}
    reply, answer = await call(mcp_port, response, extra=[])
    assert reply.status == 400
    assert answer["error"]["code"] == -32600


async def test_handler_errors_stay_200_with_their_code(mcp_port: int) -> None:
    reply, answer = await call(mcp_port, modern_body("tools/call", {"name": "nope"}))
    assert (reply.status, answer["error"]["code"]) == (200, -32602)
    reply, answer = await call(mcp_port, modern_body("resources/read", {"uri": "test://nope"}))
    assert reply.status == 200
    assert answer["error"]["data"] == {"uri": "test://nope"}


async def test_legacy_and_modern_clients_share_the_endpoint(mcp_port: int) -> None:
    from _support import initialize_body

    async with await connect(mcp_port) as client:
        await client.send(mcp_post(initialize_body()))
        legacy = await client.read_reply()
        assert legacy.header(b"mcp-session-id") is not None
        body = modern_body("tools/list")
        await client.send(mcp_post(body, version=V, extra=modern_headers(body)))
        modern = await client.read_reply()
        assert orjson.loads(modern.body)["result"]["resultType"] == "complete"
