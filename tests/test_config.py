from __future__ import annotations

import dataclasses

import pytest

from trio_mcp import MCPConfig, ServerConfig
from trio_mcp._config import RunConfig


def test_defaults_match_the_contract() -> None:
    config = ServerConfig()
    assert config.host == "127.0.0.1"
    assert config.idle_timeout_s == 30
    assert config.max_requests_per_connection == 1000
    assert config.max_body_bytes == 4 * 1024 * 1024
    assert config.max_head_bytes == 16 * 1024
    assert config.drain_delay_s == 0  # (Ctrl-C stops a local server without a wait)


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
        {"max_connections": 0},
        {"max_connections_per_address": 0},
        {"slow_heads_threshold": 1},
        {"slow_heads_threshold": 2.5},
        {"max_receiving_bytes": 0},
        {"forwarded_allow_ips": ("10.0.0.0/8", "proxy")},
        {"drain_delay_s": -1},
        {"drain_delay_s": float("inf")},
        {"drain_delay_s": float("nan")},
    ],
)
def test_invalid_values_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ServerConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_requests_per_session": 0},
        {"max_client_requests_per_session": 0},
        {"max_listen_subscriptions": 0},
        {"max_sessions_per_client": 0},
        {"request_timeout_s": 0},
    ],
)
def test_invalid_endpoint_quotas_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        MCPConfig(**kwargs)  # type: ignore[arg-type]


def test_a_clients_share_of_sessions_defaults_to_a_quarter() -> None:
    assert MCPConfig(max_sessions=100).sessions_per_client == 25
    assert MCPConfig(max_sessions=2).sessions_per_client == 1
    assert MCPConfig(max_sessions_per_client=7).sessions_per_client == 7


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ssl_keyfile": "key.pem"}, "ssl_keyfile needs ssl_certfile"),
        ({"ssl_keyfile_password": "x"}, "ssl_keyfile_password needs ssl_certfile"),
        ({"ssl_ca_certs": "ca.pem"}, "ssl_ca_certs needs ssl_certfile"),
        ({"ssl_cert_reqs": "required"}, "ssl_cert_reqs needs ssl_certfile"),
        ({"ssl_certfile": "c.pem", "ssl_cert_reqs": "always"}, "ssl_cert_reqs must be"),
        ({"ssl_certfile": "c.pem", "ssl_cert_reqs": "required"}, "needs ssl_ca_certs"),
        ({"ssl_certfile": "c.pem", "ssl_cert_reqs": "optional"}, "needs ssl_ca_certs"),
        ({"ssl_certfile": "c.pem", "ssl_ca_certs": "ca.pem"}, "set ssl_cert_reqs"),
        ({"ssl_certfile": "c.pem", "ssl_handshake_timeout_s": 0}, "ssl_handshake_timeout_s"),
        ({"ssl_handshake_timeout_s": float("nan")}, "ssl_handshake_timeout_s"),
    ],
)
def test_inconsistent_tls_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ServerConfig(**kwargs)  # type: ignore[arg-type]


def test_tls_is_off_by_default_and_its_password_is_a_secret() -> None:
    config = ServerConfig()
    assert config.ssl_certfile is None
    assert config.ssl_cert_reqs == "none"
    assert config.ssl_handshake_timeout_s == 10.0
    fields = {f.name: f for f in dataclasses.fields(ServerConfig)}
    assert fields["ssl_keyfile_password"].metadata.get("secret") is True
    assert ServerConfig(
        ssl_certfile="c.pem", ssl_ca_certs="ca.pem", ssl_cert_reqs="required"
    ).ssl_cert_reqs == ("required")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"workers": 0}, "workers must be at least 1"),
        ({"workers": 2, "transport": "stdio"}, "serve HTTP only"),
        ({"worker_heartbeat_timeout_s": 0.0}, "worker_heartbeat_timeout_s must be a positive"),
        ({"worker_start_timeout_s": float("inf")}, "worker_start_timeout_s must be a positive"),
    ],
)
def test_invalid_worker_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RunConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"owner_name": "w_1"}, "owner_name must be 1 to 16"),
        ({"owner_name": "a" * 17}, "owner_name must be 1 to 16"),
        ({"peer_sockets_dir": "/tmp/peers"}, "peer_sockets_dir needs an owner_name"),
    ],
)
def test_invalid_owner_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MCPConfig(**kwargs)  # type: ignore[arg-type]
    assert MCPConfig(owner_name="web-1" + "x" * 11, peer_sockets_dir="/tmp/p").owner_name
