"""``trio-mcp run`` serves an application named by file or module, and drains on SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys

import orjson
import pytest
import trio
from _support import EXAMPLES, connect_when_up, initialize_body, mcp_post, server_process

import trio_mcp
from trio_mcp import MCPConfig, ServerConfig
from trio_mcp._cli import load_server
from trio_mcp._speedups import USING_EXTENSIONS


async def test_run_serves_the_target_and_drains_on_sigterm() -> None:
    target = f"{EXAMPLES / 'everything.py'}:server"
    with server_process("-m", "trio_mcp", "run", target) as (proc, port), trio.fail_after(20):
        client = await connect_when_up(port)
        async with client:
            await client.send(mcp_post(initialize_body()))
            reply = await client.read_reply()
            assert reply.status == 200
            assert orjson.loads(reply.body)["result"]["serverInfo"]["name"] == "trio-mcp-everything"
        proc.send_signal(signal.SIGTERM)
        while proc.poll() is None:
            await trio.sleep(0.05)
        assert proc.returncode == 0


async def test_run_applies_max_sessions() -> None:
    # A load test with more sessions than the default 1,024, or than one
    # client's share of them, needs the limits raised.
    target = f"{EXAMPLES / 'everything.py'}:server"
    run = ("-m", "trio_mcp", "run", target, "--max-sessions", "3", "--log-level", "warning")
    share = ("--max-sessions-per-client", "2")
    with server_process(*run, *share) as (_, port), trio.fail_after(20):
        client = await connect_when_up(port)
        async with client:
            statuses = []
            for _ in range(3):
                await client.send(mcp_post(initialize_body()))
                statuses.append((await client.read_reply()).status)
    assert statuses == [200, 200, 429]


def test_load_server_by_module_and_errors(tmp_path) -> None:
    (tmp_path / "my_app.py").write_text(
        "import trio_mcp\napp = trio_mcp.Server('m')\nnot_a_server = 1\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        assert load_server("my_app:app").name == "m"
        assert load_server(f"{tmp_path / 'my_app.py'}:app").name == "m"
        with pytest.raises(SystemExit, match=r"not a trio_mcp\.Server"):
            load_server("my_app:not_a_server")
        with pytest.raises(SystemExit, match="no such file"):
            load_server(f"{tmp_path / 'missing.py'}")
        with pytest.raises(SystemExit, match=r"my_app has no attribute 'nothing'"):
            load_server("my_app:nothing")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("my_app", None)


@pytest.mark.parametrize(
    ("attributes", "found"),
    [
        (("mcp", "server", "app"), "mcp"),
        (("server", "app"), "server"),
        (("app",), "app"),
        (("app", "other"), "app"),
    ],
)
def test_load_server_finds_mcp_then_server_then_app(tmp_path, attributes, found) -> None:
    lines = ["import trio_mcp"] + [f"{name} = trio_mcp.Server({name!r})" for name in attributes]
    target = tmp_path / "found.py"
    target.write_text("\n".join(lines) + "\n")
    assert load_server(str(target)).name == found


def test_load_server_says_what_is_missing(tmp_path) -> None:
    target = tmp_path / "empty.py"
    target.write_text("import trio_mcp\nmcp = 3\nhelper = trio_mcp.Server('h')\n")
    with pytest.raises(SystemExit) as raised:
        load_server(str(target))
    message = str(raised.value)
    # mcp is there but is not a Server; server and app are missing; the one
    # Server found under another name is suggested.
    assert "mcp is an int, not a trio_mcp.Server" in message
    assert "no attribute named 'server' or 'app'" in message
    assert f"{target}:helper" in message


@pytest.mark.parametrize(
    ("flags", "field", "value"),
    [
        ((), "trio_tweaks", True),
        (("--no-trio-tweaks",), "trio_tweaks", False),
        ((), "batch_end_sends", True),
        (("--no-batch-end-sends",), "batch_end_sends", False),
    ],
)
def test_run_passes_the_scheduling_choices(monkeypatch, flags, field, value) -> None:
    import trio_mcp._cli as cli

    configs = []
    monkeypatch.setattr(cli, "run_mcp", lambda app, config: configs.append(config))
    cli.main(["run", f"{EXAMPLES / 'everything.py'}:server", "--log-level", "warning", *flags])
    assert [getattr(config.http, field) for config in configs] == [value]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **(env or {})},
    )


def test_version_names_the_build() -> None:
    result = _run("-m", "trio_mcp", "--version")
    assert result.returncode == 0
    assert result.stdout.startswith(f"trio-mcp {trio_mcp.__version__}, trio {trio.__version__}, ")
    build = "compiled" if USING_EXTENSIONS else "pure Python ("
    assert f"; build: {build}" in result.stdout


def test_a_port_in_use_is_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run("-m", "trio_mcp", "run", str(EXAMPLES / "everything.py"), "--port", str(port))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == f"trio-mcp: cannot listen on 127.0.0.1:{port}: Address already in use"
    assert "Traceback" not in result.stderr


def test_an_address_not_of_this_host_is_one_line() -> None:
    # (TEST-NET-1: no host has it, so bind fails at once without any traffic)
    result = _run("-m", "trio_mcp", "run", str(EXAMPLES / "everything.py"), "--host", "192.0.2.1")
    assert result.returncode == 1
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith("trio-mcp: cannot listen on 192.0.2.1:8000: ")
    )
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--port", "70000"), {}, "trio-mcp: error: --port: port must be in 0..65535, not 70000"),
        ((), {"TRIO_MCP_MAX_SESSIONS": "many"}, "trio-mcp: error: TRIO_MCP_MAX_SESSIONS: "),
        (("--log-config", "/no/such.json"), {}, "trio-mcp: error: log_config /no/such.json: "),
    ],
)
def test_a_bad_setting_is_one_line(args, env, message) -> None:
    result = _run("-m", "trio_mcp", "run", str(EXAMPLES / "everything.py"), *args, env=env)
    assert result.returncode == 2
    assert result.stderr.startswith(message)
    assert result.stderr.count("\n") == 1


def test_print_config_shows_sources_and_does_not_serve(tmp_path) -> None:
    config = tmp_path / "trio-mcp.toml"
    config.write_text('app = "server.py:mcp"\nport = 9001\n')
    result = _run(
        "-m", "trio_mcp", "run", "--config", str(config), "--print-config", "--stateless",
        env={"TRIO_MCP_PATH": "/api"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert 'app = "server.py:mcp"  # ' + str(config) in result.stdout
    assert "stateless = true  # --stateless" in result.stdout
    assert 'path = "/api"  # TRIO_MCP_PATH' in result.stdout


async def test_start_up_line_as_json_from_the_environment() -> None:
    target = str(EXAMPLES / "everything.py")
    run = ("-m", "trio_mcp", "run", target)
    env = {**os.environ, "TRIO_MCP_LOG_FORMAT": "json"}
    with server_process(*run, env=env) as (proc, port), trio.fail_after(20):
        async with await connect_when_up(port):
            pass
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout is not None
        output = proc.stdout.read().decode()
    records = [orjson.loads(line) for line in output.splitlines()]
    (start,) = [record for record in records if "serving" in record["message"]]
    assert start["level"] == "INFO" and start["logger"] == "trio_mcp.endpoint"
    assert start["message"].startswith(
        f"trio-mcp {trio_mcp.__version__} serving MCP on http://127.0.0.1:{port}/mcp "
        "(revisions 2024-11-05 to 2026-07-28; 2024-11-05 HTTP+SSE at /sse; "
    )


async def test_run_mcp_from_a_script_says_where_it_serves(tmp_path) -> None:
    # No logging configured by the script: run_mcp still says where it serves.
    script = tmp_path / "serve.py"
    script.write_text(
        "import sys, trio_mcp\n"
        "server = trio_mcp.Server('s')\n"
        "config = trio_mcp.MCPConfig(http=trio_mcp.ServerConfig(port=int(sys.argv[-1])),"
        " eras='modern')\n"
        "trio_mcp.run_mcp(server, config)\n"
    )
    with server_process(str(script)) as (proc, port), trio.fail_after(20):
        async with await connect_when_up(port):
            pass
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout is not None
        output = proc.stdout.read().decode()
    assert f"serving MCP on http://127.0.0.1:{port}/mcp (revisions 2026-07-28; " in output
    assert proc.wait() == 0


def test_a_public_address_without_allowed_hosts_is_warned_of(caplog) -> None:
    from trio_mcp._mcp._startup import announce
    from trio_mcp._trio._server import HTTPServer

    def warnings(config: MCPConfig) -> list[str]:
        caplog.clear()
        announce(config, HTTPServer(lambda request: None, config.http))  # (never started)
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]

    caplog.set_level(logging.INFO, "trio_mcp")
    public = ServerConfig(host="0.0.0.0")
    assert "any Host header is accepted" in warnings(MCPConfig(http=public))[0]
    assert warnings(MCPConfig(http=public, allowed_hosts=("mcp.example",))) == []
    assert warnings(MCPConfig()) == []


def test_the_start_up_line_names_what_is_on(caplog) -> None:
    from trio_mcp._mcp._startup import announce
    from trio_mcp._trio._server import HTTPServer

    caplog.set_level(logging.INFO, "trio_mcp")
    config = MCPConfig(metrics_path="/metrics", access_log=True, traces=True, stateless=True)
    announce(config, HTTPServer(lambda request: None, config.http))  # (never started)
    (line,) = [r.getMessage() for r in caplog.records if "serving MCP" in r.getMessage()]
    assert "; stateless; metrics at /metrics; access log to stderr; traces; build: " in line
