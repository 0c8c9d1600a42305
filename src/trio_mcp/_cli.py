"""The ``trio-mcp`` command line.

    trio-mcp run TARGET [--transport http|stdio]
                        [--host HOST] [--port PORT] [--path /mcp] [--stateless]
                        [--forwarded-allow-ips ADDRESSES]
                        [--json-response] [--max-sessions 1024]
                        [--max-sessions-per-client N] [--log-level info]
    trio-mcp bench URL [--scenario call] [--protocol 2025-11-25] [--connections 64]
                       [--rate R] [--duration S | --requests N] [--json FILE] ...

TARGET names a `Server`: ``path/to/file.py:attr`` or ``package.module:attr``;
without ``:attr``, the first of ``mcp``, ``server`` and ``app`` that is one.
SIGINT or SIGTERM drains the server. The library never configures logging;
this command does, always to stderr. ``--transport stdio`` serves one client on
stdin and stdout (the HTTP options do not apply) until stdin ends.

``bench`` is a load generator for any MCP server (``trio_mcp._bench``); it
needs the ``loadgen`` extra and exits with its status (0 ok, 1 errors, 2 usage).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Final

from ._app._server import Server
from ._config import MCPConfig, ServerConfig
from ._mcp._endpoint import run_mcp
from ._mcp._stdio import run_stdio

#: The attributes tried, in this order, when TARGET names none: FastMCP's
#: examples call their server ``mcp``, ours ``server``, and some ``app``.
DEFAULT_ATTRIBUTES: Final = ("mcp", "server", "app")


def load_server(target: str) -> Server:
    """The `Server` that TARGET (``file.py[:attr]`` or ``module[:attr]``) names;
    without an attribute, the first of `DEFAULT_ATTRIBUTES` that is a Server.
    A SystemExit says what is missing otherwise."""
    location, _, attribute = target.partition(":")
    module = _import(location)
    if attribute:
        if not hasattr(module, attribute):
            raise SystemExit(f"trio-mcp: {location} has no attribute {attribute!r}")
        app = getattr(module, attribute)
        if not isinstance(app, Server):
            raise SystemExit(f"trio-mcp: {target} is {_kind(app)}, not a trio_mcp.Server")
        return app
    for name in DEFAULT_ATTRIBUTES:
        app = getattr(module, name, None)
        if isinstance(app, Server):
            return app
    raise SystemExit(_no_server(location, module))


def _import(location: str) -> ModuleType:
    if location.endswith(".py") or "/" in location:
        path = Path(location).resolve()
        if not path.is_file():
            raise SystemExit(f"trio-mcp: no such file: {location}")
        spec = importlib.util.spec_from_file_location(f"_trio_mcp_target_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"trio-mcp: cannot import {location}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(location)


def _kind(value: object) -> str:
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _no_server(location: str, module: ModuleType) -> str:
    """Why `module` has no default Server: what each default name holds, and
    the Servers it has under other names."""
    wrong = [
        f"{name} is {_kind(getattr(module, name))}, not a trio_mcp.Server"
        for name in DEFAULT_ATTRIBUTES
        if hasattr(module, name)
    ]
    missing = [name for name in DEFAULT_ATTRIBUTES if not hasattr(module, name)]
    if missing:
        quoted = [repr(name) for name in missing]
        listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
        wrong.append(f"no attribute named {listed}")
    message = f"trio-mcp: found no trio_mcp.Server in {location}: {'; '.join(wrong)}"
    others = [name for name, value in vars(module).items() if isinstance(value, Server)]
    if others:
        message += ". Name it: " + ", ".join(f"{location}:{name}" for name in others)
    return message


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="trio-mcp", description="A fast MCP server on trio.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="serve an MCP application over HTTP or stdio")
    run.add_argument(
        "target",
        help="file.py[:attr] or package.module[:attr]; attr defaults to the first "
        "of mcp, server, app that is a trio_mcp.Server",
    )
    run.add_argument(
        "--transport",
        choices=["http", "stdio"],
        default="http",
        help="http (default): serve on --host and --port; stdio: serve one client on "
        "stdin and stdout (logs go to stderr), until stdin ends",
    )
    run.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    run.add_argument(
        "--forwarded-allow-ips",
        default="",
        help="comma-separated proxies (addresses or networks) whose Forwarded or "
        "X-Forwarded-* headers name the client; none by default",
    )
    run.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    run.add_argument("--path", default="/mcp", help="the MCP endpoint (default /mcp)")
    run.add_argument("--stateless", action="store_true", help="serve without sessions")
    run.add_argument(
        "--json-response", action="store_true", help="always answer JSON, never stream"
    )
    run.add_argument("--reuse-port", action="store_true", help="set SO_REUSEPORT")
    run.add_argument(
        "--no-trio-tweaks",
        dest="trio_tweaks",
        action="store_false",
        help="run on trio's public behaviour alone (default: the trio tweaks, on a tested trio)",
    )
    run.add_argument(
        "--no-batch-end-sends",
        dest="batch_end_sends",
        action="store_false",
        help="send each JSON answer at once (default: a scheduler batch's answers go together)",
    )
    run.add_argument(
        "--gc-full-interval",
        type=float,
        default=ServerConfig().gc_full_interval_s,
        metavar="SECONDS",
        help="full garbage collections at most this often (default %(default)s; "
        "0 leaves Python's collector as it is)",
    )
    run.add_argument(
        "--max-sessions",
        type=int,
        default=MCPConfig().max_sessions,
        help="live sessions at most; initialize beyond gets 503 (default %(default)s)",
    )
    run.add_argument(
        "--max-sessions-per-client",
        type=int,
        default=None,
        help="live sessions of one principal, or of one address without one; initialize "
        "beyond gets 429 (default: a quarter of --max-sessions; a load generator on one "
        "host that opens more sessions needs it raised)",
    )
    run.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    bench = commands.add_parser(
        "bench",
        help="load-benchmark an MCP server over HTTP",
        description="An MCP-aware load generator: sessions or stateless requests, "
        "closed or open loop, latency percentiles from a histogram.",
    )
    from ._bench import _options

    _options.add_arguments(bench)
    args = parser.parse_args(argv)
    if args.command == "bench":
        from ._bench import main as bench_main

        raise SystemExit(bench_main(args))
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,  # (never stdout: with --transport stdio, it is the protocol's)
    )
    app = load_server(args.target)
    config = MCPConfig(
        http=ServerConfig(
            host=args.host,
            port=args.port,
            forwarded_allow_ips=tuple(
                item.strip() for item in args.forwarded_allow_ips.split(",") if item.strip()
            ),
            reuse_port=args.reuse_port,
            trio_tweaks=args.trio_tweaks,
            batch_end_sends=args.batch_end_sends,
            gc_full_interval_s=args.gc_full_interval or None,
        ),
        path=args.path,
        stateless=args.stateless,
        json_response_only=args.json_response,
        max_sessions=args.max_sessions,
        max_sessions_per_client=args.max_sessions_per_client,
    )
    if args.transport == "stdio":
        run_stdio(app, config)
    else:
        run_mcp(app, config)
