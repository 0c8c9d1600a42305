"""``trio-mcp bench URL``: an MCP-aware HTTP load generator for any MCP server.

Modules, in the order a run uses them: `_options` (the command line),
`_target` (URL and the loopback rule), `_requests` (pre-built request bytes),
`_worker` (the epoll loop of one worker process), `_response` (framing and
classifying responses), `_histogram` (HdrHistogram and its exact merge),
`_merge` (worker results into one report), `_run` (the parent process),
`_display` and `_plot` (for people).

rich and hdrhistogram come with the ``loadgen`` extra, matplotlib with ``plot``;
nothing here is imported by ``trio-mcp run`` or by the library.
"""

from __future__ import annotations

import argparse
import sys

from .._errors import UsageError
from ._options import add_arguments, config_from_args

INSTALL_LOADGEN = "pip install 'trio-mcp[loadgen]'"

__all__ = ["add_arguments", "main"]


def missing_dependencies() -> list[str]:
    """The loadgen extra's packages that do not import."""
    missing = []
    try:
        import hdrh.histogram  # noqa: F401
    except ImportError:
        missing.append("hdrhistogram")
    try:
        import rich  # noqa: F401
    except ImportError:
        missing.append("rich")
    return missing


def main(args: argparse.Namespace) -> int:
    """Run ``trio-mcp bench`` with parsed arguments; the exit status (2: usage)."""
    try:
        config = config_from_args(args)
        missing = missing_dependencies()
        if missing:
            raise UsageError(f"trio-mcp bench needs {' and '.join(missing)}: {INSTALL_LOADGEN}")
        from ._run import run

        return run(config)
    except UsageError as exc:
        print(f"trio-mcp bench: error: {exc}", file=sys.stderr)
        return 2
