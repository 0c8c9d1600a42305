"""The 2026-07-28 revision on the same endpoint: envelopes, header rules, results."""

from __future__ import annotations

import orjson
import pytest
import trio
from _support import MODERN_VERSION as V
from _support import (
    connect,
    mcp_post,
    modern_body,
    modern_call,
    modern_headers,
)

from trio_mcp import MCPError


async def test_discover(mcp_port: int) -> None:
    reply, answer = await modern_call(mcp_port, modern_body("server/discover"))
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
    _, listed = await modern_call(mcp_port, modern_body("tools/list"))
    assert listed["result"]["resultType"] == "complete"
    assert "ttlMs" in listed["result"] and "cacheScope" in listed["result"]
    _, called = await modern_call(
        mcp_port, modern_body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    )
    assert called["result"]["content"] == [{"type": "text", "text": "x"}]
    assert called["result"]["resultType"] == "complete"
    assert "ttlMs" not in called["result"]  # not a cacheable result
    assert "io.modelcontextprotocol/serverInfo" in called["result"]["_meta"]


async def test_cache_hints_are_configurable(start_mcp) -> None:
    server = await start_mcp(cache_ttl_ms=60000, cache_scope="public")
    _, answer = await modern_call(server.ports[0], modern_body("resources/list"))
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
    reply, answer = await modern_call(mcp_port, body, extra=extra)
    assert reply.status == 400
    assert answer["id"] == 7
    assert answer["error"]["code"] == code
    assert words in answer["error"]["message"]


async def test_missing_version_header_with_modern_body_is_32020(mcp_port: int) -> None:
    body = modern_body("tools/list")
    reply, answer = await modern_call(mcp_port, body, version=None)
    assert reply.status == 400
    assert answer["error"]["code"] == -32020


async def test_unsupported_version_is_32022_with_the_list(mcp_port: int) -> None:
    body = modern_body("tools/list")
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2027-01-01"
    reply, answer = await modern_call(mcp_port, body, version="2027-01-01")
    assert reply.status == 400
    assert answer["error"]["code"] == -32022
    assert answer["error"]["data"]["requested"] == "2027-01-01"
    assert V in answer["error"]["data"]["supported"]


async def test_sentinel_encoded_and_padded_names_are_accepted(mcp_port: int) -> None:
    body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    for value in (b"=?base64?ZWNobw==?=", b"  echo  "):
        reply, answer = await modern_call(
            mcp_port, body, extra=modern_headers(body, Mcp_Name=value)
        )
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
    reply, answer = await modern_call(
        mcp_port, modern_body(method, {"uri": "test://x"} if "subscribe" in method else {})
    )
    assert reply.status == 404
    assert answer["error"]["code"] == -32601


async def test_no_session_is_minted_or_needed_and_stale_ids_are_ignored(mcp_port: int) -> None:
    reply, answer = await modern_call(mcp_port, modern_body("tools/list"), session="f" * 32)
    assert reply.status == 200
    assert reply.header(b"mcp-session-id") is None
    assert answer["result"]["tools"]


async def test_no_log_messages_without_log_level(mcp_port: int) -> None:
    body = modern_body("tools/call", {"name": "test_tool_with_logging"})
    reply, answer = await modern_call(mcp_port, body)
    assert reply.header(b"content-type") == b"application/json"
    assert answer["result"]["content"][0]["text"] == "Logging test completed"
    body = modern_body(
        "tools/call",
        {"name": "test_tool_with_logging"},
        meta={"io.modelcontextprotocol/logLevel": "info"},
    )
    reply, messages = await modern_call(mcp_port, body)
    assert [m.get("method") for m in messages[:-1]] == ["notifications/message"] * 3
    bad = modern_body("tools/list", meta={"io.modelcontextprotocol/logLevel": "loud"})
    reply, answer = await modern_call(mcp_port, bad)
    assert (reply.status, answer["error"]["code"]) == (400, -32602)


async def test_progress_goes_on_the_request_stream(mcp_port: int) -> None:
    body = modern_body(
        "tools/call", {"name": "test_tool_with_progress"}, meta={"progressToken": "p"}
    )
    reply, messages = await modern_call(mcp_port, body)
    assert reply.header(b"content-type") == b"text/event-stream"
    assert [m["params"]["progress"] for m in messages[:-1]] == [0, 50, 100]
    assert messages[-1]["result"]["resultType"] == "complete"


