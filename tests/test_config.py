from __future__ import annotations

import dataclasses

import pytest

from trio_mcp import ServerConfig


def test_defaults_match_the_contract() -> None:
    config = ServerConfig()
    assert config.host == "127.0.0.1"
    assert config.idle_timeout_s == 30
    assert config.max_requests_per_connection == 1000
    assert config.max_body_bytes == 4 * 1024 * 1024
    assert config.max_head_bytes == 16 * 1024


def test_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ServerConfig().port = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"port": 70000},
        {"idle_timeout_s": 0},
        {"head_timeout_s": -1},
        {"write_timeout_s": float("nan")},
        {"max_body_bytes": 0},
        {"max_header_count": 1.5},
        {"max_request_line_bytes": 20000},
        {"backlog": 0},
    ],
)
def test_invalid_values_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ServerConfig(**kwargs)  # type: ignore[arg-type]
