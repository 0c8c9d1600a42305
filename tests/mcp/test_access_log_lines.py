"""The access log's lines, piece by piece: whatever a request's fields, the
pieces the request path puts in the buffer join into exactly the line the
format describes (text: space-separated fields, a field with a space, a
quote or a non-ASCII character JSON-quoted; JSON: one object), and the
buffer keeps at most its limit of lines."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from trio_mcp._observe._access_log import AccessLog, Operation, session_hash

texts = st.text(max_size=12)
records = st.tuples(
    st.sampled_from(["", "127.0.0.1", "203.0.113.7", "::1"]),  # client
    st.one_of(st.none(), texts, st.integers(-(2**40), 2**40), st.just(("a", 1)), st.just(["x"])),
    st.sampled_from(["tools/call", "ping", "no such method", "méthode"]),  # method
    st.one_of(st.none(), texts),  # name
    st.one_of(st.none(), st.integers(-40000, 40000)),  # code
    st.sampled_from(["2025-11-25", "2026-07-28", "other"]),  # version
    st.sampled_from([200, 202, 429, 499, 500, 1000]),  # status
    st.floats(0, 30, allow_nan=False),  # seconds
    st.one_of(st.none(), st.text(min_size=1, max_size=40)),  # session id
)


def word(value: str) -> str:
    if value and value.isascii() and value.isprintable() and " " not in value and '"' not in value:
        return value
    return orjson.dumps(value).decode()


def principal_text(principal: object) -> str:
    return "key:" + repr(principal)


def principal_of(principal: object) -> str:
    if principal is None:
        return "-"
    if type(principal) is str:
        return principal[:200]
    if type(principal) is int:
        return str(principal)
    return principal_text(principal)[:200]


def written(log: AccessLog, tmp_path: Path) -> list[str]:
    path = tmp_path / "lines"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        log._flush(fd)
    finally:
        os.close(fd)
    return path.read_text().split("\n")[:-1]  # (not splitlines: a name may hold U+0085)


def add(log: AccessLog, record: tuple[Any, ...], json: bool) -> float:
    client, principal, method, name, code, version, status, seconds, session = record
    operation = Operation(None, method, name, code, False, version, json)
    now = time.perf_counter()
    log.add(now, client, principal, operation, status, seconds, session)
    return time.time()


def check_stamp(stamp: str, wall: float) -> None:
    assert stamp.endswith("Z") and len(stamp) == 24
    parsed = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert abs(parsed.timestamp() - wall) < 1.0


@given(st.lists(records, min_size=1, max_size=6))
def test_text_lines_are_their_fields(tmp_path_factory: Any, batch: list[tuple[Any, ...]]) -> None:
    log = AccessLog(100, principal_text=principal_text)
    walls = [add(log, record, json=False) for record in batch]
    lines = written(log, tmp_path_factory.mktemp("text"))
    assert len(lines) == len(batch)
    for line, record, wall in zip(lines, batch, walls, strict=True):
        client, principal, method, name, code, version, status, seconds, session = record
        stamp, rest = line.split(" ", 1)
        check_stamp(stamp, wall)
        expected = (
            f"{client or '-'} {word(principal_of(principal))} {word(version)} {word(method)} "
            f"{word(name) if name is not None else '-'} {status} "
            f"{code if code is not None else '-'} {int(seconds * 1e6)}us "
            f"{session_hash(session) if session is not None else '-'}"
        )
        assert rest == expected


@given(st.lists(records, min_size=1, max_size=6))
def test_json_lines_are_their_fields(tmp_path_factory: Any, batch: list[tuple[Any, ...]]) -> None:
    log = AccessLog(100, json=True, principal_text=principal_text)
    walls = [add(log, record, json=True) for record in batch]
    lines = written(log, tmp_path_factory.mktemp("json"))
    assert len(lines) == len(batch)
    for line, record, wall in zip(lines, batch, walls, strict=True):
        client, principal, method, name, code, version, status, seconds, session = record
        fields = orjson.loads(line)
        check_stamp(fields.pop("time"), wall)
        assert fields == {
            "client": client or "-",
            "principal": principal_of(principal),
            "era": version,
            "method": method,
            "name": name,
            "status": status,
            "code": code,
            "duration_us": int(seconds * 1e6),
            "session": session_hash(session) if session is not None else None,
        }


def test_the_buffer_keeps_at_most_its_limit(tmp_path: Path) -> None:
    log = AccessLog(3)
    record = ("127.0.0.1", None, "ping", None, None, "2025-11-25", 200, 0.001, None)
    for _ in range(5):
        add(log, record, json=False)
    assert (log.waiting, log.dropped) == (3, 2)
    assert len(written(log, tmp_path)) == 3
    add(log, record, json=False)  # (room again once the writer took the batch)
    assert (log.waiting, log.dropped) == (1, 2)
