"""deploy/nginx.conf keeps DESIGN.md's proxy rules and the README shows it as
it is; the nginx harness skips without nginx only where nginx is not required."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from nginx_fixtures import DEPLOYED, nginx_binary, site_config

from trio_mcp import MCPConfig, ServerConfig

README = Path(__file__).resolve().parents[2] / "README.md"


def directives() -> dict[str, list[str]]:
    """Each directive of the deployed file, with the arguments of each use."""
    found: dict[str, list[str]] = {}
    for line in DEPLOYED.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line.endswith(";"):
            name, _, arguments = line[:-1].partition(" ")
            found.setdefault(name, []).append(arguments.strip())
    return found


def seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(s|m)?", value)
    assert match, value
    return int(match[1]) * (60 if match[2] == "m" else 1)


def test_the_readme_shows_the_deployed_file() -> None:
    blocks = re.findall(r"```nginx\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks == [DEPLOYED.read_text()]


def test_the_deployed_file_keeps_the_proxy_rules() -> None:
    found = directives()
    assert found["proxy_http_version"] == ["1.1"]
    assert found["keepalive"] == ["32"]  # (upstream connections reused)
    assert found["proxy_buffering"] == ["off"]
    assert found["proxy_request_buffering"] == ["on"]  # no chunked upstream requests
    headers = dict(value.split(" ", 1) for value in found["proxy_set_header"])
    assert headers == {
        "Connection": '""',
        "Host": "$host",
        "X-Forwarded-For": "$proxy_add_x_forwarded_for",
        "X-Forwarded-Proto": "$scheme",
    }
    config = MCPConfig()
    (read_timeout,) = found["proxy_read_timeout"]
    assert config.stream_slow_answers_after_s is not None
    assert seconds(read_timeout) > max(config.keepalive_s, config.stream_slow_answers_after_s)
    (upstream_idle,) = found["keepalive_timeout"]
    assert seconds(upstream_idle) < ServerConfig().idle_timeout_s
    (body,) = found["client_max_body_size"]
    assert body == f"{ServerConfig().max_body_bytes // 2**20}m"


def test_the_harness_changes_only_ports_and_the_read_timeout() -> None:
    original = DEPLOYED.read_text()
    changed = site_config(18001, 18002, read_timeout_s=5)
    differences = {
        (a.strip(), b.strip())
        for a, b in zip(original.splitlines(), changed.splitlines(), strict=True)
        if a != b
    }
    assert differences == {
        ("server 127.0.0.1:8000;", "server 127.0.0.1:18001;"),
        ("listen 80;", "listen 127.0.0.1:18002;"),
        ("proxy_read_timeout 60s;", "proxy_read_timeout 5s;"),
    }


def test_missing_nginx_skips_unless_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    monkeypatch.delenv("TRIO_MCP_REQUIRE_NGINX", raising=False)
    with pytest.raises(pytest.skip.Exception):
        nginx_binary()
    monkeypatch.setenv("TRIO_MCP_REQUIRE_NGINX", "1")
    with pytest.raises(pytest.fail.Exception, match="nginx is required"):
        nginx_binary()
