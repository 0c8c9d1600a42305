"""Drive the notes server (notes_server.py) with the official Python SDK client.

    python notes_client.py http URL
    python notes_client.py stdio COMMAND [ARG ...]

Runs under the interpreter that has `mcp` installed (``scripts/peers``); it
calls every tool, reads every resource template and gets the prompt, and
prints one JSON object with what it saw. The client itself checks each
structured result against the tool's output schema.
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def tour(session: ClientSession, logs: list[object]) -> dict[str, object]:
    seen: dict[str, object] = {}
    progress: list[list[float | None]] = []
    await session.initialize()
    tools = await session.list_tools()
    seen["schemas"] = {
        t.name: {"inputSchema": t.input_schema, "outputSchema": t.output_schema}
        for t in tools.tools
    }
    created = []
    for title, priority, due in (("alpha", "high", "2026-12-24"), ("beta", "low", None)):
        note = {"title": title, "priority": priority, "tags": ["x"]}
        if due:
            note["due"] = due
        result = await session.call_tool("create_note", {"note": note})
        created.append(result.structured_content)
    seen["created"] = created
    seen["logs"] = logs
    found = await session.call_tool("find_notes", {"priority": "high", "limit": 5})
    seen["found"] = found.structured_content
    due = await session.call_tool("find_notes", {"due_before": "2027-01-01"})
    seen["due"] = due.structured_content
    stats = await session.call_tool("note_stats", {})
    seen["stats"] = stats.structured_content

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append([value, total])

    days = await session.call_tool(
        "days_until", {"when": "2026-12-31"}, progress_callback=on_progress
    )
    seen["days"] = days.structured_content
    seen["progress"] = progress
    bad = await session.call_tool("create_note", {"note": {"title": ""}, "colour": "red"})
    seen["bad"] = {"is_error": bad.is_error, "text": [c.text for c in bad.content]}
    note_id = created[0]["id"]
    read = await session.read_resource(f"notes://{note_id}")
    seen["read"] = json.loads(read.contents[0].text)
    listed = await session.read_resource("notes://by-priority/high/5")
    seen["by_priority"] = json.loads(listed.contents[0].text)
    try:
        await session.read_resource("notes://by-priority/urgent/5")
    except Exception as exc:  # the official client raises its McpError
        seen["no_match"] = getattr(getattr(exc, "error", None), "code", str(exc))
    templates = await session.list_resource_templates()
    seen["templates"] = sorted(t.uri_template for t in templates.resource_templates)
    prompts = await session.list_prompts()
    seen["prompt_arguments"] = {
        p.name: [[a.name, a.required] for a in p.arguments or []] for p in prompts.prompts
    }
    prompt = await session.get_prompt("summarize", {"priority": "high", "words": "20"})
    seen["prompt"] = [m.content.text for m in prompt.messages]
    return seen


async def main(mode: str, *target: str) -> dict[str, object]:
    if mode == "http":
        connect = streamable_http_client(target[0])
    else:
        connect = stdio_client(StdioServerParameters(command=target[0], args=list(target[1:])))
    logs: list[object] = []

    async def on_log(params: object) -> None:
        logs.append(getattr(params, "data", None))

    async with (
        connect as streams,
        ClientSession(streams[0], streams[1], logging_callback=on_log) as session,
    ):
        return await tour(session, logs)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:]))))
