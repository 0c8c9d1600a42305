"""Sealed requestState: secrecy, integrity, one spelling, binding, expiry and
key rotation."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp import MCPError
from trio_mcp._protocol._request_state import (
    CLOCK_SKEW_S,
    StateSealer,
    default_principal_key,
    params_digest,
)

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
        {"now": 100.0 + 600 + CLOCK_SKEW_S + 0.01},
    ],
)
def test_state_is_bound_and_expires(over: dict) -> None:
    sealer = StateSealer([b"k1"], ttl_s=600)
    with pytest.raises(MCPError) as info:
        open_(sealer, seal(sealer), **over)
    assert info.value.code == -32602


def test_another_replica_a_little_ahead_still_accepts_it() -> None:
    """Expiry is wall-clock time with an allowance for replicas' clocks."""
    ring = [b"shared"]
    token = seal(StateSealer(ring, ttl_s=600), now=1_800_000_000.0)
    other = StateSealer(ring, ttl_s=600)
    assert open_(other, token, now=1_800_000_000.0 + 600 + CLOCK_SKEW_S - 1)[0] == {"step": 2}


def test_the_client_cannot_read_the_state() -> None:
    sealer = StateSealer([b"k1"])
    token = sealer.seal(
        {"password": "hunter2"}, {}, principal="alice", method="tools/call", digest=D, now=1.0
    )
    raw = base64.urlsafe_b64decode(token[3:] + "=" * (-len(token[3:]) % 4))
    assert b"hunter2" not in raw and b"password" not in raw
    assert b"alice" not in raw


def _lenient(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _other_spellings(token: str) -> list[str]:
    """Spellings of `token` a lenient base64 decoder reads as the same bytes."""
    body = token[3:]
    same = _lenient(body)
    variants = [token + "=", token + "==", token[:3] + body[:4] + "\n" + body[4:]]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for char in alphabet:  # the unused low bits of the last character
        other = body[:-1] + char
        if other != body and _lenient(other) == same:
            variants.append(token[:3] + other)
    return variants


@given(st.text(max_size=8))
def test_a_token_has_one_spelling(filler: str) -> None:
    sealer = StateSealer([b"k1"])
    token = sealer.seal(
        {"f": filler}, {}, principal="alice", method="tools/call", digest=D, now=100.0
    )
    assert open_(sealer, token)[0] == {"f": filler}
    for variant in _other_spellings(token):
        with pytest.raises(MCPError):
            open_(sealer, variant)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"),
        lambda t: t.replace("v2.", "v1."),
        lambda t: "v2." + t[3:][::-1],
        lambda t: t[:20],
        lambda t: "garbage",
        lambda t: 42,
        lambda t: "v2.!!!???",
        lambda t: "v2.",
        lambda t: "v2." + "é" * 40,
    ],
)
def test_tampered_state_is_refused(tamper) -> None:
    sealer = StateSealer([b"k1"])
    with pytest.raises(MCPError):
        open_(sealer, tamper(seal(sealer)))


@pytest.mark.parametrize(
    ("one", "other"),
    [("1", 1), (1, True), ("a", b"a"), ({"sub": "a"}, {"sub": "b"}), (None, ""), ([1], "[1]")],
)
def test_principals_that_differ_have_different_keys(one: object, other: object) -> None:
    assert default_principal_key(one) != default_principal_key(other)


def test_equal_principals_have_one_key() -> None:
    first = {"sub": "alice", "scopes": ["a", "b"]}
    second = {"scopes": ["a", "b"], "sub": "alice"}
    assert default_principal_key(first) == default_principal_key(second)


def test_a_principal_with_no_stable_key_is_refused() -> None:
    """Two objects that print alike once shared states (the key was their repr)."""

    class User:
        def __repr__(self) -> str:
            return "User()"

    with pytest.raises(TypeError, match="principal_key="):
        default_principal_key(User())


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
