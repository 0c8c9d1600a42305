"""The application of the ``--workers`` tests: each tool says which process
answered (its pid), so a test sees which worker served a request."""

from __future__ import annotations

import os
import time

import trio

from trio_mcp import Context, Server

app = Server("workers")


@app.tool()
async def pid() -> int:
    return os.getpid()


@app.tool()
async def nap(ctx: Context, seconds: float) -> int:
    """Reports progress (so the caller knows it runs), then sleeps."""
    await ctx.report_progress(1, 2)
    await trio.sleep(seconds)
    return os.getpid()


@app.tool()
async def wedge() -> int:
    """Blocks the worker's trio scheduler (what the heartbeat must catch)."""
    time.sleep(60)  # noqa: ASYNC251 (on purpose)
    return os.getpid()


@app.tool()
async def ask(ctx: Context) -> str:
    """A 2026 multi round-trip call: the first round's process is sealed in
    its requestState; the answer names it and the process of the last round."""
    ctx.state.setdefault("sealed_by", os.getpid())
    answer = await ctx.elicit("name?", {"type": "object", "properties": {}})
    return f"{ctx.state['sealed_by']} {os.getpid()} {answer['content']['name']}"


@app.tool()
async def announce(kind: str) -> int:
    """A notification to every session of the group (the list changes)."""
    if kind == "tools":
        app.notify_tools_changed()
    else:
        app.notify_prompts_changed()
    return os.getpid()