async def test_notifications_are_accepted_and_responses_refused(mcp_port: int) -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"_meta": {}}}
    reply, _ = await modern_call(mcp_port, note, extra=[(b"Mcp-Method", b"notifications/whatever")])
    assert reply.status == 202
    response = {"jsonrpc": "2.0", "id": 3, "result": {}}
    reply, answer = await modern_call(mcp_port, response, extra=[])
    assert reply.status == 400
    assert answer["error"]["code"] == -32600


async def test_handler_errors_stay_200_with_their_code(mcp_port: int) -> None:
    reply, answer = await modern_call(mcp_port, modern_body("tools/call", {"name": "nope"}))
    assert (reply.status, answer["error"]["code"]) == (200, -32602)
    reply, answer = await modern_call(
        mcp_port, modern_body("resources/read", {"uri": "test://nope"})
    )
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


# ---- multi round-trip requests ----------------------------------------------------

ELICIT = {"elicitation": {}}


async def test_input_required_round_trip(mcp_port: int) -> None:
    first = modern_body(
        "tools/call",
        {"name": "test_input_required_result_elicitation"},
        meta={"io.modelcontextprotocol/clientCapabilities": ELICIT},
    )
    reply, answer = await modern_call(mcp_port, first)
    result = answer["result"]
    assert reply.status == 200
    assert result["resultType"] == "input_required"
    assert result["inputRequests"]["user_name"]["method"] == "elicitation/create"
    assert "ttlMs" not in result and "cacheScope" not in result
    retry = modern_body(
        "tools/call",
        {
            "name": "test_input_required_result_elicitation",
            "inputResponses": {
                "user_name": {"action": "accept", "content": {"name": "Ada"}},
                "unknown": {},
            },
            "requestState": result["requestState"],
        },
        id=2,
        meta={"io.modelcontextprotocol/clientCapabilities": ELICIT},
    )
    _, done = await modern_call(mcp_port, retry)
    assert done["result"]["resultType"] == "complete"
    assert done["result"]["content"][0]["text"] == "Hello, Ada!"


async def test_retry_without_the_answer_asks_again(mcp_port: int) -> None:
    body = modern_body(
        "tools/call",
        {"name": "test_input_required_result_elicitation"},
        meta={"io.modelcontextprotocol/clientCapabilities": ELICIT},
    )
    _, answer = await modern_call(mcp_port, body)
    body["params"]["requestState"] = answer["result"]["requestState"]
    _, again = await modern_call(mcp_port, body)
    assert again["result"]["resultType"] == "input_required"


async def test_tampered_or_foreign_state_is_refused(mcp_port: int) -> None:
    body = modern_body(
        "tools/call",
        {"name": "test_input_required_result_tampered_state"},
        meta={"io.modelcontextprotocol/clientCapabilities": ELICIT},
    )
    _, answer = await modern_call(mcp_port, body)
    token = answer["result"]["requestState"]
    body["params"]["requestState"] = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    body["params"]["inputResponses"] = {"confirm": {"action": "accept"}}
    _, refused = await modern_call(mcp_port, body)
    assert refused["error"]["code"] == -32602
    # the same state on another tool's request is foreign too
    other = modern_body(
        "tools/call",
        {"name": "test_input_required_result_request_state", "requestState": token},
        meta={"io.modelcontextprotocol/clientCapabilities": ELICIT},
    )
    _, refused = await modern_call(mcp_port, other)
    assert refused["error"]["code"] == -32602


async def test_state_expires_in_wall_clock_time_for_every_replica(start_mcp) -> None:
    """Once sealed in trio's clock, whose offset is random per process: another
    replica took expired states and refused fresh ones."""
    import time

    from trio_mcp._protocol._request_state import CLOCK_SKEW_S, StateSealer, params_digest

    server = await start_mcp(request_state_keys=("shared-key",), request_state_ttl_s=60)
    params = {"name": "test_input_required_result_elicitation"}
    body = modern_body(
        "tools/call", params, meta={"io.modelcontextprotocol/clientCapabilities": ELICIT}
    )
    _, answer = await modern_call(server.ports[0], body)
    token = answer["result"]["requestState"]
    replica = StateSealer([b"shared-key"])  # another process, with its own trio clock
    where = {"principal": "-", "method": "tools/call", "digest": params_digest(params)}
    assert replica.open(token, now=time.time(), **where) == ({}, {})
    with pytest.raises(MCPError):
        replica.open(token, now=time.time() + 60 + CLOCK_SKEW_S + 5, **where)


