"""Sealed requestState: integrity, binding, expiry and key rotation."""

from __future__ import annotations

import pytest

from trio_mcp import MCPError
from trio_mcp._protocol._request_state import StateSealer, params_digest

D = params_digest({"name": "tool", "arguments": {"a": 1}})


def seal(sealer: StateSealer, **over: object) -> str:
    args: dict = {"principal": "alice", "method": "tools/call", "digest": D, "now": 100.0}
    args.update(over)
    return sealer.seal({"step": 2}, {"k": {"action": "accept"}}, **args)


def open_(sealer: StateSealer, token: object, **over: object):
    args: dict = {"principal": "alice", "method": "tools/call", "digest": D, "now": 200.0}
    args.update(over)
    return sealer.open(token, **args)


def test_round_trip() -> None:
    sealer = StateSealer([b"k1"])
    assert open_(sealer, seal(sealer)) == ({"step": 2}, {"k": {"action": "accept"}})


@pytest.mark.parametrize(
    "over",
    [
        {"principal": "bob"},
        {"method": "prompts/get"},
        {"digest": params_digest({"name": "tool", "arguments": {"a": 2}})},
        {"now": 100.0 + 601},
    ],
)
def test_state_is_bound_and_expires(over: dict) -> None:
    sealer = StateSealer([b"k1"], ttl_s=600)
    with pytest.raises(MCPError) as info:
        open_(sealer, seal(sealer), **over)
    assert info.value.code == -32602


@pytest.mark.parametrize(
    "tamper",
    [
        lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"),
        lambda t: t.replace("v1.", "v2."),
        lambda t: "v1." + t.split(".")[1][::-1] + "." + t.split(".")[2],
        lambda t: "garbage",
        lambda t: 42,
        lambda t: "v1.!!!.???",
    ],
)
def test_tampered_state_is_refused(tamper) -> None:
    sealer = StateSealer([b"k1"])
    with pytest.raises(MCPError):
        open_(sealer, tamper(seal(sealer)))


def test_key_rotation_keeps_retries_in_flight() -> None:
    old = StateSealer([b"old"])
    token = seal(old)
    rotated = StateSealer([b"new", b"old"])
    assert open_(rotated, token)[0] == {"step": 2}
    assert open_(rotated, seal(rotated))[0] == {"step": 2}
    with pytest.raises(MCPError):
        open_(StateSealer([b"new"]), token)


def test_digest_ignores_round_data() -> None:
    base = {"name": "t", "arguments": {"x": [1, {"b": 2, "a": 1}]}}
    again = {**base, "_meta": {"progressToken": 1}, "inputResponses": {"k": 1}, "requestState": "s"}
    assert params_digest(base) == params_digest(again)
    reordered = {"arguments": {"x": [1, {"a": 1, "b": 2}]}, "name": "t"}
    assert params_digest(base) == params_digest(reordered)


def test_a_generated_key_is_said_so() -> None:
    assert StateSealer().generated
    assert not StateSealer([b"k"]).generated
