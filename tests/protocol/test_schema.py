"""Input schemas from type hints, verbatim schemas, and compiled validators."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any, Literal, Optional, TypedDict

import pytest

from trio_mcp import Context, LocalProtocolError, Server
from trio_mcp._schema import compile_validator, schema_for


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
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Color, {"enum": ["red", "blue"]}),
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
                "properties": {"label": {"type": "string"}, "size": {"type": "number"}},
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
def test_schema_for(hint: object, schema: dict[str, Any]) -> None:
    assert schema_for(hint) == schema


def test_unsupported_types_are_refused_clearly() -> None:
    with pytest.raises(LocalProtocolError, match="no JSON Schema"):
        schema_for(bytes)
    with pytest.raises(LocalProtocolError, match="keys must be str"):
        schema_for(dict[int, str])


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
    assert tool.validate({"name": "x"}) is None
    assert tool.validate({"name": ""}) is not None
    assert tool.validate({"kind": "a"}) is not None  # allOf: name is required
    assert tool.validate({"kind": "a", "name": "abc"}) is None
    assert tool.validate({"kind": "a", "name": "abcd"}) is not None  # if/then
    assert tool.validate({"kind": "b", "name": "abcd"}) is None  # else


def test_validator_reports_where() -> None:
    check = compile_validator(
        {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}
    )
    assert check({"a": [1, 2]}) is None
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
