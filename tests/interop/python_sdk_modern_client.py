"""Drive a trio-mcp server with the official Python SDK `Client` on the 2026-07-28 wire.

    python python_sdk_modern_client.py URL [auto|2026-07-28]

Prints one JSON object with what it saw, for the test to check.
"""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import Client, types


async def main(url: str, mode: str = "auto") -> dict[str, object]:
    seen: dict[str, object] = {}
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async def on_elicitation(context: object, params: types.ElicitRequestParams) -> object:
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async with Client(url, mode=mode, elicitation_callback=on_elicitation) as client:
        seen["protocol_version"] = client.session.protocol_version
        tools = await client.list_tools()
        seen["tools"] = len(tools.tools)
        echoed = await client.call_tool("echo", {"text": "modern"})
        seen["echo"] = [c.text for c in echoed.content]
        with_progress = await client.call_tool(
            "test_tool_with_progress", {}, progress_callback=on_progress
        )
        seen["progress_result"] = [c.text for c in with_progress.content]
        seen["progress"] = progress
        header = await client.call_tool("test_x_mcp_header", {"region": "eu-west ü"})
        seen["x_mcp_header"] = [c.text for c in header.content]
        elicited = await client.call_tool("test_input_required_result_elicitation", {})
        seen["mrtr"] = [c.text for c in elicited.content]
        async with client.listen(tools_list_changed=True) as subscription:
            seen["honored"] = bool(subscription.honored)
            await client.call_tool("test_trigger_tool_change", {})
            async for event in subscription:
                seen["listen_event"] = type(event).__name__
                break
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(asyncio.wait_for(main(*sys.argv[1:]), 60))))
