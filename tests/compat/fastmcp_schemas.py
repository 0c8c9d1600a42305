"""Run in FastMCP's interpreter (``scripts/peers`` installs it): print, as
JSON, the listing FastMCP gives each tool of type_cases.py, and the tools,
resource templates and prompts of each server file given as an argument
(by file name)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import warnings
from pathlib import Path

from fastmcp import FastMCP

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import type_cases  # noqa: E402


def _load(path: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.mcp


async def _listing(mcp: FastMCP) -> dict:
    tools = {}
    for tool in await mcp.list_tools():
        wire = tool.to_mcp_tool().model_dump(by_alias=True, exclude_none=True, mode="json")
        tools[wire["name"]] = {k: wire.get(k) for k in ("inputSchema", "outputSchema")}
    templates = {}
    for template in await mcp.list_resource_templates():
        wire = template.to_mcp_template().model_dump(by_alias=True, exclude_none=True, mode="json")
        templates[wire["uriTemplate"]] = wire
    prompts = {}
    for prompt in await mcp.list_prompts():
        wire = prompt.to_mcp_prompt().model_dump(by_alias=True, exclude_none=True, mode="json")
        prompts[wire["name"]] = wire.get("arguments", [])
    return {"tools": tools, "templates": templates, "prompts": prompts}


async def main() -> None:
    cases = FastMCP("cases")
    for name, fn in type_cases.tools():
        cases.tool(fn, name=name)
    cases.tool(type_cases.with_defaults)
    out = {"cases": await _listing(cases), "servers": {}}
    for path in sys.argv[1:]:
        out["servers"][Path(path).name] = await _listing(_load(path))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    warnings.simplefilter("ignore")  # FastMCP's deprecation notices on stderr
    asyncio.run(main())
