"""One case per parameter and result type a FastMCP user writes, with no
framework imported: `tools()` gives, for each, a function that takes a value
of the type and returns one. The compatibility test registers them with
trio-mcp and, in FastMCP's own interpreter (``fastmcp_schemas.py``), with
FastMCP 4.2.3, and compares the schemas the two derive.

TypedDicts come from typing_extensions: before Python 3.12, pydantic (and so
FastMCP) reads no other; trio-mcp reads typing's as well.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import NotRequired, TypedDict


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Point(BaseModel):
    """A point on the plane."""

    x: int = Field(description="Across", ge=0, le=1000)
    y: int = Field(default=0, description="Up")


class Note(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    title: str = Field(min_length=1, max_length=80)
    body: str = ""
    tags: list[str] = Field(default_factory=list, max_length=10)
    created: datetime.datetime | None = None
    where: Point | None = None
    kind: Literal["memo", "todo"] = "memo"
    owner_id: uuid.UUID | None = Field(default=None, alias="ownerId")


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


@dataclasses.dataclass
class Box:
    label: str
    size: float = 1.0
    tags: list[str] = dataclasses.field(default_factory=list)


class Pair(TypedDict):
    left: int
    right: NotRequired[str]


#: (name, type): each becomes a tool ``t_<name>(value: type) -> type``.
TYPES: list[tuple[str, Any]] = [
    ("str", str),
    ("int", int),
    ("float", float),
    ("bool", bool),
    ("none_or_int", Optional[int]),  # noqa: UP045 - the spelling users write
    ("union", int | str),
    ("list", list[int]),
    ("dict", dict[str, float]),
    ("set", set[str]),
    ("tuple", tuple[int, str]),
    ("tuple_var", tuple[int, ...]),
    ("literal", Literal["a", "b"]),
    ("enum", Color),
    ("int_enum", Level),
    ("datetime", datetime.datetime),
    ("date", datetime.date),
    ("time", datetime.time),
    ("timedelta", datetime.timedelta),
    ("uuid", uuid.UUID),
    ("decimal", Decimal),
    ("bytes", bytes),
    ("path", Path),
    ("model", Point),
    ("nested_model", Note),
    ("recursive_model", Tree),
    ("dataclass", Box),
    ("typeddict", Pair),
    ("list_of_models", list[Point]),
    ("dict_of_models", dict[str, Point]),
    ("optional_model", Optional[Point]),  # noqa: UP045
    ("annotated_field", Annotated[int, Field(description="How many", ge=1, le=9)]),
    ("annotated_text", Annotated[str, "What to say"]),
    ("any", Any),
]


def _case(hint: Any) -> Callable[..., Any]:
    def case(value: Any) -> Any:
        return value

    case.__annotations__ = {"value": hint, "return": hint}
    return case


def tools() -> list[tuple[str, Callable[..., Any]]]:
    """(tool name, function) for every type."""
    found = []
    for name, hint in TYPES:
        fn = _case(hint)
        fn.__name__ = fn.__qualname__ = f"t_{name}"
        found.append((f"t_{name}", fn))
    return found


def with_defaults(
    count: int = 3,
    label: str = "x",
    color: Color = Color.RED,
    when: datetime.date | None = None,
    point: Point | None = None,
) -> str:
    """Parameters with defaults.

    Args:
        count: How many times.
        label: What to call it.
    """
    return label * count
