"""Input schemas from type hints, verbatim schemas, and compiled validators."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal, Optional, TypedDict

import pytest

from trio_mcp import Context, LocalProtocolError, Server
from trio_mcp._app._schema import compile_checks


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Box:
    label: str
    size: float = 1.0


def _property(hint: object) -> dict[str, Any]:
    """The input schema of a tool's one parameter `x` of type `hint`."""
    app = Server("s")

    async def tool(x) -> str:  # type: ignore[no-untyped-def]
        return ""

    tool.__annotations__["x"] = hint
    return app.add_tool(tool, name="t").listing["inputSchema"]["properties"]["x"]


@pytest.mark.parametrize(
    ("hint", "schema"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (Any, {}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (set[str], {"type": "array", "items": {"type": "string"}, "uniqueItems": True}),
        (dict[str, bool], {"type": "object", "additionalProperties": {"type": "boolean"}}),
        (Optional[int], {"anyOf": [{"type": "integer"}, {"type": "null"}]}),  # noqa: UP045
        (int | str, {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
        (Literal["a", "b"], {"enum": ["a", "b"], "type": "string"}),
        (Color, {"enum": ["red", "blue"], "type": "string"}),
        (Annotated[str, "a name"], {"type": "string", "description": "a name"}),
        (
            Point,
            {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
            },
        ),
        (
            Box,
            {
                "type": "object",
                "properties": {
                    "label": {"type": "string"},
                    "size": {"type": "number", "default": 1.0},
                },
                "required": ["label"],
            },
        ),
        (
            tuple[int, str],
            {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
        ),
    ],
)
def test_parameter_schemas(hint: object, schema: dict[str, Any]) -> None:
    assert _property(hint) == schema


class Opaque:
    """A type pydantic has no schema for."""


def test_unsupported_types_are_refused_naming_the_tool_and_parameter() -> None:
    app = Server("s")

    async def store(item: Opaque) -> str:
        return ""

    with pytest.raises(LocalProtocolError) as raised:
        app.add_tool(store)
    message = str(raised.value)
    assert "tool 'store', parameter 'item'" in message
    assert "Opaque" in message
    assert "input_schema=" in message  # says how to fix it


def test_tool_schema_from_signature_skips_the_context() -> None:
    app = Server("s")

    @app.tool()
    async def search(
        ctx: Context, query: Annotated[str, "what to look for"], limit: int = 10
    ) -> str:
        """Search things."""
        return query

    listing = app.tools["search"].listing
    assert listing["inputSchema"] == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for"},
            "limit": {"type": "integer", "default": 10},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert listing["description"] == "Search things."
    assert app.tools["search"].context_param == "ctx"


def test_verbatim_schema_passes_through_unchanged() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"name": {"$anchor": "nm", "type": "string", "minLength": 1}},
        "properties": {"name": {"$ref": "#/$defs/name"}, "kind": {"enum": ["a", "b"]}},
        "allOf": [{"required": ["name"]}],
        "if": {"required": ["kind"], "properties": {"kind": {"const": "a"}}},
        "then": {"properties": {"name": {"maxLength": 3}}},
        "else": {},
    }
    app = Server("s")
    tool = app.add_tool(lambda **kwargs: "ok", name="verbatim", input_schema=dict(schema))
    assert tool.listing["inputSchema"] == schema

    def problem(arguments: dict[str, Any]) -> str | None:
        try:
            assert tool.convert(arguments) == arguments  # passed on as they came
        except ValueError as exc:
            return str(exc)
        return None

    assert problem({"name": "x"}) is None
    assert problem({"name": ""}) is not None
    assert problem({"kind": "a"}) is not None  # allOf: name is required
    assert problem({"kind": "a", "name": "abc"}) is None
    assert problem({"kind": "a", "name": "abcd"}) is not None  # if/then
    assert problem({"kind": "b", "name": "abcd"}) is None  # else


def test_validator_reports_where() -> None:
    accepts, check = compile_checks(
        {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    )
    assert accepts({"a": [1, 2]}) and check({"a": [1, 2]}) is None
    assert not accepts({"a": [1, "x"]})
    reason = check({"a": [1, "x"]})
    assert reason is not None and reason.startswith("a/1:")


def test_registration_errors() -> None:
    app = Server("s")
    app.add_tool(lambda: "", name="t")
    with pytest.raises(LocalProtocolError, match="already registered"):
        app.add_tool(lambda: "", name="t")
    with pytest.raises(LocalProtocolError, match="invalid tool name"):
        app.add_tool(lambda: "", name="has space")
    with pytest.raises(LocalProtocolError, match="object schema"):
        app.add_tool(lambda: "", name="u", input_schema={"type": "string"})
    with pytest.raises(LocalProtocolError, match="invalid JSON Schema"):
        app.add_tool(lambda: "", name="v", input_schema={"type": "object", "minProperties": "x"})


def test_parameter_descriptions_from_the_docstring() -> None:
    app = Server("s")

    @app.tool()
    async def book(city: str, nights: int = 1, note: Annotated[str, "from Annotated"] = "") -> str:
        """Book a hotel.

        Args:
            city: Where to stay,
                spelled in full.
            nights (int): How many nights.
            note: ignored, Annotated wins.

        Returns:
            A confirmation.
        """
        return city

    listing = app.tools["book"].listing
    props = listing["inputSchema"]["properties"]
    assert props["city"]["description"] == "Where to stay, spelled in full."
    assert props["nights"]["description"] == "How many nights."
    assert props["note"]["description"] == "from Annotated"
    assert listing["description"] == "Book a hotel."


# ---- x-mcp-header -------------------------------------------------------------------

from trio_mcp._app._schema import header_mismatch, header_params  # noqa: E402
from trio_mcp._sentinel_py import decode_header_value  # noqa: E402


def _obj(**props: dict) -> dict:
    return {"type": "object", "properties": props}


def test_header_params_compile_properties_chains() -> None:
    schema = _obj(
        region={"type": "string", "x-mcp-header": "Region"},
        nested=_obj(count={"type": "integer", "x-mcp-header": "Count"}),
        plain={"type": "string"},
    )
    compiled = header_params(schema)
    assert [(p.header, p.path, p.type) for p in compiled] == [
        (b"mcp-param-region", ("region",), "string"),
        (b"mcp-param-count", ("nested", "count"), "integer"),
    ]


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (_obj(a={"type": "string", "x-mcp-header": "Bad Name"}), "token"),
        (_obj(a={"type": "string", "x-mcp-header": ""}), "token"),
        (
            _obj(
                a={"type": "string", "x-mcp-header": "X"}, b={"type": "string", "x-mcp-header": "x"}
            ),
            "twice",
        ),
        (_obj(a={"type": "number", "x-mcp-header": "N"}), "string, integer or boolean"),
        (_obj(a={"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}), "properties"),
        (_obj(a={"anyOf": [{"type": "string", "x-mcp-header": "U"}]}), "properties"),
        ({"type": "object", "x-mcp-header": "Root"}, "properties"),
    ],
)
def test_violating_annotations_are_refused_at_registration(schema: dict, words: str) -> None:
    with pytest.raises(LocalProtocolError, match=words):
        header_params(schema)
    app = Server("s")
    with pytest.raises(LocalProtocolError, match="tool 't'"):
        app.add_tool(lambda **kw: "", name="t", input_schema=schema)


@pytest.mark.parametrize(
    ("arguments", "headers", "ok"),
    [
        ({"region": "eu"}, [(b"mcp-param-region", b"eu")], True),
        ({"region": "eu west ü"}, [(b"mcp-param-region", b"=?base64?ZXUgd2VzdCDDvA==?=")], True),
        ({"region": "eu"}, [(b"mcp-param-region", b"EU")], False),  # values are case-sensitive
        ({"region": "eu"}, [], False),  # present argument, missing header
        ({}, [], True),  # absent argument: no header expected
        ({"region": None}, [], True),
        ({"region": "eu"}, [(b"mcp-param-region", b"eu"), (b"mcp-param-region", b"eu")], False),
        (
            {"region": "=?base64?x?="},
            [(b"mcp-param-region", b"=?base64?SGVsbG8?=")],
            False,
        ),  # bad padding
        ({"count": 42}, [(b"mcp-param-count", b"42")], True),
        ({"count": 42}, [(b"mcp-param-count", b"42.0")], True),  # compared numerically
        ({"count": 42}, [(b"mcp-param-count", b"43")], False),
        ({"count": -7}, [(b"mcp-param-count", b"-7")], True),
        # plain decimal only: float() takes each of these, and they once matched
        ({"count": 1000}, [(b"mcp-param-count", b"1e3")], False),
        ({"count": 42}, [(b"mcp-param-count", b"4_2")], False),
        ({"count": 42}, [(b"mcp-param-count", b"+42")], False),
        ({"count": 42}, [(b"mcp-param-count", b"=?base64?IDQy?=")], False),  # " 42"
        ({"count": 42}, [(b"mcp-param-count", b"42.")], False),
        ({"count": 42}, [(b"mcp-param-count", "٤٢".encode())], False),  # Arabic-Indic digits
        # compared exactly beyond 2^53, where float() made these equal
        ({"count": 2**53}, [(b"mcp-param-count", b"9007199254740993")], False),
        ({"count": 2**60 + 1}, [(b"mcp-param-count", b"%d" % (2**60 + 1))], True),
        ({"count": 2**60}, [(b"mcp-param-count", b"%d" % (2**60 + 1))], False),
        ({"flag": True}, [(b"mcp-param-flag", b"true")], True),
        ({"flag": True}, [(b"mcp-param-flag", b"True")], False),
    ],
)
def test_header_mismatch(arguments: dict, headers: list, ok: bool) -> None:
    schema = _obj(
        region={"type": "string", "x-mcp-header": "Region"},
        count={"type": "integer", "x-mcp-header": "Count"},
        flag={"type": "boolean", "x-mcp-header": "Flag"},
    )
    problem = header_mismatch(header_params(schema), arguments, headers, decode_header_value)
    assert (problem is None) is ok, problem


def test_decorator_declares_a_parameter_header() -> None:
    app = Server("s")

    @app.tool(headers={"region": "Region"})
    async def deploy(region: str, version: str) -> str:
        return region

    assert (
        app.tools["deploy"].listing["inputSchema"]["properties"]["region"]["x-mcp-header"]
        == "Region"
    )
    assert [p.display for p in app.tools["deploy"].header_params] == ["Mcp-Param-Region"]
    with pytest.raises(LocalProtocolError, match="no parameter"):
        app.add_tool(lambda a: a, name="x", headers={"b": "B"})
