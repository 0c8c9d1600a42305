"""``trio-mcp run`` serves an application named by file or module, and drains on SIGTERM."""

from __future__ import annotations

import signal
import sys

import orjson
import pytest
import trio
from _support import EXAMPLES, connect_when_up, initialize_body, mcp_post, server_process

from trio_mcp._cli import load_server


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
