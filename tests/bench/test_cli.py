"""``trio-mcp bench`` argument errors: a clear message and exit status 2, never a traceback."""

from __future__ import annotations

import sys

import pytest

from trio_mcp._cli import main

URL = "http://127.0.0.1:9/mcp"


def bench_exit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", *args])
    code = exit_info.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--duration", "1", "--requests", "5"], "not both"),
        (["--args", "{nope"], "--args is not valid JSON"),
        (["--args", "[1, 2]"], "--args must be a JSON object"),
        (["--scenario", "initialize", "--protocol", "2026-07-28"], "needs sessions"),
        (["--scenario", "idle-sessions", "--protocol", "2026-07-28"], "needs sessions"),
        (["--scenario", "idle-sessions", "--requests", "5"], "no --requests"),
        (["--scenario", "idle-sessions", "--rate", "5"], "--rate does not apply"),
        (["--connections", "0"], "--connections must be at least 1"),
        (["--count", "0"], "--count must be at least 1"),
        (["--rate", "0"], "--rate must be positive"),
        (["--duration", "-1"], "--duration must be positive"),
        (["--timeout", "0"], "--timeout must be positive"),
        (["--warmup", "-1"], "--warmup cannot be negative"),
        (["--requests", "0"], "--requests must be at least 1"),
        (["--workers", "0"], "--workers must be at least 1"),
        (["--plot", "out.svg"], "ending in .png"),
    ],
)
def test_argument_errors(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, err = bench_exit(capsys, URL, *args)
    assert code == 2
    assert message in err
    assert err.startswith("trio-mcp bench: error:")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://127.0.0.1/mcp", "https is not supported"),
        ("127.0.0.1:8000", "expected http://"),
        ("http://192.0.2.1:8000/mcp", "--allow-remote"),
    ],
)
def test_bad_or_remote_urls(capsys: pytest.CaptureFixture[str], url: str, message: str) -> None:
    code, err = bench_exit(capsys, url, "--requests", "1")
    assert code == 2
    assert message in err


def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = bench_exit(capsys, URL, "--protocol", "2024-11-05")
    assert code == 2
    assert "invalid choice" in err
    code, err = bench_exit(capsys)
    assert code == 2
    assert "url" in err


def test_missing_loadgen_extra_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)  # import rich now raises ImportError
    code, err = bench_exit(capsys, URL, "--requests", "1")
    assert code == 2
    assert "needs rich: pip install 'trio-mcp[loadgen]'" in err
    monkeypatch.setitem(sys.modules, "hdrh.histogram", None)
    code, err = bench_exit(capsys, URL, "--requests", "1")
    assert "needs hdrhistogram and rich: pip install 'trio-mcp[loadgen]'" in err


def test_missing_plot_extra_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, err = bench_exit(capsys, URL, "--requests", "1", "--plot", "x.png")
    assert code == 2
    assert "--plot needs matplotlib: pip install 'trio-mcp[plot]'" in err


def test_defaults() -> None:
    import argparse

    from trio_mcp._bench._options import add_arguments, config_from_args, default_workers

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    config = config_from_args(parser.parse_args([URL]))
    assert (config.protocol, config.scenario, config.tool) == ("2025-11-25", "call", "echo")
    assert config.arguments == {"text": "hello"}
    assert (config.connections, config.duration_s, config.rate) == (64, 10.0, None)
    assert config.workers == min(default_workers(), 64)
    sse = config_from_args(parser.parse_args([URL, "--scenario", "sse", "--requests", "3"]))
    assert (sse.tool, sse.arguments, sse.duration_s, sse.workers) == (
        "test_tool_with_progress",
        {},
        None,
        min(default_workers(), 3),
    )