async def test_a_principal_with_no_stable_key_gets_an_error_not_a_broken_answer(
    start_mcp,
) -> None:
    class User:  # (no principal_key= for it)
        pass

    async def authenticate(request):
        return User()

    server = await start_mcp(authenticate=authenticate)
    body = modern_body(
        "tools/call",
        {"name": "test_input_required_result_elicitation"},
        meta={"io.modelcontextprotocol/clientCapabilities": ELICIT},
    )
    reply, answer = await modern_call(server.ports[0], body)
    assert (reply.status, answer["error"]["code"]) == (200, -32603)


async def test_principal_key_binds_states_to_what_the_application_says(start_mcp) -> None:
    class User:
        def __init__(self, name: str) -> None:
            self.name = name

    async def authenticate(request):
        return User(request.header(b"authorization").decode())

    server = await start_mcp(authenticate=authenticate, principal_key=lambda user: user.name)
    port = server.ports[0]
    caps = {"io.modelcontextprotocol/clientCapabilities": ELICIT}
    params = {"name": "test_input_required_result_elicitation"}
    alice = [(b"Authorization", b"alice")]
    body = modern_body("tools/call", params, meta=caps)
    _, answer = await modern_call(port, body, extra=modern_headers(body) + alice)
    retry = modern_body(
        "tools/call",
        {
            **params,
            "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ada"}}},
            "requestState": answer["result"]["requestState"],
        },
        meta=caps,
    )
    _, refused = await modern_call(
        port, retry, extra=modern_headers(retry) + [(b"Authorization", b"bob")]
    )
    assert refused["error"]["code"] == -32602
    _, done = await modern_call(port, retry, extra=modern_headers(retry) + alice)
    assert done["result"]["content"][0]["text"] == "Hello, Ada!"


async def test_multi_round_keeps_earlier_answers_and_state(mcp_port: int) -> None:
    caps = {"io.modelcontextprotocol/clientCapabilities": ELICIT}
    name = "test_input_required_result_multi_round"
    _, r1 = await modern_call(mcp_port, modern_body("tools/call", {"name": name}, meta=caps))
    assert list(r1["result"]["inputRequests"]) == ["step1"]
    params = {
        "name": name,
        "inputResponses": {"step1": {"action": "accept", "content": {"name": "A"}}},
        "requestState": r1["result"]["requestState"],
    }
    _, r2 = await modern_call(mcp_port, modern_body("tools/call", params, meta=caps))
    assert list(r2["result"]["inputRequests"]) == ["step2"]
    assert r2["result"]["requestState"] != r1["result"]["requestState"]
    params = {
        "name": name,
        "inputResponses": {"step2": {"action": "accept", "content": {"name": "B"}}},
        "requestState": r2["result"]["requestState"],
    }
    _, r3 = await modern_call(mcp_port, modern_body("tools/call", params, meta=caps))
    assert r3["result"]["content"][0]["text"] == "Completed both rounds: A / B"


