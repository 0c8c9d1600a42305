"""Rich parameter and result types (issue 23): pydantic models, dataclasses,
TypedDicts, enums, datetimes, UUIDs and the rest reach handlers as their
types, results are checked against their output schema, unknown arguments are
refused, and every refusal says what is wrong where.

The records are tested directly here; tests/app/test_types_e2e.py sends the
same calls through the endpoint.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import typing
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from trio_mcp import Context, LocalProtocolError, Server
from trio_mcp._app._records import Tool, tool_result
from trio_mcp._app._types import describe


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Point(BaseModel):
    """A point."""

    x: int = Field(description="across", ge=0)
    y: int = 0


class Note(BaseModel):
    title: str
    tags: list[str] = []
    at: datetime.datetime | None = None
    where: Point


@dataclasses.dataclass
class Box:
    label: str
    size: float = 1.0


class Pair(typing.TypedDict):
    left: int
    right: str


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


def _tool(fn: Any, **options: Any) -> Tool:
    return Server("s").add_tool(fn, **options)


def _refusal(tool: Tool, arguments: dict[str, Any]) -> str:
    with pytest.raises(ValueError) as raised:
        tool.convert(arguments)
    return describe(raised.value)


def test_handlers_receive_their_annotated_types() -> None:
    def everything(
        note: Note,
        color: Color,
        level: Level,
        day: datetime.date,
        at: datetime.datetime,
        span: datetime.timedelta,
        id: uuid.UUID,
        amount: Decimal,
        data: bytes,
        path: Path,
        box: Box,
        pair: Pair,
        pos: tuple[int, str],
        tags: set[str],
        kind: Literal["a", "b"] = "a",
    ) -> str:
        return ""

    tool = _tool(everything)
    kwargs = tool.convert(
        {
            "note": {"title": "t", "where": {"x": 1}, "at": "2026-12-03T10:00:00Z"},
            "color": "blue",
            "level": 2,
            "day": "2026-12-03",
            "at": "2026-12-03T10:00:00+01:00",
            "span": "PT90S",
            "id": "12345678-1234-5678-1234-567812345678",
            "amount": "1.10",
            "data": "raw",
            "path": "/tmp/x",
            "box": {"label": "b"},
            "pair": {"left": 1, "right": "r"},
            "pos": [1, "one"],
            "tags": ["x", "x", "y"],
        }
    )
    assert kwargs["note"] == Note(
        title="t",
        where=Point(x=1),
        at=datetime.datetime(2026, 12, 3, 10, tzinfo=datetime.timezone.utc),
    )
    assert kwargs["color"] is Color.BLUE
    assert kwargs["level"] is Level.HIGH
    assert kwargs["day"] == datetime.date(2026, 12, 3)
    assert kwargs["at"].utcoffset() == datetime.timedelta(hours=1)
    assert kwargs["span"] == datetime.timedelta(seconds=90)
    assert kwargs["id"] == uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert kwargs["amount"] == Decimal("1.10")
    assert kwargs["data"] == b"raw"
    assert kwargs["path"] == Path("/tmp/x")
    assert kwargs["box"] == Box("b")
    assert kwargs["pair"] == {"left": 1, "right": "r"}
    assert kwargs["pos"] == (1, "one")
    assert kwargs["tags"] == {"x", "y"}
    assert "kind" not in kwargs  # absent: the call gives it its default


def test_the_context_is_no_argument() -> None:
    def search(ctx: Context, query: str) -> str:
        return query

    tool = _tool(search)
    assert tool.context_param == "ctx"
    assert tool.convert({"query": "q"}) == {"query": "q"}
    assert "ctx" not in tool.listing["inputSchema"]["properties"]
    assert "unexpected argument 'ctx'" in _refusal(tool, {"query": "q", "ctx": 1})


def test_an_alias_names_the_argument_and_the_handler_gets_the_parameter() -> None:
    def send(sender: Annotated[str, Field(alias="from")], count: int = 1) -> str:
        return sender

    tool = _tool(send)
    assert list(tool.listing["inputSchema"]["properties"]) == ["from", "count"]
    assert tool.convert({"from": "ann"}) == {"sender": "ann"}
    assert _refusal(tool, {"sender": "ann"}) == (
        "missing required argument 'from'; unexpected argument 'sender'"
    )


def test_unknown_arguments_are_refused_unless_allowed() -> None:
    def add(a: int, b: int = 0) -> str:
        return ""

    strict = _tool(add)
    assert strict.listing["inputSchema"]["additionalProperties"] is False
    assert _refusal(strict, {"a": 1, "c": 2}) == "unexpected argument 'c'"
    lenient = _tool(add, allow_unknown_arguments=True)
    assert "additionalProperties" not in lenient.listing["inputSchema"]
    assert lenient.convert({"a": 1, "c": 2}) == {"a": 1}


def test_refusals_name_the_field_and_what_was_expected() -> None:
    def create(note: Note, color: Color, count: Annotated[int, Field(ge=0)] = 0) -> str:
        return ""

    tool = _tool(create)
    message = _refusal(tool, {"note": {"title": "t", "where": {"x": -1}}, "color": "green"})
    assert "note.where.x: Input should be greater than or equal to 0 (got -1)" in message
    assert "color: Input should be 'red' or 'blue' (got 'green')" in message
    assert _refusal(tool, {"color": "red"}) == "missing required argument 'note'"
    message = _refusal(tool, {"note": {"title": "t", "where": {}}, "color": "red", "count": -1})
    assert (
        "note.where.x" in message and "count: Input should be greater than or equal to 0" in message
    )


def test_a_union_refusal_says_what_each_option_expected() -> None:
    def pick(v: int | str) -> str:
        return ""

    message = _refusal(_tool(pick), {"v": [1]})
    assert "anyOf" not in message
    assert "v.int: Input should be a valid integer (got [1])" in message
    assert "v.str: Input should be a valid string (got [1])" in message


def test_a_long_list_of_problems_is_cut_short() -> None:
    def many(values: list[int]) -> str:
        return ""

    message = _refusal(_tool(many), {"values": ["a"] * 9})
    assert message.count("Input should be a valid integer") == 5
    assert message.endswith("and 4 more")


def test_field_constraints_and_descriptions_reach_the_schema() -> None:
    def book(
        nights: Annotated[int, Field(description="How many nights", ge=1, le=30)],
        city: Annotated[str, "Where"],
    ) -> str:
        return ""

    props = _tool(book).listing["inputSchema"]["properties"]
    assert props["nights"] == {
        "type": "integer",
        "description": "How many nights",
        "minimum": 1,
        "maximum": 30,
    }
    assert props["city"] == {"type": "string", "description": "Where"}


def test_nested_models_are_inlined_and_recursive_ones_kept_in_defs() -> None:
    def create(note: Note) -> str:
        return ""

    schema = _tool(create).listing["inputSchema"]
    assert "$defs" not in schema
    where = schema["properties"]["note"]["properties"]["where"]
    assert where == {
        "type": "object",
        "description": "A point.",
        "properties": {
            "x": {"type": "integer", "description": "across", "minimum": 0},
            "y": {"type": "integer", "default": 0},
        },
        "required": ["x"],
    }
    # A property named "title" is a property, not a schema title.
    assert schema["properties"]["note"]["properties"]["title"] == {"type": "string"}

    def plant(tree: Tree) -> str:
        return ""

    schema = _tool(plant).listing["inputSchema"]
    assert schema["properties"]["tree"] == {"$ref": "#/$defs/Tree"}
    assert schema["$defs"]["Tree"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    assert _tool(plant).convert({"tree": {"name": "a", "children": [{"name": "b"}]}})[
        "tree"
    ] == Tree(name="a", children=[Tree(name="b")])


def test_model_results_are_structured_and_checked() -> None:
    def where() -> Point:
        return Point(x=1)

    tool = _tool(where)
    assert tool.listing["outputSchema"]["properties"]["x"]["minimum"] == 0
    result = tool_result(tool, Point(x=2, y=3))
    assert result["structuredContent"] == {"x": 2, "y": 3}
    assert result["content"] == [{"type": "text", "text": '{"x":2,"y":3}'}]
    # a dict that fits is accepted as the model; anything else is the tool's error
    assert tool_result(tool, {"x": 4})["structuredContent"] == {"x": 4, "y": 0}
    for wrong in ({"x": -1}, "text", None, {"y": 1}):
        with pytest.raises(ValueError):
            tool_result(tool, wrong)


def test_non_object_results_are_wrapped() -> None:
    def when() -> datetime.date:
        return datetime.date(2026, 12, 3)

    def points() -> list[Point]:
        return []

    tool = _tool(when)
    assert tool.listing["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "string", "format": "date"}},
        "required": ["result"],
        "x-fastmcp-wrap-result": True,
    }
    assert tool_result(tool, datetime.date(2026, 12, 3))["structuredContent"] == {
        "result": "2026-12-03"
    }
    listed = _tool(points)
    assert listed.listing["outputSchema"]["properties"]["result"]["items"]["type"] == "object"
    assert tool_result(listed, [Point(x=1)])["structuredContent"] == {"result": [{"x": 1, "y": 0}]}


def test_dataclass_and_typeddict_results() -> None:
    def box() -> Box:
        return Box("b")

    def pair() -> Pair:
        return {"left": 1, "right": "r"}

    assert tool_result(_tool(box), Box("b", 2.0))["structuredContent"] == {
        "label": "b",
        "size": 2.0,
    }
    assert tool_result(_tool(pair), {"left": 1, "right": "r"})["structuredContent"] == {
        "left": 1,
        "right": "r",
    }
    with pytest.raises(ValueError):
        tool_result(_tool(pair), {"left": "not a number", "right": "r"})


def test_text_and_content_results_have_no_output_schema() -> None:
    def text() -> str:
        return "hi"

    tool = _tool(text)
    assert "outputSchema" not in tool.listing
    assert tool_result(tool, "hi") == {"content": [{"type": "text", "text": "hi"}]}


def test_unsupported_return_types_are_refused_at_registration() -> None:
    class Opaque:
        pass

    def make() -> Opaque:
        return Opaque()

    make.__annotations__["return"] = Opaque
    with pytest.raises(LocalProtocolError, match=r"tool 'make', return annotation.*output_schema="):
        _tool(make)


def test_prompt_arguments_are_converted_from_strings() -> None:
    app = Server("s")

    @app.prompt()
    def plan(days: int, places: list[str], color: Color, note: str = "") -> str:
        return ""

    prompt = app.prompts["plan"]
    kwargs = prompt.convert({"days": "3", "places": '["a", "b"]', "color": "red", "note": "[1]"})
    assert kwargs == {"days": 3, "places": ["a", "b"], "color": Color.RED, "note": "[1]"}
    with pytest.raises(ValueError) as raised:
        prompt.convert({"days": "many", "places": "[]", "color": "red"})
    assert describe(raised.value).startswith("days: Input should be a valid integer")
    assert [a["name"] for a in prompt.listing["arguments"]] == ["days", "places", "color", "note"]
    assert [a["required"] for a in prompt.listing["arguments"]] == [True, True, True, False]


def test_template_variables_are_typed() -> None:
    app = Server("s")

    @app.resource("items://{item_id}/{color}")
    def item(item_id: int, color: Color) -> str:
        return ""

    template = app.resource_templates["items://{item_id}/{color}"]
    assert template.convert({"item_id": "42", "color": "red"}) == {
        "item_id": 42,
        "color": Color.RED,
    }
    with pytest.raises(ValueError):
        template.convert({"item_id": "abc", "color": "red"})


def test_template_variables_and_parameters_must_pair_up() -> None:
    app = Server("s")
    with pytest.raises(LocalProtocolError, match="must be the template's variables"):
        app.add_resource(lambda other: "", "items://{item_id}")
    with pytest.raises(LocalProtocolError, match="must be the template's variables"):
        app.add_resource(lambda item_id, extra: "", "items://{item_id}")
    # a parameter with a default need not be in the template
    app.add_resource(lambda item_id, extra=1: "", "ok://{item_id}")


def test_an_annotation_that_names_nothing_is_refused_naming_the_tool() -> None:
    class Local(BaseModel):
        value: int

    def use(item: Local) -> str:  # with postponed annotations, "Local" is not resolvable
        return ""

    with pytest.raises(LocalProtocolError, match=r"tool 'use': an annotation names 'Local'"):
        _tool(use)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
ARGUMENT_NAMES = st.sampled_from(["note", "color", "count", "tree", "when", "colour", ""])


def _rich(note: Note, color: Color, tree: Tree | None = None, count: int = 0) -> str:
    return ""


@given(st.dictionaries(ARGUMENT_NAMES | st.text(max_size=8), JSON, max_size=5))
def test_any_json_arguments_convert_or_say_why(arguments: dict[str, Any]) -> None:
    tool = _tool(_rich)
    try:
        kwargs = tool.convert(arguments)
    except ValueError as exc:
        reason = describe(exc)
        assert reason and "Traceback" not in reason
    else:
        assert set(kwargs) <= {"note", "color", "tree", "count"}
        assert isinstance(kwargs["note"], Note) and isinstance(kwargs["color"], Color)


@pytest.mark.parametrize("depth", [10, 200, 900])
def test_deeply_nested_arguments_are_refused_or_accepted_never_crash(depth: int) -> None:
    tree: dict[str, Any] = {"name": "leaf"}
    for _ in range(depth):
        tree = {"name": "n", "children": [tree]}
    tool = _tool(_rich)
    arguments = {"note": {"title": "t"}, "color": "red", "tree": tree}
    try:
        kwargs = tool.convert(arguments)
    except ValueError as exc:
        assert describe(exc)
    else:
        assert isinstance(kwargs["tree"], Tree)
