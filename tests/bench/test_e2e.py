"""``trio-mcp bench`` end to end, on real loopback sockets, against examples/everything.py
(served in this test's trio loop) and the official Python SDK server.

Each run is bounded: ``--requests`` or a one-second ``--duration``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from _support import EXAMPLES, connect_when_up, free_port

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent.parent / "benchmarks"
PEERS = Path(os.environ.get("TRIO_MCP_PEERS", HERE.parent.parent / ".peers"))
PEER_PYTHON = PEERS / "py" / "bin" / "python"


async def bench(tmp_path: Path, url: str, *args: str) -> tuple[int, dict[str, Any], str]:
    """Run ``trio-mcp bench`` in a subprocess: (exit status, its JSON report, stderr)."""
    report = tmp_path / "report.json"
    with trio.fail_after(90):
        result = await trio.run_process(
            [sys.executable, "-m", "trio_mcp", "bench", url, "--quiet", "--json", str(report)]
            + list(args),
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr, stderr
    assert report.exists(), f"no report; stderr:\n{stderr}\nstdout:\n{result.stdout.decode()}"
    return result.returncode, orjson.loads(report.read_bytes()), stderr


async def url_of(start_mcp) -> str:
    server = await start_mcp()
    return f"http://127.0.0.1:{server.ports[0]}/mcp"


def assert_clean(code: int, report: dict[str, Any], requests: int) -> None:
    assert report["errors"] == {}, report["errors"]
    assert code == 0
    totals = report["totals"]
    assert totals["requests"] == totals["ok"] == requests
    assert report["latency_ms"]["count"] == requests
    latency = report["latency_ms"]
    assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["max"]


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_call(start_mcp, tmp_path: Path, protocol: str) -> None:
    url = await url_of(start_mcp)
    code, report, _ = await bench(
        tmp_path, url, "--protocol", protocol, "--requests", "200", "--connections", "4",
        "--workers", "1", "--warmup", "0.2",
    )  # fmt: skip
    assert_clean(code, report, 200)
    assert report["config"]["protocol"] == protocol
    assert report["workers"][0]["ready_connections"] == 4


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_sse_counts_progress_events(start_mcp, tmp_path: Path, protocol: str) -> None:
    url = await url_of(start_mcp)
    code, report, _ = await bench(
        tmp_path, url, "--scenario", "sse", "--protocol", protocol, "--requests", "40",
        "--connections", "8", "--workers", "1", "--warmup", "0",
    )  # fmt: skip
    assert_clean(code, report, 40)
    assert report["config"]["tool"] == "test_tool_with_progress"
    assert report["totals"]["progress_events"] == 3 * 40  # the tool reports 0, 50, 100
    assert report["latency_ms"]["p50"] >= 20  # three 10 ms sleeps in the tool


async def test_two_workers_merge(start_mcp, tmp_path: Path) -> None:
    url = await url_of(start_mcp)
    code, report, _ = await bench(
        tmp_path, url, "--requests", "200", "--connections", "4", "--workers", "2",
        "--warmup", "0",
    )  # fmt: skip
    assert_clean(code, report, 200)
    assert [w["ok"] for w in report["workers"]] == [100, 100]
    assert sum(row["ok"] for row in report["series"]) == 200


async def test_initialize_churn(start_mcp, tmp_path: Path) -> None:
    server = await start_mcp()
    url = f"http://127.0.0.1:{server.ports[0]}/mcp"
    code, report, _ = await bench(
        tmp_path, url, "--scenario", "initialize", "--requests", "200", "--connections", "4",
        "--workers", "1", "--warmup", "0",
    )  # fmt: skip
    assert_clean(code, report, 200)


async def test_open_loop_keeps_the_rate(start_mcp, tmp_path: Path) -> None:
    url = await url_of(start_mcp)
    code, report, _ = await bench(
        tmp_path, url, "--rate", "200", "--duration", "1.5", "--connections", "4",
        "--workers", "1", "--warmup", "0.2",
    )  # fmt: skip
    assert report["errors"] == {}
    assert code == 0
    totals = report["totals"]
    assert 200 * 1.5 * 0.9 <= totals["ok"] <= 200 * 1.5 + 5
    assert report["config"]["rate"] == 200
    assert report["series"] and report["series"][0]["ok"] > 150


@pytest.mark.parametrize(
    ("scenario", "protocol"),
    [
        ("idle-sessions", "2025-11-25"),
        ("idle-streams", "2025-11-25"),  # GET streams of sessions
        ("idle-streams", "2026-07-28"),  # subscriptions/listen streams
    ],
)
async def test_idle_scenarios(start_mcp, tmp_path: Path, scenario: str, protocol: str) -> None:
    url = await url_of(start_mcp)
    code, report, _ = await bench(
        tmp_path, url, "--scenario", scenario, "--count", "50", "--connections", "8",
        "--duration", "1", "--workers", "1", "--protocol", protocol,
    )  # fmt: skip
    assert report["errors"] == {}
    assert code == 0
    idle = report["idle"]
    assert (idle["requested"], idle["opened"], idle["failed"]) == (50, 50, 0)
    assert idle["held_at_end"] == 50 and idle["dropped_while_held"] == 0
    assert 0 < idle["open_time_s"] < 10
    assert report["latency_ms"]["count"] == 50


@pytest.mark.parametrize(
    ("scenario", "limit"),
    [
        ("call", ("--requests", "100", "--warmup", "0", "--workers", "1")),  # in this process
        ("call", ("--requests", "100", "--warmup", "0", "--workers", "2")),  # in two others
        ("idle-sessions", ("--count", "40", "--duration", "0.5", "--workers", "2")),
    ],
)
async def test_the_sessions_it_opened_are_deleted(
    start_mcp, tmp_path: Path, scenario: str, limit: tuple[str, ...]
) -> None:
    """Once a run left every session behind and filled a default server's table."""
    server = await start_mcp()
    sessions = server.handler.stores.sessions
    url = f"http://127.0.0.1:{server.ports[0]}/mcp"
    code, report, _ = await bench(
        tmp_path, url, "--scenario", scenario, *limit, "--connections", "8",
    )  # fmt: skip
    assert code == 0 and report["errors"] == {}
    assert sessions.count() == 0


