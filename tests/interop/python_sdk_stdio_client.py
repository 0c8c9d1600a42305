"""Drive a trio-mcp server over stdio with the official Python SDK client.

    python python_sdk_stdio_client.py legacy|auto COMMAND [ARG...]

The SDK's stdio client starts COMMAND as the server process. `legacy` speaks
the initialize handshake through `ClientSession`; `auto` is the SDK's `Client`
as it comes, which probes ``server/discover`` and then speaks 2026-07-28.

Runs under the interpreter that has `mcp` installed; prints one JSON object
with what it saw, for the test to check.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from mcp import Client, ClientSession, types
from mcp.client.stdio import StdioServerParameters, stdio_client


async def on_elicitation(context: object, params: types.ElicitRequestParams) -> object:
    return types.ElicitResult(action="accept", content={"username": "ann", "email": "a@b.c"})


async def on_sampling(context: object, params: types.CreateMessageRequestParams) -> object:
    asked = params.messages[0].content
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"echo of {asked.text}"),
        model="test-model",
    )


async def on_roots(context: object) -> object:
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/project", name="project")])


async def legacy(server: StdioServerParameters) -> dict[str, object]:
    seen: dict[str, object] = {}
    progress: list[float] = []
    notifications: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_message(message: object) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if isinstance(method, str) and method.endswith(("list_changed", "updated")):
            notifications.append(method)

    async with (
        stdio_client(server) as (read, write),
        ClientSession(
            read,
            write,
            elicitation_callback=on_elicitation,
            sampling_callback=on_sampling,
            list_roots_callback=on_roots,
            message_handler=on_message,
        ) as session,
    ):
        init = await session.initialize()
        seen["protocol_version"] = init.protocol_version
        seen["server_name"] = init.server_info.name
        tools = await session.list_tools()
        seen["tools"] = len(tools.tools)
        echo = await session.call_tool("echo", {"text": "over stdio"})
        seen["echo"] = [c.text for c in echo.content]
        added = await session.call_tool("add", {"a": 2, "b": 40})
        seen["add"] = added.structured_content
        with_progress = await session.call_tool(
            "test_tool_with_progress", {}, progress_callback=on_progress
        )
        seen["progress_result"] = [c.text for c in with_progress.content]
        seen["progress"] = progress
        elicited = await session.call_tool("test_elicitation", {"message": "who?"})
        seen["elicitation"] = [c.text for c in elicited.content]
        sampled = await session.call_tool("test_sampling", {"prompt": "2+2"})
        seen["sampling"] = [c.text for c in sampled.content]
        roots = await session.call_tool("test_list_roots", {})
        seen["roots"] = [c.text for c in roots.content]
        resource = await session.read_resource("test://static-text")
        seen["static_text"] = [c.text for c in resource.contents]
        prompt = await session.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        seen["prompt"] = [m.content.text for m in prompt.messages]
        await session.subscribe_resource("test://watched-resource")
        await session.call_tool("test_trigger_tool_change", {})
        await session.call_tool("test_trigger_resource_update", {})
        for _ in range(100):  # they come on the output, beside the answers
            if len(notifications) >= 2:
                break
            await asyncio.sleep(0.05)
        seen["notifications"] = sorted(notifications)
    return seen


async def auto(server: StdioServerParameters) -> dict[str, object]:
    seen: dict[str, object] = {}
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_input(context: object, params: types.ElicitRequestParams) -> object:
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async with Client(server, elicitation_callback=on_input) as client:
        seen["protocol_version"] = client.session.protocol_version
        tools = await client.list_tools()
        seen["tools"] = len(tools.tools)
        echo = await client.call_tool("echo", {"text": "modern stdio"})
        seen["echo"] = [c.text for c in echo.content]
        with_progress = await client.call_tool(
            "test_tool_with_progress", {}, progress_callback=on_progress
        )
        seen["progress"] = progress
        seen["progress_result"] = [c.text for c in with_progress.content]
        elicited = await client.call_tool("test_input_required_result_elicitation", {})
        seen["mrtr"] = [c.text for c in elicited.content]
        resource = await client.read_resource("test://static-text")
        seen["static_text"] = [c.text for c in resource.contents]
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        seen["prompt"] = [m.content.text for m in prompt.messages]
        async with client.listen(tools_list_changed=True) as subscription:
            seen["honored"] = bool(subscription.honored)
            await client.call_tool("test_trigger_tool_change", {})
            async for event in subscription:
                seen["listen_event"] = type(event).__name__
                break
    return seen


def main(mode: str, command: str, *args: str) -> dict[str, object]:
    server = StdioServerParameters(
        command=command,
        args=list(args),
        # (the SDK passes on only a few variables of its own environment; the
        # server must see the build choice, and a checkout's PYTHONPATH)
        env={k: v for k, v in os.environ.items() if k.startswith("TRIO_MCP_") or k == "PYTHONPATH"},
    )
    run = legacy if mode == "legacy" else auto
    return asyncio.run(asyncio.wait_for(run(server), 60))


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
