"""JSON in and out: orjson, or the standard library where orjson has no wheel.

`dumps` returns bytes (what the socket needs next); `loads` takes bytes.
orjson is a dependency on CPython; PyPy and free-threaded builds, for which it
ships no wheels, get the slower standard library with the same behaviour for
the JSON MCP uses (objects with string keys, no NaN, and integers beyond
64 bits read as floats, as orjson reads them).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

try:
    import orjson
except ImportError:  # pragma: no cover - only where orjson has no wheel
    orjson = None  # type: ignore[assignment]

USING_ORJSON = orjson is not None

#: The integers orjson reads as integers; beyond, it reads floats.
INT_MIN = -(2**63)
INT_MAX = 2**64 - 1


def stdlib_dumps(obj: Any) -> bytes:
    """`dumps` where orjson has no wheel."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


def _no_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"invalid constant {name}", name, 0)


def _integer(text: str) -> int | float:
    value = int(text)
    return value if INT_MIN <= value <= INT_MAX else float(value)


def stdlib_loads(data: bytes | bytearray | memoryview | str) -> Any:
    """`loads` where orjson has no wheel."""
    if isinstance(data, memoryview):
        data = bytes(data)
    return json.loads(data, parse_constant=_no_constant, parse_int=_integer)


def encoded_once(obj: Any) -> Any:
    """`obj` as `dumps` will write it inside other values, encoded now: with
    orjson, its bytes, which each `dumps` then copies instead of walking `obj`
    again (``orjson.Fragment``); with the standard library, `obj` itself. For
    values that never change and go out often (the tools' listings)."""
    if not USING_ORJSON:  # pragma: no cover - only where orjson has no wheel
        return obj
    return orjson.Fragment(orjson.dumps(obj))


if TYPE_CHECKING:
    JSONDecodeError = ValueError

    def dumps(obj: Any) -> bytes: ...

    def loads(data: bytes | bytearray | memoryview | str) -> Any: ...

elif USING_ORJSON:
    JSONDecodeError = orjson.JSONDecodeError
    dumps = orjson.dumps
    loads = orjson.loads
else:  # pragma: no cover
    JSONDecodeError = json.JSONDecodeError
    dumps = stdlib_dumps
    loads = stdlib_loads


__all__ = ["USING_ORJSON", "JSONDecodeError", "dumps", "loads"]