async def test_undeclared_capability_is_32021_or_left_out(mcp_port: int) -> None:
    reply, answer = await modern_call(
        mcp_port, modern_body("tools/call", {"name": "test_missing_capability"})
    )
    assert reply.status == 400
    assert answer["error"]["code"] == -32021
    assert answer["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
    caps = {"io.modelcontextprotocol/clientCapabilities": {"roots": {}}}
    _, answer = await modern_call(
        mcp_port,
        modern_body("tools/call", {"name": "test_input_required_result_capabilities"}, meta=caps),
    )
    assert list(answer["result"]["inputRequests"]) == ["client_roots"]


async def test_prompts_can_ask_for_input_too(mcp_port: int) -> None:
    caps = {"io.modelcontextprotocol/clientCapabilities": ELICIT}
    _, answer = await modern_call(
        mcp_port,
        modern_body("prompts/get", {"name": "test_input_required_result_prompt"}, meta=caps),
    )
    assert answer["result"]["resultType"] == "input_required"
    assert "user_context" in answer["result"]["inputRequests"]


async def test_a_streaming_tool_asks_with_a_result_never_a_request(mcp_port: int) -> None:
    caps = {"io.modelcontextprotocol/clientCapabilities": ELICIT, "progressToken": 1}
    reply, messages = await modern_call(
        mcp_port, modern_body("tools/call", {"name": "test_streaming_elicitation"}, meta=caps)
    )
    assert reply.header(b"content-type") == b"text/event-stream"
    assert all("id" not in m for m in messages[:-1])  # notifications only before the result
    assert messages[-1]["result"]["resultType"] == "input_required"


# ---- subscriptions/listen ------------------------------------------------------------


async def test_listen_acknowledges_then_streams_what_was_asked(start_mcp) -> None:
    from _support import EventReader

    server = await start_mcp(keepalive_s=0.2)
    port = server.ports[0]
    app = server.handler.app
    body = modern_body(
        "subscriptions/listen",
        {
            "notifications": {
                "toolsListChanged": True,
                "promptsListChanged": False,
                "resourceSubscriptions": ["test://watched-resource"],
                "bogus": True,
            }
        },
        id="sub-1",
    )
    async with await connect(port) as client:
        reader = EventReader(client)
        with trio.fail_after(10):
            head = await reader.head(mcp_post(body, version=V, extra=modern_headers(body)))
            assert dict(head.headers)[b"content-type"] == b"text/event-stream"
            _, ack = await reader.message()
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"}
            assert ack["params"]["notifications"] == {
                "toolsListChanged": True,
                "resourceSubscriptions": ["test://watched-resource"],
            }
            app.notify_prompts_changed()  # not asked for
            app.log("info", "never on a listen stream")
            app.notify_resource_updated("test://other")  # not watched
            app.notify_resource_updated("test://watched-resource")
            app.notify_tools_changed()
            got = [(await reader.message())[1] for _ in range(2)]
            assert [m["method"] for m in got] == [
                "notifications/resources/updated",
                "notifications/tools/list_changed",
            ]
            assert all(
                m["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"}
                for m in got
            )
            _, _, raw = await reader.event()
            assert raw.startswith(b":")  # a keepalive while idle


async def test_listen_needs_a_notifications_object(mcp_port: int) -> None:
    reply, answer = await modern_call(mcp_port, modern_body("subscriptions/listen", {}))
    assert (reply.status, answer["error"]["code"]) == (400, -32602)


# ---- custom headers --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("region", "header", "status"),
    [
        ("eu-west-1", b"eu-west-1", 200),
        ("eu west ü", b"=?base64?ZXUgd2VzdCDDvA==?=", 200),
        ("eu-west-1", b"eu-west-2", 400),
        ("eu-west-1", None, 400),
        ("eu-west-1", b"=?base64?ZXU?=", 400),
    ],
)
async def test_mcp_param_headers_mirror_arguments(
    mcp_port: int, region: str, header: bytes | None, status: int
) -> None:
    body = modern_body("tools/call", {"name": "test_x_mcp_header", "arguments": {"region": region}})
    extra = modern_headers(body, **{"Mcp-Param-Region": header})
    reply, answer = await modern_call(mcp_port, body, extra=extra)
    assert reply.status == status
    if status == 200:
        assert answer["result"]["content"][0]["text"] == f"region={region} count=1"
    else:
        assert answer["error"]["code"] == -32020
        assert "Mcp-Param-Region" in answer["error"]["message"]


# ---- restricting the eras ----------------------------------------------------------------


