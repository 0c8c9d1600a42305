"""The options of ``trio-mcp bench``, checked into one frozen `BenchConfig`."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

import orjson

from .._errors import UsageError
from ._requests import LEGACY_PROTOCOLS, PROTOCOLS, is_modern

SCENARIOS = ("call", "sse", "initialize", "idle-sessions", "idle-streams")
IDLE = ("idle-sessions", "idle-streams")
DEFAULT_TOOLS = {"sse": "test_tool_with_progress"}
DEFAULT_DURATION_S = 10.0
DEFAULT_CONNECTIONS = 64


def default_workers() -> int:
    """Half the CPUs: the server under test usually runs on this machine too."""
    return max(1, (os.cpu_count() or 1) // 2)


@dataclass(frozen=True, slots=True)
class BenchConfig:
    url: str
    protocol: str
    scenario: str
    tool: str
    arguments: dict[str, Any]
    connections: int
    workers: int
    rate: float | None  # total requests/s (open loop) or None (closed loop)
    duration_s: float | None  # None: bounded by `requests`
    requests: int | None
    warmup_s: float
    timeout_s: float
    count: int  # idle scenarios: sessions (or streams) to open
    json_path: str | None
    plot_path: str | None
    quiet: bool
    allow_remote: bool


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="the MCP endpoint, e.g. http://127.0.0.1:8000/mcp")
    parser.add_argument(
        "--protocol",
        default="2025-11-25",
        choices=PROTOCOLS,
        help="protocol revision: 2025-xx opens a session per connection; "
        "2026-07-28 is stateless (default 2025-11-25)",
    )
    parser.add_argument("--scenario", default="call", choices=SCENARIOS, help="(default call)")
    parser.add_argument(
        "--tool",
        help="tool to call (default echo; for --scenario sse test_tool_with_progress)",
    )
    parser.add_argument(
        "--args",
        dest="arguments",
        metavar="JSON",
        help='tool arguments as a JSON object (default {"text":"hello"} for echo, else {})',
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=DEFAULT_CONNECTIONS,
        help="concurrent connections, each with its own session (default 64); "
        "idle scenarios: sessions being opened at once",
    )
    parser.add_argument(
        "--rate",
        type=float,
        help="open loop: total requests/s at fixed intended send times, latency "
        "measured from the intended time (default: closed loop)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        help=f"load-generating processes (default half the CPUs, here {default_workers()})",
    )
    parser.add_argument(
        "--duration",
        type=float,
        help=f"seconds to measure, or to hold idle sessions (default {DEFAULT_DURATION_S:g})",
    )
    parser.add_argument("--requests", type=int, help="stop after this many requests instead")
    parser.add_argument(
        "--warmup", type=float, default=1.0, help="seconds of unrecorded load first (default 1)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds a request (or connect) may take; counted as a timeout error (default 10)",
    )
    parser.add_argument(
        "--count",
        type=int,
        default=100,
        help="idle scenarios: sessions (or streams) to open and hold (default 100)",
    )
    parser.add_argument(
        "--json", dest="json_path", metavar="FILE", help="write results (- for stdout)"
    )
    parser.add_argument(
        "--plot", dest="plot_path", metavar="FILE.png", help="draw latency and throughput"
    )
    parser.add_argument("--quiet", action="store_true", help="no live progress display")
    parser.add_argument(
        "--allow-remote", action="store_true", help="allow a target that is not this machine"
    )


def _positive(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise UsageError(f"{name} must be positive, not {value:g}")


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """Check the parsed options; UsageError names the first problem."""
    scenario: str = args.scenario
    protocol: str = args.protocol
    if scenario in ("initialize", "idle-sessions") and is_modern(protocol):
        raise UsageError(
            f"--scenario {scenario} needs sessions, which protocol {protocol} does not have; "
            f"use --protocol {LEGACY_PROTOCOLS[-1]}"
        )
    tool: str = args.tool or DEFAULT_TOOLS.get(scenario, "echo")
    if args.arguments is None:
        arguments: Any = {"text": "hello"} if tool == "echo" else {}
    else:
        try:
            arguments = orjson.loads(args.arguments)
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"--args is not valid JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise UsageError('--args must be a JSON object, e.g. \'{"text": "hello"}\'')
    for name in ("connections", "count"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    _positive("--rate", args.rate)
    _positive("--duration", args.duration)
    _positive("--timeout", args.timeout)
    if args.warmup < 0:
        raise UsageError("--warmup cannot be negative")
    if args.requests is not None and args.requests < 1:
        raise UsageError("--requests must be at least 1")
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.duration is not None and args.requests is not None:
        raise UsageError("give --duration or --requests, not both")
    if scenario in IDLE:
        if args.requests is not None:
            raise UsageError(f"--scenario {scenario} holds sessions for --duration; no --requests")
        if args.rate is not None:
            raise UsageError(f"--scenario {scenario} opens sessions; --rate does not apply")
    duration = args.duration
    if duration is None and args.requests is None:
        duration = DEFAULT_DURATION_S
    units = args.count if scenario in IDLE else args.connections
    workers = min(args.workers or default_workers(), units)
    if args.requests is not None:
        workers = min(workers, args.requests)
    if args.json_path is not None and args.json_path != "-" and os.path.isdir(args.json_path):
        raise UsageError(f"--json {args.json_path} is a directory")
    if args.plot_path is not None and not args.plot_path.lower().endswith(".png"):
        raise UsageError("--plot writes a PNG file: give a name ending in .png")
    return BenchConfig(
        url=args.url,
        protocol=protocol,
        scenario=scenario,
        tool=tool,
        arguments=arguments,
        connections=args.connections,
        workers=workers,
        rate=args.rate,
        duration_s=duration,
        requests=args.requests,
        warmup_s=0.0 if scenario in IDLE else args.warmup,
        timeout_s=args.timeout,
        count=args.count,
        json_path=args.json_path,
        plot_path=args.plot_path,
        quiet=args.quiet,
        allow_remote=args.allow_remote,
    )
