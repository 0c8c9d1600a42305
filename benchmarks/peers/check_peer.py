"""Check an MCP echo server with the official Python SDK client (``mcp==2.3.0``).

    .peers/py/bin/python benchmarks/peers/check_peer.py http://127.0.0.1:8001/mcp
        [--mode legacy|auto|2026-07-28] [--text hello] [--timeout 20]

Meant for ``benchmarks/peers/python_sdk_server.py``, and for any server that
exposes the same ``echo(text: str) -> str`` tool (trio-mcp's benchmark server).
Two steps, each must pass:

1. raw HTTP, stdlib only: POST ``initialize`` (2025-11-25) and require a 200
   ``application/json`` answer carrying an ``Mcp-Session-Id`` header (stateful
   mode with JSON responses), then DELETE that session;
2. SDK client: ``mcp.Client(url, mode=...)`` connects (``legacy``: the
   initialize handshake, the default here; ``auto``: ``server/discover`` first,
   falling back to initialize), lists the tools, requires ``echo``, calls it and
   requires the text back.

Prints one line per step and exits 0 when all pass, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request

import anyio
from mcp import Client
from mcp.types import TextContent


def raw_stateful_json(url: str, timeout: float) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "check_peer", "version": "1.0.0"},
        },
    }
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        status = response.status
        content_type = response.headers.get("content-type", "")
        session_id = response.headers.get("mcp-session-id")
        payload = json.loads(response.read())
    if status != 200 or not content_type.startswith("application/json"):
        raise AssertionError(
            f"initialize: HTTP {status}, content-type {content_type!r} (want 200 application/json)"
        )
    if not session_id:
        raise AssertionError(
            "initialize: no Mcp-Session-Id header (server is not in stateful mode)"
        )
    result = payload.get("result") or {}
    version = result.get("protocolVersion")
    server = result.get("serverInfo", {})
    delete = urllib.request.Request(
        url,
        method="DELETE",
        headers={"Mcp-Session-Id": session_id, "MCP-Protocol-Version": str(version)},
    )
    with urllib.request.urlopen(delete, timeout=timeout) as response:
        deleted = response.status
    return (
        f"protocolVersion={version} server={server.get('name')}/{server.get('version')} "
        f"session-id={session_id[:8]}… DELETE={deleted}"
    )


async def sdk_echo(url: str, mode: str, text: str) -> str:
    async with Client(url, mode=mode) as client:
        tools = await client.list_tools()
        names = [tool.name for tool in tools.tools]
        if "echo" not in names:
            raise AssertionError(f"tools/list has no 'echo' tool: {names}")
        result = await client.call_tool("echo", {"text": text})
        if result.is_error:
            raise AssertionError(f"tools/call echo returned an error: {result.content}")
        texts = [block.text for block in result.content if isinstance(block, TextContent)]
        if texts != [text]:
            raise AssertionError(f"tools/call echo: text blocks {texts!r}, want [{text!r}]")
        return f"protocol={client.protocol_version} tools={names} echo={texts[0]!r}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("url")
    parser.add_argument(
        "--mode", default="legacy", help="Client mode: legacy (default), auto or 2026-07-28"
    )
    parser.add_argument("--text", default="hello from check_peer ✓")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per step (default 20)")
    args = parser.parse_args()

    ok = True
    t0 = time.perf_counter()
    try:
        print(f"raw  OK   {raw_stateful_json(args.url, args.timeout)}")
    except Exception as exc:  # report any failure as a failed step
        ok = False
        print(f"raw  FAIL {type(exc).__name__}: {exc}")
    try:
        line = anyio.run(_bounded, args.url, args.mode, args.text, args.timeout)
        print(f"sdk  OK   mode={args.mode} {line}")
    except Exception as exc:
        ok = False
        print(f"sdk  FAIL mode={args.mode} {type(exc).__name__}: {exc}")
    print(f"{'PASS' if ok else 'FAIL'} in {time.perf_counter() - t0:.2f} s")
    return 0 if ok else 1


async def _bounded(url: str, mode: str, text: str, seconds: float) -> str:
    with anyio.fail_after(seconds):
        return await sdk_echo(url, mode, text)


if __name__ == "__main__":
    sys.exit(main())
