"""The ``trio-mcp`` command line.

    trio-mcp --version
    trio-mcp run TARGET [--config FILE] [--print-config] [--transport http|stdio]
                        [--host HOST] [--port PORT] [--path /mcp] [--SETTING VALUE ...]
    trio-mcp bench URL [--scenario call] [--protocol 2025-11-25] [--connections 64]
                       [--rate R] [--duration S | --requests N] [--json FILE] ...

TARGET names a `Server`: ``path/to/file.py:attr`` or ``package.module:attr``;
without ``:attr``, the first of ``mcp``, ``server`` and ``app`` that is one.
Every setting (`RunConfig` and the configs in it) is a flag, a ``TRIO_MCP_*``
variable and a key of the ``--config`` TOML file (``_settings.py``). SIGINT or
SIGTERM drains the server. The library never configures logging; this command
does, always to stderr. ``--transport stdio`` serves one client on stdin and
stdout (the HTTP settings do not apply) until stdin ends.

``bench`` is a load generator for any MCP server (``trio_mcp._bench``); it
needs the ``loadgen`` extra and exits with its status (0 ok, 1 errors, 2 usage).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import platform
import sys
from pathlib import Path
from types import ModuleType
from typing import Final, NoReturn

import trio

from ._app._server import Server
from ._errors import SettingError
from ._logs import configure as configure_logging
from ._mcp._endpoint import run_mcp
from ._mcp._stdio import run_stdio
from ._settings import add_flags, render, resolve
from ._speedups import build_description
from ._version import __version__

logger = logging.getLogger("trio_mcp.cli")

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


def version() -> str:
    """What ``trio-mcp --version`` prints: our version, the build in use, trio's
    and Python's."""
    return (
        f"trio-mcp {__version__}, trio {trio.__version__}, Python "
        f"{platform.python_version()}; build: {build_description()}"
    )


class _PrintVersion(argparse.Action):
    # (argparse's own "version" action rewraps the line to the terminal's width)
    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        print(version())
        parser.exit()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="trio-mcp", description="A fast MCP server on trio.")
    parser.add_argument(
        "--version", action=_PrintVersion, nargs=0, help="print the version and build, and exit"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run",
        # (no abbreviations: --request-state-keys would be taken for the
        # secret's --request-state-keys-file, and a secret never goes in a flag)
        allow_abbrev=False,
        help="serve an MCP application over HTTP or stdio",
        description="Serve an MCP application. Every setting is also an environment "
        "variable (TRIO_MCP_ and its name in capitals) and a key of the --config file; "
        "a flag wins over the environment, which wins over the file.",
    )
    run.add_argument(
        "app",
        nargs="?",
        default=argparse.SUPPRESS,
        metavar="TARGET",
        help="file.py[:attr] or package.module[:attr]; attr defaults to the first "
        "of mcp, server, app that is a trio_mcp.Server (or the app setting)",
    )
    add_flags(run)
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
    given = vars(args)
    try:
        resolved = resolve(given, os.environ)
    except SettingError as exc:
        _fail(str(exc))
    if given.get("print_config"):
        sys.stdout.write(render(resolved))
        return
    settings = resolved.config
    try:
        configure_logging(settings.log_level, settings.log_format, settings.log_config)
    except ValueError as exc:
        _fail(str(exc))
    for warning in resolved.warnings:
        logger.warning("%s", warning)
    if not settings.app:
        _fail("run needs a TARGET (or app in the configuration)")
    if settings.workers > 1:
        from ._workers import supervise

        supervise(settings)
        return
    if settings.worker_cpu_affinity:
        logger.warning(
            "worker_cpu_affinity applies to the workers of --workers N (N above 1); "
            "one process runs wherever the kernel puts it"
        )
    if settings.transport == "http" and settings.mcp.http.reuse_port:
        from ._workers import warn_if_queues_reset

        warn_if_queues_reset()
    app = load_server(settings.app)
    if settings.transport == "stdio":
        run_stdio(app, settings.mcp)
    else:
        run_mcp(app, settings.mcp)


def _fail(message: str) -> NoReturn:
    """A usage error: one line, exit status 2 (as argparse's own errors)."""
    print(f"trio-mcp: error: {message}", file=sys.stderr)
    raise SystemExit(2)
