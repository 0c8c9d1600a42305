"""An inventory server written the way FastMCP's documentation writes one.

The compatibility tests run this file twice, unchanged but for its import
line: under FastMCP 4.2.3 and under trio-mcp (see notes_server.py).
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import uuid
from typing import Annotated, Literal

from fastmcp import Context, FastMCP  # the import line the tests swap
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

mcp = FastMCP("inventory")


class Unit(enum.IntEnum):
    PIECE = 1
    KILO = 2


@dataclasses.dataclass
class Line:
    sku: str
    quantity: int
    unit: Unit = Unit.PIECE


class Price(BaseModel):
    amount: decimal.Decimal = Field(max_digits=10, decimal_places=2)
    currency: Literal["EUR", "USD"] = "EUR"


class Summary(TypedDict):
    lines: int
    pieces: int
    kilos: int


STOCK: dict[str, int] = {"apple": 10, "flour": 3}


@mcp.tool
def summarize_order(lines: list[Line]) -> Summary:
    """Count an order's lines by unit."""
    return {
        "lines": len(lines),
        "pieces": sum(line.quantity for line in lines if line.unit is Unit.PIECE),
        "kilos": sum(line.quantity for line in lines if line.unit is Unit.KILO),
    }


@mcp.tool
async def price_order(lines: list[Line], unit_price: Price, ctx: Context) -> Price:
    """What an order costs at one price a unit."""
    await ctx.debug(f"pricing {len(lines)} lines")
    for done in range(1, len(lines) + 1):
        await ctx.report_progress(done, len(lines))
    total = sum(line.quantity for line in lines) * unit_price.amount
    return Price(amount=total, currency=unit_price.currency)


@mcp.tool
def schedule_delivery(
    order_id: uuid.UUID,
    day: datetime.date,
    window: Annotated[tuple[datetime.time, datetime.time], Field(description="From and until")],
) -> datetime.datetime:
    """When the delivery of an order starts."""
    return datetime.datetime.combine(day, window[0], tzinfo=datetime.timezone.utc)


@mcp.resource("stock://all")
def stock() -> dict[str, int]:
    """Everything in stock."""
    return STOCK


@mcp.resource("stock://{sku}/{minimum}")
def in_stock(sku: str, minimum: int) -> str:
    """Whether at least `minimum` of `sku` are in stock."""
    return "yes" if STOCK.get(sku, 0) >= minimum else "no"


@mcp.prompt
def reorder(sku: str, below: int = 5) -> str:
    """Ask when to reorder."""
    return f"Reorder {sku} when fewer than {below} are left."
