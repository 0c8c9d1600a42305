"""One error tree: every exception type lives in _errors under TrioMCPError, and
one table gives the HTTP status of an error answer."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import trio_mcp
from trio_mcp import _errors
from trio_mcp._json import loads
from trio_mcp._protocol._answers import refuse, rejection_response
from trio_mcp._protocol._jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    MODERN,
    RESOURCE_NOT_FOUND,
    SESSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    error_status,
)

PACKAGE_DIR = Path(trio_mcp.__file__).resolve().parent


def _exception_classes_outside_errors() -> list[str]:
    errors = {name for name, obj in vars(_errors).items() if inspect.isclass(obj)}
    found = []
    for path in PACKAGE_DIR.rglob("*.py"):
        if path.name == "_errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if bases & ({"Exception", "BaseException", "ValueError"} | errors):
                    found.append(f"{path.relative_to(PACKAGE_DIR)}: {node.name}")
    return found


def test_every_exception_type_is_in_the_one_module() -> None:
    assert _exception_classes_outside_errors() == []


def test_every_exception_type_is_a_trio_mcp_error() -> None:
    classes = [
        obj
        for obj in vars(_errors).values()
        if inspect.isclass(obj) and issubclass(obj, BaseException)
    ]
    assert len(classes) >= 8
    for cls in classes:
        assert issubclass(cls, _errors.TrioMCPError), cls


@pytest.mark.parametrize(
    ("era", "code", "status"),
    [
        (MODERN, METHOD_NOT_FOUND, 404),
        (MODERN, HEADER_MISMATCH, 400),
        (MODERN, MISSING_REQUIRED_CLIENT_CAPABILITY, 400),
        (MODERN, UNSUPPORTED_PROTOCOL_VERSION, 400),
        # handler errors are answers, not HTTP errors (digest 3.7)
        (MODERN, INVALID_PARAMS, 200),
        (MODERN, INTERNAL_ERROR, 200),
        (MODERN, -1, 200),
        (SESSIONS, METHOD_NOT_FOUND, 200),
        (SESSIONS, INVALID_PARAMS, 200),
        (SESSIONS, RESOURCE_NOT_FOUND, 200),
    ],
)
def test_error_status_table(era: str, code: int, status: int) -> None:
    assert error_status(era, code) == status


def test_a_rejection_becomes_one_json_answer() -> None:
    rejection = refuse(404, "Session not found", [(b"retry-after", b"1")])
    rejection.request_id = 7
    response = rejection_response(rejection, [(b"vary", b"origin")])
    assert response.status == 404
    assert response.headers == [
        (b"content-type", b"application/json"),
        (b"retry-after", b"1"),
        (b"vary", b"origin"),
    ]
    assert loads(response.body) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": INVALID_REQUEST, "message": "Session not found"},
    }
