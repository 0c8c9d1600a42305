"""JSON-RPC 2.0 classification and serialization, as MCP narrows it."""

from __future__ import annotations

import json

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp import MCPError
from trio_mcp._json import INT_MAX, INT_MIN, stdlib_loads
from trio_mcp._protocol._jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    Invalid,
    Notification,
    RPCRequest,
    RPCResponse,
    decode_body,
    error_bytes,
    notification_bytes,
    request_bytes,
    result_bytes,
)


def one(body: bytes) -> object:
    messages, batch = decode_body(body, allow_batch=False)
    assert not batch
    assert len(messages) == 1
    return messages[0]


def test_request() -> None:
    message = one(b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"x"}}')
    assert isinstance(message, RPCRequest)
    assert (message.id, message.method, message.params) == (7, "tools/list", {"cursor": "x"})


def test_request_with_string_id_and_no_params() -> None:
    message = one(b'{"jsonrpc":"2.0","id":"a-1","method":"ping"}')
    assert isinstance(message, RPCRequest)
    assert (message.id, message.params) == ("a-1", {})


def test_notification() -> None:
    message = one(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert isinstance(message, Notification)
    assert message.method == "notifications/initialized"


@pytest.mark.parametrize(
    ("body", "result", "error"),
    [
        (b'{"jsonrpc":"2.0","id":3,"result":{"roots":[]}}', {"roots": []}, None),
        (b'{"jsonrpc":"2.0","id":3,"result":null}', None, None),
        (
            b'{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"no"}}',
            None,
            {"code": -1, "message": "no"},
        ),
    ],
)
def test_response_from_the_client(body: bytes, result: object, error: object) -> None:
    message = one(body)
    assert isinstance(message, RPCResponse)
    assert (message.id, message.result, message.error) == (3, result, error)


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"", PARSE_ERROR),
        (b"{", PARSE_ERROR),
        (b'{"jsonrpc":"2.0","id":1,"method":"x"', PARSE_ERROR),
        (b"\xff\xfe", PARSE_ERROR),
        (b"[" * 100_000 + b"]" * 100_000, PARSE_ERROR),  # huge nesting
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, PARSE_ERROR),
        (b"NaN", PARSE_ERROR),
        (b"1", INVALID_REQUEST),
        (b'"ping"', INVALID_REQUEST),
        (b"null", INVALID_REQUEST),
        (b"[]", INVALID_REQUEST),
        (b'[{"jsonrpc":"2.0","method":"ping","id":1}]', INVALID_REQUEST),  # no batches here
        (b'{"id":1,"method":"ping"}', INVALID_REQUEST),
        (b'{"jsonrpc":"1.0","id":1,"method":"ping"}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":-9223372036854775809,"method":"ping"}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":[1],"method":"ping"}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":7}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0"}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","method":"x","params":[1]}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}', INVALID_PARAMS),
        (b'{"jsonrpc":"2.0","id":1,"method":"x","params":"p"}', INVALID_PARAMS),
        (b'{"jsonrpc":"2.0","id":1}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}', INVALID_REQUEST),
        (b'{"jsonrpc":"2.0","id":1,"error":"bad"}', INVALID_REQUEST),
    ],
)
def test_bad_bodies(body: bytes, code: int) -> None:
    with pytest.raises(MCPError) as info:
        decode_body(body, allow_batch=False)
    assert info.value.code == code


def test_batch_keeps_order_and_isolates_bad_elements() -> None:
    messages, batch = decode_body(
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"},'
        b'{"jsonrpc":"2.0","method":"notifications/initialized"},'
        b'{"jsonrpc":"2.0","id":"b","method":5},'
        b"42]",
        allow_batch=True,
    )
    assert batch
    assert [type(m) for m in messages] == [RPCRequest, Notification, Invalid, Invalid]
    bad_with_id, bad_without = messages[2], messages[3]
    assert isinstance(bad_with_id, Invalid) and bad_with_id.id == "b"
    assert bad_with_id.error.code == INVALID_REQUEST
    assert isinstance(bad_without, Invalid) and bad_without.id is None


def test_empty_batch_is_invalid_even_where_batches_are_allowed() -> None:
    with pytest.raises(MCPError) as info:
        decode_body(b"[]", allow_batch=True)
    assert info.value.code == INVALID_REQUEST


def test_serialization() -> None:
    assert orjson.loads(result_bytes(1, {"a": 1})) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"a": 1},
    }
    assert orjson.loads(error_bytes(None, MCPError(-32700, "Parse error"))) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    assert orjson.loads(error_bytes("x", MCPError(-32602, "bad", {"field": "a"})))["error"] == {
        "code": -32602,
        "message": "bad",
        "data": {"field": "a"},
    }
    assert orjson.loads(notification_bytes("notifications/progress", {"progress": 1})) == {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progress": 1},
    }
    assert orjson.loads(request_bytes(5, "roots/list")) == {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "roots/list",
    }


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize("id", [INT_MIN, INT_MAX, 0, -1])
def test_integer_ids_up_to_64_bits(id: int) -> None:
    body = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}' % id
    message = one(body)
    assert isinstance(message, RPCRequest) and message.id == id
    assert stdlib_loads(body)["id"] == id


@pytest.mark.parametrize("id", [INT_MIN - 1, INT_MAX + 1, 2**70])
def test_larger_integer_ids_are_refused_by_every_json_backend(id: int) -> None:
    """orjson reads them as floats, and so does the standard library's
    backend (where orjson has no wheel)."""
    body = json.dumps({"jsonrpc": "2.0", "id": id, "method": "ping"}).encode()
    with pytest.raises(MCPError) as info:
        decode_body(body, allow_batch=False)
    assert info.value.code == INVALID_REQUEST
    read = stdlib_loads(body)["id"]
    assert type(read) is float and read == orjson.loads(body)["id"]


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash(body: bytes) -> None:
    try:
        messages, _ = decode_body(body, allow_batch=True)
    except MCPError as exc:
        assert exc.code in (PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS)
    else:
        assert messages


@given(
    st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"]), json_values
    )
)
def test_arbitrary_objects_classify_or_fail_cleanly(obj: dict[str, object]) -> None:
    body = orjson.dumps(obj)
    try:
        message = one(body)
    except MCPError as exc:
        assert exc.code in (INVALID_REQUEST, INVALID_PARAMS)
    else:
        assert obj["jsonrpc"] == "2.0"
        if isinstance(message, RPCRequest):
            assert obj["id"] == message.id and message.id is not None
            assert isinstance(message.params, dict)
        elif isinstance(message, Notification):
            assert "id" not in obj
        else:
            assert isinstance(message, RPCResponse)
