"""JSON Schemas given verbatim, their validators compiled once, docstring
parameter descriptions, and the ``x-mcp-header`` rules.

Schemas derived from type hints come from `_types` (pydantic); a schema a
registration gives verbatim (``input_schema=``, ``output_schema=``) is checked
with jsonschema-rs, compiled when the tool is registered.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

import jsonschema_rs

from .._errors import LocalProtocolError

JSONSchema = dict[str, Any]

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params):\s*$")
_ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def param_docs(doc: str) -> dict[str, str]:
    """Parameter descriptions from a Google-style ``Args:`` section of a docstring."""
    found: dict[str, str] = {}
    lines = doc.splitlines()
    in_section = False
    indent = None
    current = None
    for line in lines:
        stripped = line.strip()
        if not in_section:
            in_section = bool(_SECTION.match(stripped))
            continue
        if not stripped:
            current = None
            continue
        width = len(line) - len(line.lstrip())
        if indent is None:
            indent = width
        if width < indent or (width == 0 and stripped.endswith(":")):
            break  # the next section
        match = _ENTRY.match(stripped) if width == indent else None
        if match:
            current = match.group(1).lstrip("*")
            found[current] = match.group(2).strip()
        elif current is not None:
            found[current] = (found[current] + " " + stripped).strip()
    return found


def verbatim_arguments(schema: JSONSchema) -> Callable[[Any], dict[str, Any]]:
    """``convert(arguments)`` for a verbatim input schema: the arguments the
    schema accepts, each property passed by name as it came; ValueError why not."""
    is_valid, check = compile_checks(schema)
    names = frozenset(schema.get("properties", {}))

    def convert(arguments: Any) -> dict[str, Any]:
        if not is_valid(arguments):
            raise ValueError(check(arguments))
        return {key: value for key, value in arguments.items() if key in names}

    return convert


def verbatim_result(schema: JSONSchema) -> Callable[[Any], Any]:
    """``to_json(value)`` for a verbatim output schema: the value as it is, if
    the schema accepts it; ValueError why not."""
    is_valid, check = compile_checks(schema)

    def to_json(value: Any) -> Any:
        if not is_valid(value):
            raise ValueError(check(value))
        return value

    return to_json


def compile_checks(
    schema: JSONSchema,
) -> tuple[Callable[[Any], bool], Callable[[Any], str | None]]:
    """Two checks of one compiled schema: ``accepts(instance)``, the fast yes or
    no for every request (a call straight into the validator), and
    ``validate(instance)``, None for valid input, else a short reason."""
    try:
        validator = jsonschema_rs.validator_for(schema)
    except (ValueError, jsonschema_rs.ValidationError) as exc:
        raise LocalProtocolError(f"invalid JSON Schema: {exc}") from None
    is_valid = validator.is_valid

    def check(instance: Any) -> str | None:
        if is_valid(instance):
            return None
        try:
            for error in validator.iter_errors(instance):
                where = "/".join(str(part) for part in error.instance_path)
                return f"{where}: {error.message}" if where else error.message
        except ValueError:  # "Recursion limit reached" (is_valid itself says False)
            return "the arguments nest too deeply"
        return "invalid"  # pragma: no cover - is_valid and iter_errors disagree

    return is_valid, check


# ---- x-mcp-header: tool arguments mirrored in Mcp-Param-* headers (2026-07-28) ----

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_HEADER_TYPES = frozenset({"string", "integer", "boolean"})


@dataclasses.dataclass(frozen=True, slots=True)
class HeaderParam:
    """One argument the client must mirror in an ``Mcp-Param-<name>`` header."""

    header: bytes  # lowercase header name, e.g. b"mcp-param-region"
    display: str  # as declared, for messages: "Mcp-Param-Region"
    path: tuple[str, ...]  # property names from the arguments object down
    type: str  # "string" | "integer" | "boolean"


def header_params(schema: JSONSchema) -> tuple[HeaderParam, ...]:
    """The ``x-mcp-header`` annotations of an input schema, checked and compiled once.

    Raises LocalProtocolError for an annotation that breaks the rules: not a
    token, used twice (case-insensitively), on a property that is not a string,
    integer or boolean, or not reachable from the root through ``properties``
    alone.
    """
    found: list[HeaderParam] = []
    seen: set[str] = set()

    def visit(node: Any, path: tuple[str, ...] | None) -> None:
        # `path` is the properties-only path to `node`, or None once it is off it.
        if isinstance(node, list):
            for item in node:
                visit(item, None)
            return
        if not isinstance(node, dict):
            return
        if "x-mcp-header" in node:
            name = node["x-mcp-header"]
            if path is None or not path:
                raise LocalProtocolError(
                    "x-mcp-header is only allowed on properties reached through 'properties' alone"
                )
            if not isinstance(name, str) or not _TOKEN.match(name):
                raise LocalProtocolError(f"x-mcp-header {name!r} is not an HTTP token")
            if name.lower() in seen:
                raise LocalProtocolError(f"x-mcp-header {name!r} is used twice")
            kind = node.get("type")
            if kind not in _HEADER_TYPES:
                raise LocalProtocolError(
                    f"x-mcp-header {name!r} needs a string, integer or boolean property"
                )
            seen.add(name.lower())
            display = f"Mcp-Param-{name}"
            found.append(HeaderParam(display.lower().encode(), display, path, kind))
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for prop, sub in value.items():
                    visit(sub, None if path is None else (*path, prop))
            elif key != "x-mcp-header":
                visit(value, None)

    visit(schema, ())
    return tuple(found)


def header_mismatch(
    params: tuple[HeaderParam, ...],
    arguments: dict[str, Any],
    headers: list[tuple[bytes, bytes]],
    decode: Callable[[bytes], str],
) -> str | None:
    """Why the request's Mcp-Param-* headers do not mirror `arguments` (None if they do)."""
    for param in params:
        value: Any = arguments
        for key in param.path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            continue  # an absent or null argument expects no header
        raws = [v for k, v in headers if k == param.header]
        if not raws:
            return f"{param.display} header is required when the argument is present"
        if len(raws) > 1:
            return f"{param.display} header is duplicated"
        try:
            text = decode(raws[0])
        except ValueError as exc:
            return f"{param.display} header: {exc}"
        if not _same(text, value, param.type):
            return f"{param.display} header does not match the argument"
    return None


def _same(text: str, value: Any, kind: str) -> bool:
    if kind == "boolean":
        return isinstance(value, bool) and text == ("true" if value else "false")
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        # Plain decimal only ("42", "42.0"; never "1e3", "4_2" or " 42", which
        # float() takes), compared exactly, beyond 2^53 too (Decimal against an
        # int or a float is exact).
        return _PLAIN_DECIMAL.fullmatch(text) is not None and Decimal(text) == value
    return isinstance(value, str) and text == value


_PLAIN_DECIMAL: Final = re.compile(r"-?[0-9]{1,40}(?:\.[0-9]{1,40})?", re.ASCII)
