"""Micro benchmark: request head framing, parsing and header checks, compiled vs twin.

Run from a checkout (``src`` is put on sys.path when trio_mcp is not importable)::

    python benchmarks/micro_httphead.py [--repeat N] [--json PATH]

Times ``find_head_end``, ``parse_head`` and ``check_headers`` on a typical MCP
request head (as sent by httpx) for the compiled modules and their pure-Python
twins, and prints the best-of-N time per call in ns and the ratio. Without the
compiled modules only the twins are timed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

try:
    import trio_mcp  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

HEAD = (
    b"POST /mcp HTTP/1.1\r\n"
    b"Host: 127.0.0.1:8000\r\n"
    b"User-Agent: python-httpx/0.28.1\r\n"
    b"Accept: application/json, text/event-stream\r\n"
    b"Accept-Encoding: gzip, deflate\r\n"
    b"Connection: keep-alive\r\n"
    b"Content-Type: application/json\r\n"
    b"MCP-Protocol-Version: 2025-11-25\r\n"
    b"Mcp-Session-Id: 4f3c2a1b9e8d7c6b5a4f3e2d1c0b9a8f\r\n"
    b"Content-Length: 98\r\n"
    b"\r\n"
)
MAX_LINE = 8192
MAX_HEADERS = 100


def _import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _cases(httphead: ModuleType, headers_mod: ModuleType) -> dict[str, Callable[[], Any]]:
    find = httphead.find_head_end
    parse = httphead.parse_head
    check = headers_mod.check_headers
    buf = bytearray(HEAD)
    _, _, minor, headers = parse(HEAD, MAX_LINE, MAX_HEADERS)
    return {
        f"find_head_end {len(HEAD)}B": lambda: find(buf, 0),
        f"parse_head {len(HEAD)}B {len(headers)} fields": lambda: parse(
            HEAD, MAX_LINE, MAX_HEADERS
        ),
        f"check_headers {len(headers)} fields": lambda: check(headers, minor),
        "parse_head + check_headers": lambda: check(parse(HEAD, MAX_LINE, MAX_HEADERS)[3], minor),
    }


def _best_ns(func: Callable[[], Any], repeat: int) -> float:
    timer = timeit.Timer(func)
    number, _ = timer.autorange()
    number = max(number, 20_000)
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="best of N (default 7)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)

    httphead_py = importlib.import_module("trio_mcp._httphead_py")
    headers_py = importlib.import_module("trio_mcp._headers_py")
    httphead_c = _import("trio_mcp._httphead")
    headers_c = _import("trio_mcp._headers")
    have_c = httphead_c is not None and headers_c is not None

    twin = _cases(httphead_py, headers_py)
    compiled = _cases(httphead_c, headers_c) if httphead_c and headers_c else {}

    results: list[dict[str, Any]] = []
    print(f"{'case':38} {'compiled ns':>12} {'twin ns':>10} {'ratio':>7}")
    for name, func in twin.items():
        py_ns = _best_ns(func, args.repeat)
        c_ns: float | None = None
        ratio: float | None = None
        if have_c:
            assert compiled[name]() == func(), name
            c_ns = _best_ns(compiled[name], args.repeat)
            ratio = py_ns / c_ns
            print(f"{name:38} {c_ns:12.1f} {py_ns:10.1f} {ratio:6.1f}x")
        else:
            print(f"{name:38} {'-':>12} {py_ns:10.1f} {'-':>7}")
        results.append({"case": name, "compiled_ns": c_ns, "twin_ns": py_ns, "ratio": ratio})

    if args.json:
        doc = {
            "benchmark": "micro_httphead",
            "python": sys.version,
            "platform": platform.platform(),
            "repeat": args.repeat,
            "head_bytes": len(HEAD),
            "results": results,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
