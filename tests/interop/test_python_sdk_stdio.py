"""The official Python SDK client (mcp 2.3.0) over stdio: it starts
``python -m trio_mcp run examples/everything.py --transport stdio`` itself, as a
desktop client would, and speaks to it over the process's stdin and stdout.

Real processes: this interpreter runs the server, the SDK's interpreter (from
``scripts/peers``) the client.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PEERS = Path(os.environ.get("TRIO_MCP_PEERS", ROOT / ".peers"))
PEER_PYTHON = PEERS / "py" / "bin" / "python"
SERVER = [sys.executable, "-m", "trio_mcp", "run", str(ROOT / "examples" / "everything.py")]

pytestmark = pytest.mark.skipif(
    not PEER_PYTHON.exists() and os.environ.get("CI") != "true",
    reason="run scripts/peers to install the official clients (CI always does)",
)


async def _run(mode: str) -> tuple[dict, str]:
    with trio.fail_after(120):
        result = await trio.run_process(
            [str(PEER_PYTHON), str(HERE / "python_sdk_stdio_client.py"), mode, *SERVER]
            + ["--transport", "stdio", "--log-level", "debug"],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    stderr = result.stderr.decode()
    assert result.returncode == 0, stderr[-3000:]
    return json.loads(result.stdout), stderr


async def test_legacy_session_over_stdio() -> None:
    seen, stderr = await _run("legacy")
    assert seen["protocol_version"] == "2025-11-25"
    assert seen["server_name"] == "trio-mcp-everything"
    assert seen["tools"] > 10
    assert seen["echo"] == ["over stdio"]
    assert seen["add"] == {"result": 42}
    assert seen["progress"] == [0.0, 50.0, 100.0]
    assert seen["progress_result"] == ["Progress test completed"]
    assert seen["elicitation"] == [
        "User response: action=accept, content={'username': 'ann', 'email': 'a@b.c'}"
    ]
    assert seen["sampling"] == ["LLM response: echo of 2+2"]
    assert seen["roots"] == ["file:///tmp/project"]
    assert seen["static_text"] == ["This is the content of the static text resource."]
    assert seen["prompt"] == ["Prompt with arguments: arg1='a', arg2='b'"]
    assert seen["notifications"] == [
        "notifications/resources/updated",
        "notifications/tools/list_changed",
    ]
    # the server's logs went to stderr (the client would have choked on them on stdout)
    assert "trio_mcp" in stderr


async def test_auto_mode_speaks_2026_over_stdio() -> None:
    seen, _ = await _run("auto")
    assert seen["protocol_version"] == "2026-07-28"
    assert seen["tools"] > 10
    assert seen["echo"] == ["modern stdio"]
    assert seen["progress"] == [0.0, 50.0, 100.0]
    assert seen["mrtr"] == ["Hello, Grace!"]
    assert seen["static_text"] == ["This is the content of the static text resource."]
    assert seen["prompt"] == ["Prompt with arguments: arg1='a', arg2='b'"]
    assert seen["honored"] is True
    assert seen["listen_event"] == "ToolsListChanged"
