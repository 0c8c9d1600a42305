"""Hold a session's GET stream with the official Python SDK client, for the
replica-failure drill of tests/proxy/test_replicas_interop.py.

    python python_sdk_get_drill.py URL COUNT

Initializes at URL (streamable HTTP), waits until the client's GET stream is
open, subscribes to ``test://template/N/data`` for N in 1..COUNT, then prints
one JSON line per thing seen, flushed at once: ``{"session": id}`` when ready,
``{"updated": uri}`` per resource-updated notification, and ``{"get": status,
"last_event_id": value or null}`` per GET response the client had (its own
resumptions included: the client is not told to resume, it does so by
itself). A line ``end`` on stdin closes the session and exits.
"""

from __future__ import annotations

import json
import sys

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def say(**what: object) -> None:
    print(json.dumps(what), flush=True)


async def main(url: str, count: str) -> None:
    get_open = anyio.Event()
    session_ids: list[str] = []

    async def on_response(response: httpx2.Response) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id and not session_ids:
            session_ids.append(session_id)
        if response.request.method == "GET":
            last_event_id = response.request.headers.get("last-event-id")
            say(get=response.status_code, last_event_id=last_event_id)
            if response.status_code == 200:
                get_open.set()

    async def on_message(message: object) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            say(updated=str(root.params.uri))

    http = create_mcp_http_client()
    http.event_hooks["response"].append(on_response)
    async with (
        http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(streams[0], streams[1], message_handler=on_message) as session,
    ):
        await session.initialize()
        with anyio.fail_after(30):
            await get_open.wait()
        for n in range(1, int(count) + 1):
            await session.subscribe_resource(f"test://template/{n}/data")
        say(session=session_ids[0])
        while (await anyio.to_thread.run_sync(sys.stdin.readline)).strip() != "end":
            pass


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