async def test_wrong_tool_is_counted_as_a_jsonrpc_error(start_mcp, tmp_path: Path) -> None:
    url = await url_of(start_mcp)
    code, report, _ = await bench(
        tmp_path, url, "--tool", "no_such_tool", "--requests", "200", "--connections", "4",
        "--workers", "1", "--warmup", "0.2",
    )  # fmt: skip
    assert code == 1
    assert report["errors"] == {"jsonrpc -32602": 200}
    assert report["totals"]["ok"] == 0


async def test_closed_port_gives_connect_errors_and_a_clean_exit(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    code, report, stderr = await bench(
        tmp_path, url, "--requests", "50", "--connections", "4", "--workers", "1", "--warmup", "0"
    )
    assert code == 1
    assert set(report["errors"]) == {"connect"}
    assert report["errors"]["connect"] >= 4 * 3  # every connection tried three times
    assert report["totals"]["ok"] == 0
    assert report["failures"] == [
        "worker 0 gave up: every connection failed to connect 3 times in a row"
    ]
    assert "gave up" in stderr


async def test_a_server_that_dies_mid_run(tmp_path: Path) -> None:
    # The server is killed once its access log shows answered calls, not
    # after a fixed time: on a loaded machine the bench may take seconds to
    # get going.
    port = free_port()
    answered = tmp_path / "access.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "trio_mcp", "run", str(EXAMPLES / "everything.py"),
         "--port", str(port), "--access-log", "--access-log-path", str(answered),
         "--log-level", "warning"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with trio.fail_after(20):
            client = await connect_when_up(port)
            await client.stream.aclose()

        async def kill_when_answering() -> None:
            with trio.fail_after(60):
                while "tools/call" not in (answered.read_text() if answered.exists() else ""):
                    await trio.sleep(0.05)
            server.send_signal(signal.SIGKILL)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(kill_when_answering)
            code, report, _ = await bench(
                tmp_path, f"http://127.0.0.1:{port}/mcp", "--duration", "8",
                "--connections", "4", "--workers", "1", "--warmup", "0",
            )  # fmt: skip
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
    assert code == 1
    assert report["totals"]["ok"] > 0  # it worked until the server died
    assert set(report["errors"]) <= {"reset", "connect"}
    assert report["errors"].get("connect", 0) > 0  # and then could not reconnect


async def test_plot_and_json_to_stdout(start_mcp, tmp_path: Path) -> None:
    url = await url_of(start_mcp)
    plot = tmp_path / "bench.png"
    with trio.fail_after(90):
        result = await trio.run_process(
            [sys.executable, "-m", "trio_mcp", "bench", url, "--duration", "1.2", "--warmup", "0",
             "--connections", "2", "--workers", "1", "--json", "-", "--plot", str(plot)],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    report = orjson.loads(result.stdout)  # stdout holds the JSON only; the table went to stderr
    assert report["totals"]["ok"] > 0
    assert "latency ms" in result.stderr.decode()
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(
    not PEER_PYTHON.exists() and os.environ.get("CI") != "true",
    reason="run scripts/peers to install the official SDK (CI always does)",
)
async def test_official_python_sdk_server(tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [str(PEER_PYTHON), str(BENCHMARKS / "peers" / "python_sdk_server.py"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with trio.fail_after(60):
            client = await connect_when_up(port)
            await client.stream.aclose()
        code, report, _ = await bench(
            tmp_path, f"http://127.0.0.1:{port}/mcp", "--protocol", "2025-11-25",
            "--requests", "200", "--connections", "4", "--workers", "1", "--warmup", "0.2",
        )  # fmt: skip
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert_clean(code, report, 200)