async def test_modern_only_refuses_legacy_and_405s_get_delete(start_mcp) -> None:
    from _support import initialize_body

    server = await start_mcp(eras="modern")
    port = server.ports[0]
    reply, answer = await modern_call(port, initialize_body(), version=None, extra=[])
    assert reply.status == 400
    assert answer["error"]["code"] == -32022
    assert answer["error"]["data"]["supported"] == [V]
    for verb in (b"GET", b"DELETE"):
        async with await connect(port) as client:
            await client.send(
                verb + b" /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
            )
            assert (await client.read_reply()).status == 405
    async with await connect(port) as client:
        await client.send(b"GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (await client.read_reply()).status == 404
    reply, answer = await modern_call(port, modern_body("tools/list"))
    assert reply.status == 200


async def test_legacy_only_answers_2026_as_an_unknown_version(start_mcp) -> None:
    server = await start_mcp(eras="legacy")
    reply, answer = await modern_call(server.ports[0], modern_body("tools/list"))
    assert reply.status == 400
    assert answer["error"]["code"] == -32600  # not a modern error: clients fall back


# ---- the digest's status/code map for the modern HTTP binding, row by row ------------


async def _deny_all(request):
    return None


STATUS_MAP = [
    # (row, body, headers override, status, code)
    (
        "origin not allowed",
        modern_body("tools/list"),
        {"Origin": b"http://evil.example"},
        403,
        -32600,
    ),
    (
        "_meta missing",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        {},
        400,
        -32602,
    ),
    (
        "header differs from body",
        modern_body("tools/list"),
        {"Mcp-Method": b"prompts/list"},
        400,
        -32020,
    ),
    ("method unknown", modern_body("nope/nope"), {}, 404, -32601),
    (
        "needs an undeclared capability",
        modern_body("tools/call", {"name": "test_missing_capability"}),
        {},
        400,
        -32021,
    ),
    (
        "notification accepted",
        {"jsonrpc": "2.0", "method": "notifications/x", "params": {}},
        {},
        202,
        None,
    ),
    (
        "unknown tool (handler-level)",
        modern_body("tools/call", {"name": "missing"}),
        {},
        200,
        -32602,
    ),
]


@pytest.mark.parametrize(
    ("row", "body", "override", "status", "code"), STATUS_MAP, ids=[r[0] for r in STATUS_MAP]
)
async def test_status_code_map(
    mcp_port: int, row: str, body: dict, override: dict, status: int, code: int | None
) -> None:
    extra = modern_headers(body) if "method" in body else []
    extra = [(k, v) for k, v in extra if k.decode() not in override] + [
        (k.encode(), v) for k, v in override.items()
    ]
    reply, answer = await modern_call(mcp_port, body, extra=extra)
    assert reply.status == status, row
    if code is None:
        assert answer is None
    else:
        assert answer["error"]["code"] == code
        if status != 403:
            assert answer["id"] == body.get("id")


async def test_status_map_unsupported_version_and_auth(start_mcp) -> None:
    body = modern_body("tools/list")
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2099-01-01"
    server = await start_mcp()
    reply, answer = await modern_call(server.ports[0], body, version="2099-01-01")
    assert (reply.status, answer["error"]["code"]) == (400, -32022)
    guarded = await start_mcp(authenticate=_deny_all)
    reply, _ = await modern_call(guarded.ports[0], modern_body("tools/list"))
    assert reply.status == 401
    assert reply.header(b"www-authenticate") == b"Bearer"


async def test_status_map_token_lacks_scope(start_mcp) -> None:
    from trio_mcp import Server

    async def no_tools(principal: object, method: str, name: str | None) -> bool:
        return method != "tools/call"

    app = Server("scoped", authorize=no_tools)
    app.add_tool(lambda: "x", name="t")
    server = await start_mcp(app)
    body = modern_body("tools/call", {"name": "t"})
    origin = (b"Origin", b"http://localhost:5173")
    reply, answer = await modern_call(server.ports[0], body, extra=[*modern_headers(body), origin])
    assert reply.status == 403
    assert reply.header(b"www-authenticate") == b'Bearer error="insufficient_scope"'
    assert reply.header(b"access-control-allow-origin") == b"http://localhost:5173"
    assert answer["id"] == 1
    reply, answer = await modern_call(server.ports[0], modern_body("tools/list"))
    assert reply.status == 200  # the hook refuses tools/call only
    assert [tool["name"] for tool in answer["result"]["tools"]] == ["t"]


async def test_server_info_follows_the_apps_name_version_and_title(start_mcp) -> None:
    """serverInfo is built once and reused, but a changed name, version or
    title (even an equal string that is a new object) shows in the next result."""
    from trio_mcp import Server

    app = Server("before", "1.0")

    @app.tool()
    async def ping() -> str:
        return "pong"

    port = (await start_mcp(app)).ports[0]
    body = modern_body("tools/call", {"name": "ping", "arguments": {}})
    key = "io.modelcontextprotocol/serverInfo"

    async def info() -> dict:
        _, answer = await modern_call(port, body)
        return answer["result"]["_meta"][key]

    assert await info() == {"name": "before", "version": "1.0"}
    app.title = "Shown"
    assert await info() == {"name": "before", "version": "1.0", "title": "Shown"}
    app.name, app.version = "after", "2.0"
    assert await info() == {"name": "after", "version": "2.0", "title": "Shown"}
    app.title = None
    assert await info() == {"name": "after", "version": "2.0"}
    app.version = "".join(["2", ".0"])  # equal, not identical: rebuilt, same content
    assert await info() == {"name": "after", "version": "2.0"}


async def test_cache_hints_per_list_and_per_resource(start_mcp) -> None:
    from trio_mcp import Server

    app = Server("cached")

    @app.resource("test://hot", cache=(5000, "public"))
    async def hot() -> str:
        return "hot"

    @app.resource("test://plain")
    async def plain() -> str:
        return "plain"

    server = await start_mcp(app, cache_hints={"resources/list": (60000, "public")})
    port = server.ports[0]
    _, listed = await modern_call(port, modern_body("resources/list"))
    assert (listed["result"]["ttlMs"], listed["result"]["cacheScope"]) == (60000, "public")
    _, hot_read = await modern_call(port, modern_body("resources/read", {"uri": "test://hot"}))
    assert (hot_read["result"]["ttlMs"], hot_read["result"]["cacheScope"]) == (5000, "public")
    _, plain_read = await modern_call(port, modern_body("resources/read", {"uri": "test://plain"}))
    assert (plain_read["result"]["ttlMs"], plain_read["result"]["cacheScope"]) == (0, "private")


async def test_shutdown_ends_listen_streams_with_their_response(nursery) -> None:
    from _support import EventReader
    from mcp_fixtures import everything

    from trio_mcp import HTTPServer, MCPConfig, ServerConfig, serve_mcp

    server: HTTPServer = await nursery.start(
        lambda task_status: serve_mcp(
            everything, MCPConfig(http=ServerConfig(port=0)), task_status=task_status
        )
    )
    body = modern_body(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, id="L"
    )
    async with await connect(server.ports[0]) as client:
        reader = EventReader(client)
        with trio.fail_after(10):
            await reader.head(mcp_post(body, version=V, extra=modern_headers(body)))
            await reader.message()  # the acknowledgement
            server.shutdown()
            _, final = await reader.message()
    assert final == {
        "jsonrpc": "2.0",
        "id": "L",
        "result": {
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/subscriptionId": "L"},
        },
    }


def test_shared_port_without_shared_state_keys_warns(caplog) -> None:
    from trio_mcp import MCPConfig, MCPEndpoint, Server, ServerConfig

    MCPEndpoint(Server("w"), MCPConfig(http=ServerConfig(reuse_port=True)))
    assert "request_state_keys is empty" in caplog.text
    caplog.clear()
    MCPEndpoint(
        Server("w"), MCPConfig(http=ServerConfig(reuse_port=True), request_state_keys=("k",))
    )
    MCPEndpoint(Server("w"), MCPConfig())
    assert "request_state_keys" not in caplog.text


def test_the_modern_methods_follow_what_is_registered() -> None:
    """The set is cached, but a tool added or removed later changes it at once."""
    from trio_mcp import Server
    from trio_mcp._mcp._dispatch import Dispatcher
    from trio_mcp._stores._sessions import MemorySessionStore

    app = Server("gated")
    dispatch = Dispatcher(app, MemorySessionStore(1, 1.0))
    assert dispatch.modern_methods() == {"server/discover"}

    async def echo(text: str) -> str:
        return text

    app.add_tool(echo)
    assert {"tools/list", "tools/call"} <= dispatch.modern_methods()
    app.remove_tool("echo")
    assert dispatch.modern_methods() == {"server/discover"}


def test_the_shared_capabilities_follow_what_is_registered() -> None:
    """Initialize answers share one capabilities dict until a registration changes it."""
    from trio_mcp import Server

    app = Server("shared")
    first = app.shared_capabilities()
    assert first == {"logging": {}} and app.shared_capabilities() is first

    async def echo(text: str) -> str:
        return text

    app.add_tool(echo)
    assert app.shared_capabilities()["tools"] == {"listChanged": True}
    app.add_prompt(echo, name="p")
    assert "prompts" in app.shared_capabilities()
    app.remove_tool("echo")
    assert "tools" not in app.shared_capabilities()
    assert app.shared_capabilities() == app.capabilities()
    assert app.capabilities() is not app.capabilities()  # the public call copies


async def test_a_listen_stream_subscribes_to_a_bounded_number_of_resources(start_mcp) -> None:
    """40 listeners with 150,000 URIs once took 732 MB, and every update
    scanned every list."""
    port = (await start_mcp(max_listen_subscriptions=3)).ports[0]
    uris = [f"test://r{n}" for n in range(4)]
    body = modern_body("subscriptions/listen", {"notifications": {"resourceSubscriptions": uris}})
    reply, answer = await modern_call(port, body)
    assert (reply.status, answer["error"]["code"]) == (400, -32602)
    assert "at most 3" in answer["error"]["message"]
