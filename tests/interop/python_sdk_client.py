"""Drive a trio-mcp server with the official Python SDK client (legacy session mode).

    python python_sdk_client.py URL [streamable|sse]

`sse` uses the 2024-11-05 HTTP+SSE transport (URL is then the /sse stream).

Runs under the interpreter that has `mcp` installed; prints one JSON object
with what it saw, for the test to check.
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import ClientSession, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, transport: str = "streamable") -> dict[str, object]:
    seen: dict[str, object] = {}
    progress: list[list[float | None]] = []
    logs: list[object] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append([value, total])

    async def on_log(params: object) -> None:
        logs.append(getattr(params, "data", None))

    async def on_sampling(context: object, params: types.CreateMessageRequestParams) -> object:
        asked = params.messages[0].content
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"echo of {asked.text}"),
            model="test-model",
        )

    async def on_elicitation(context: object, params: types.ElicitRequestParams) -> object:
        return types.ElicitResult(action="accept", content={"username": "ann", "email": "a@b.c"})

    notifications: list[str] = []

    async def on_message(message: object) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if isinstance(method, str) and method.endswith(("list_changed", "updated")):
            notifications.append(method)

    async def on_roots(context: object) -> object:
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/project", name="project")])

    connect = sse_client(url) if transport == "sse" else streamable_http_client(url)
    async with connect as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(
            read,
            write,
            logging_callback=on_log,
            sampling_callback=on_sampling,
            elicitation_callback=on_elicitation,
            list_roots_callback=on_roots,
            message_handler=on_message,
        ) as session:
            init = await session.initialize()
            seen["protocol_version"] = init.protocol_version
            seen["server_name"] = init.server_info.name
            tools = await session.list_tools()
            seen["tools"] = sorted(t.name for t in tools.tools)
            echo = await session.call_tool("echo", {"text": "hello"})
            seen["echo"] = [c.text for c in echo.content]
            added = await session.call_tool("add", {"a": 2, "b": 40})
            seen["add"] = added.structured_content
            with_progress = await session.call_tool(
                "test_tool_with_progress", {}, progress_callback=on_progress
            )
            seen["progress_result"] = [c.text for c in with_progress.content]
            seen["progress"] = progress
            failing = await session.call_tool("test_error_handling", {})
            seen["error_is_error"] = failing.is_error
            bad_args = await session.call_tool("echo", {"text": 5})
            seen["bad_args_is_error"] = bad_args.is_error
            logged = await session.call_tool("test_tool_with_logging", {})
            seen["logging_result"] = [c.text for c in logged.content]
            seen["logs"] = logs
            resource = await session.read_resource("test://static-text")
            seen["static_text"] = [c.text for c in resource.contents]
            templated = await session.read_resource("test://template/42/data")
            seen["template"] = json.loads(templated.contents[0].text)
            resources = await session.list_resources()
            seen["resources"] = [str(r.uri) for r in resources.resources]
            templates = await session.list_resource_templates()
            seen["templates"] = [t.uri_template for t in templates.resource_templates]
            prompt = await session.get_prompt(
                "test_prompt_with_arguments", {"arg1": "a", "arg2": "b"}
            )
            seen["prompt"] = [m.content.text for m in prompt.messages]
            prompts = await session.list_prompts()
            seen["prompts"] = sorted(p.name for p in prompts.prompts)
            await session.send_ping()
            seen["ping"] = True
            sampled = await session.call_tool("test_sampling", {"prompt": "2+2"})
            seen["sampling"] = [c.text for c in sampled.content]
            elicited = await session.call_tool("test_elicitation", {"message": "who?"})
            seen["elicitation"] = [c.text for c in elicited.content]
            roots = await session.call_tool("test_list_roots", {})
            seen["roots"] = [c.text for c in roots.content]
            await session.subscribe_resource("test://watched-resource")
            await session.call_tool("test_trigger_tool_change", {})
            await session.call_tool("test_trigger_resource_update", {})
            for _ in range(100):  # they arrive on the session's own stream, asynchronously
                if len(notifications) >= 2:
                    break
                await asyncio.sleep(0.05)
            seen["notifications"] = sorted(notifications)
            if transport == "streamable":
                # the server closes the call's stream mid-call; the client resumes it
                resumed = await session.call_tool("test_reconnection", {})
                seen["reconnection"] = [c.text for c in resumed.content]
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(*sys.argv[1:]))))
