"""Micro benchmark: header value decoding and SSE framing, compiled vs twin.

Run from a checkout (``src`` is put on sys.path when trio_mcp is not importable)::

    python benchmarks/micro_sentinel_sse.py [--repeat N] [--json PATH]

Prints the best-of-N time per call in ns for the compiled module and its
pure-Python twin, and their ratio. Cases whose compiled module does not import
are timed for the twin only.
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

PAYLOAD = (
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"tok-7",'
    b'"progress":42,"total":100,"message":"Indexing files in the workspace: ' + b"x" * 42 + b'"}}'
)  # one line of JSON, 200 bytes
LITERAL = b"us-west1-projects-42"  # 20 bytes
SENTINEL_TEXT = "Grüße aus Köln, 世界! ok 1234567"  # 30 characters, 37 UTF-8 bytes


def _import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _cases(
    sentinel: ModuleType, sse: ModuleType, sentinel_value: bytes
) -> dict[str, Callable[[], Any]]:
    decode = sentinel.decode_header_value
    fmt = sse.format_event
    comment = sse.format_comment
    return {
        f"decode_header_value literal {len(LITERAL)}B": lambda: decode(LITERAL),
        f"decode_header_value sentinel {len(SENTINEL_TEXT)}ch": lambda: decode(sentinel_value),
        "format_event 200B id+event": lambda: fmt(PAYLOAD, b"s1-42", b"message"),
        "format_event 200B id+event chunked": lambda: fmt(
            PAYLOAD, b"s1-42", b"message", None, True
        ),
        "format_comment": lambda: comment(b"keepalive"),
        "format_comment chunked": lambda: comment(b"keepalive", True),
    }


def _best_ns(func: Callable[[], Any], repeat: int) -> float:
    timer = timeit.Timer(func)
    number, _ = timer.autorange()
    number = max(number, 10_000)
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="best of N (default 7)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)

    sentinel_py = importlib.import_module("trio_mcp._sentinel_py")
    sse_py = importlib.import_module("trio_mcp._sse_py")
    sentinel_c = _import("trio_mcp._sentinel")
    sse_c = _import("trio_mcp._sse")
    sentinel_value = sentinel_py.encode_header_value(SENTINEL_TEXT)
    assert sentinel_py.decode_header_value(sentinel_value) == SENTINEL_TEXT
    assert len(PAYLOAD) == 200

    twin = _cases(sentinel_py, sse_py, sentinel_value)
    compiled = _cases(sentinel_c or sentinel_py, sse_c or sse_py, sentinel_value)
    have_c = {
        name: (sentinel_c if name.startswith("decode") else sse_c) is not None for name in twin
    }

    results: list[dict[str, Any]] = []
    print(f"{'case':42} {'compiled ns':>12} {'twin ns':>10} {'ratio':>7}")
    for name, func in twin.items():
        py_ns = _best_ns(func, args.repeat)
        c_ns = _best_ns(compiled[name], args.repeat) if have_c[name] else None
        if c_ns is not None:
            assert compiled[name]() == func(), name
            ratio = py_ns / c_ns
            print(f"{name:42} {c_ns:12.1f} {py_ns:10.1f} {ratio:6.1f}x")
        else:
            ratio = None
            print(f"{name:42} {'-':>12} {py_ns:10.1f} {'-':>7}")
        results.append({"case": name, "compiled_ns": c_ns, "twin_ns": py_ns, "ratio": ratio})

    if args.json:
        doc = {
            "benchmark": "micro_sentinel_sse",
            "python": sys.version,
            "platform": platform.platform(),
            "repeat": args.repeat,
            "results": results,
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
