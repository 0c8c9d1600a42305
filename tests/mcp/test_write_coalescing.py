"""An SSE answer goes out in as few writes as its messages allow.

Each write is a system call (and, on loopback, the receiver's whole TCP work),
so the head travels with the priming event and the first message, and the
response travels with the end of the body. The connection here is an
in-memory stream that records every write of the real HTTPServer.
"""

from __future__ import annotations

from _support import initialize_body, mcp_post, sse_messages
from mcp_fixtures import everything

from trio_mcp import MCPConfig, ServerConfig
from trio_mcp._mcp._endpoint import MCPEndpoint
from trio_mcp._trio._server import HTTPServer


class RecordingStream:
    """Hands out the given requests one by one; records each write."""

    def __init__(self, requests: list[bytes]) -> None:
        self.requests = list(requests)
        self.writes: list[bytes] = []

    async def receive_some(self, max_bytes: int) -> bytes:
        return self.requests.pop(0) if self.requests else b""

    async def send_all(self, data: bytes) -> None:
        self.writes.append(data)

    async def send_eof(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


async def one_connection(http: HTTPServer, requests: list[bytes]) -> list[bytes]:
    stream = RecordingStream(requests)
    await http.handle_stream(stream)  # type: ignore[arg-type]
    return stream.writes


async def test_progress_answer_takes_one_write_per_message() -> None:
    config = MCPConfig(http=ServerConfig())
    endpoint = MCPEndpoint(everything, config)
    http = HTTPServer(endpoint, config.http)
    async with endpoint.running():
        (init,) = await one_connection(http, [mcp_post(initialize_body())])
        head = init.split(b"\r\n\r\n", 1)[0].lower()
        sid = head.split(b"mcp-session-id: ", 1)[1].split(b"\r\n", 1)[0].decode()
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "test_tool_with_progress", "_meta": {"progressToken": "p"}},
        }
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        writes = await one_connection(
            http,
            [
                mcp_post(initialized, session=sid, version="2025-11-25"),
                mcp_post(call, session=sid, version="2025-11-25"),
            ],
        )
        endpoint.drain()
    accepted, *answer = writes
    assert accepted.startswith(b"HTTP/1.1 202")
    # head + priming + progress 0 | progress 50 | progress 100 | result + last chunk
    assert len(answer) == 4
    assert answer[0].startswith(b"HTTP/1.1 200") and b"text/event-stream" in answer[0]
    assert b"retry: " in answer[0] and b"notifications/progress" in answer[0]
    assert answer[-1].endswith(b"\r\n0\r\n\r\n")
    body = b"".join(answer).split(b"\r\n\r\n", 1)[1]
    unchunked = b"".join(body.split(b"\r\n")[1::2])  # the chunk payloads
    messages = sse_messages(unchunked)
    assert [m["params"]["progress"] for m in messages[:3]] == [0, 50, 100]  # type: ignore[index]
    final = messages[3]
    assert final["id"] == 2  # type: ignore[index]
    assert final["result"]["content"][0]["text"] == "Progress test completed"  # type: ignore[index]
