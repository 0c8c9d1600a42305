"""Run a plan of MCP calls against a server with the official Python SDK client.

    python plan_client.py PLAN.json http URL
    python plan_client.py PLAN.json stdio COMMAND [ARG ...]

Runs under the interpreter that has `mcp` installed (``scripts/peers``). The
plan is a JSON list of steps, each one of ``{"call": tool, "arguments": {...}}``,
``{"read": uri}`` or ``{"prompt": name, "arguments": {...}}``; the client runs
them in order and prints one JSON object: the tools' schemas, the templates,
the prompts' arguments, each step's outcome, the log messages and the
progress seen. The client itself checks each structured result against the
tool's output schema and fails if one does not fit.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


async def run(session: ClientSession, plan: list[dict[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {"progress": []}
    await session.initialize()
    tools = await session.list_tools()
    seen["schemas"] = {
        t.name: {"inputSchema": t.input_schema, "outputSchema": t.output_schema}
        for t in tools.tools
    }
    templates = await session.list_resource_templates()
    seen["templates"] = sorted(t.uri_template for t in templates.resource_templates)
    prompts = await session.list_prompts()
    seen["prompt_arguments"] = {
        p.name: [[a.name, a.required] for a in p.arguments or []] for p in prompts.prompts
    }

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen["progress"].append([value, total])

    outcomes = []
    for step in plan:
        try:
            if "call" in step:
                result = await session.call_tool(
                    step["call"], step.get("arguments", {}), progress_callback=on_progress
                )
                outcomes.append(
                    {
                        "structured": result.structured_content,
                        "is_error": result.is_error,
                        "text": [getattr(c, "text", None) for c in result.content],
                    }
                )
            elif "read" in step:
                read = await session.read_resource(step["read"])
                outcomes.append({"contents": [getattr(c, "text", None) for c in read.contents]})
            else:
                got = await session.get_prompt(step["prompt"], step.get("arguments", {}))
                outcomes.append({"messages": [m.content.text for m in got.messages]})
        except Exception as exc:  # the client's McpError: keep its code
            error = getattr(exc, "error", None)
            outcomes.append({"error": getattr(error, "code", None), "message": str(exc)})
    seen["outcomes"] = outcomes
    return seen


async def main(plan: list[dict[str, Any]], mode: str, *target: str) -> dict[str, Any]:
    logs: list[Any] = []

    async def on_log(params: object) -> None:
        logs.append(getattr(params, "data", None))

    if mode == "http":
        connect = streamable_http_client(target[0])
    else:
        # The SDK passes on only a few variables of its own environment; the
        # server must see the build choice, and a checkout's PYTHONPATH.
        env = {
            k: v for k, v in os.environ.items() if k.startswith("TRIO_MCP_") or k == "PYTHONPATH"
        }
        connect = stdio_client(
            StdioServerParameters(command=target[0], args=list(target[1:]), env=env)
        )
    async with (
        connect as streams,
        ClientSession(streams[0], streams[1], logging_callback=on_log) as session,
    ):
        seen = await run(session, plan)
    seen["logs"] = logs
    return seen


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        steps = json.load(f)
    print(json.dumps(asyncio.run(main(steps, *sys.argv[2:]))))
