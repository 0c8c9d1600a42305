"""A notes server written the way FastMCP's documentation writes one.

The compatibility tests run this file twice, unchanged but for its import
line: under FastMCP 4.2.3 (``from fastmcp import Context, FastMCP``) and under
trio-mcp (``from trio_mcp import Context, Server as FastMCP``).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from typing import Annotated

from fastmcp import Context, FastMCP  # the import line the tests swap
from pydantic import BaseModel, Field

mcp = FastMCP("notes")

NAMESPACE = uuid.UUID("12345678-1234-5678-1234-567812345678")


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


class NoteIn(BaseModel):
    """A note to keep."""

    title: str = Field(description="A short title", min_length=1, max_length=80)
    body: str = ""
    priority: Priority = Priority.LOW
    due: datetime.date | None = None
    tags: list[str] = Field(default_factory=list, max_length=5)


class Note(NoteIn):
    id: uuid.UUID
    created: datetime.datetime


@dataclasses.dataclass
class Stats:
    count: int
    high: int


NOTES: dict[uuid.UUID, Note] = {}
CREATED = datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.timezone.utc)


@mcp.tool
async def create_note(note: NoteIn, ctx: Context) -> Note:
    """Keep a note."""
    await ctx.info(f"creating {note.title}")
    kept = Note(id=uuid.uuid5(NAMESPACE, note.title), created=CREATED, **note.model_dump())
    NOTES[kept.id] = kept
    return kept


@mcp.tool
def find_notes(
    priority: Priority | None = None,
    due_before: datetime.date | None = None,
    limit: Annotated[int, Field(description="At most this many", ge=1, le=100)] = 10,
) -> list[Note]:
    """Notes of a priority, or due before a day."""
    found = [
        note
        for note in NOTES.values()
        if (priority is None or note.priority is priority)
        and (due_before is None or (note.due is not None and note.due < due_before))
    ]
    return found[:limit]


@mcp.tool
def note_stats() -> Stats:
    """How many notes there are."""
    notes = list(NOTES.values())
    return Stats(count=len(notes), high=sum(n.priority is Priority.HIGH for n in notes))


@mcp.tool
async def days_until(when: datetime.date, ctx: Context) -> int:
    """Days from the first note's creation to `when`."""
    await ctx.report_progress(1, 2)
    await ctx.report_progress(2, 2)
    return (when - CREATED.date()).days


@mcp.resource("notes://{note_id}")
def read_note(note_id: uuid.UUID) -> str:
    """One note, as JSON."""
    return NOTES[note_id].model_dump_json()


@mcp.resource("notes://by-priority/{priority}/{limit}")
def notes_by_priority(priority: Priority, limit: int) -> list[str]:
    """The titles of notes of one priority."""
    return [n.title for n in NOTES.values() if n.priority is priority][:limit]


@mcp.prompt
def summarize(priority: Priority, words: int = 50) -> str:
    """Ask for a summary of the notes of a priority."""
    titles = ", ".join(n.title for n in NOTES.values() if n.priority is priority)
    return f"In at most {words} words, summarize these {priority.value} notes: {titles}"
