"""`answered_ids`: which requests one event of a POST stream answers (what a
process following the stream from Redis counts to know when it is over)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp._stores._redis_posts import answered_ids

ids = st.one_of(st.integers(-(2**53), 2**53), st.text(max_size=8))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", []),  # a priming event
        (b'{"jsonrpc":"2.0","id":3,"result":{}}', [3]),
        (b'{"jsonrpc":"2.0","id":"a","error":{"code":-1,"message":"x"}}', ["a"]),
        # a request to the client and a notification answer nothing
        (b'{"jsonrpc":"2.0","id":4,"method":"roots/list"}', []),
        (b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}', []),
        (b'[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{}}]', [1, 2]),
        (b"not json", []),
        (b"[1, null]", []),
    ],
)
def test_answered_ids(data: bytes, expected: list[object]) -> None:
    assert answered_ids(data) == expected


@given(st.lists(ids, max_size=5), st.lists(ids, max_size=5), st.booleans())
def test_a_batch_answers_its_responses_ids_and_nothing_else(
    answered: list[object], asked: list[object], as_batch: bool
) -> None:
    messages = [{"jsonrpc": "2.0", "id": i, "result": {}} for i in answered] + [
        {"jsonrpc": "2.0", "id": i, "method": "ping"} for i in asked
    ]
    if as_batch:
        assert answered_ids(orjson.dumps(messages)) == answered
    else:
        for message in messages:
            expected = [message["id"]] if "result" in message else []
            assert answered_ids(orjson.dumps(message)) == expected
