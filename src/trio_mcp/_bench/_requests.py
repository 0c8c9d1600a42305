"""The bytes of every HTTP request the load generator sends, built once.

A tools/call request is pre-encoded per connection as parts that only the
JSON-RPC id (and, for streamed calls, the progress token, which is the same
number) is spliced between: ``idb.join(parts)``. Ids are ten-digit numbers, so
Content-Length never changes and is part of the pre-encoded head.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import orjson

from ._target import Target

# 2024-11-05 (HTTP+SSE, two endpoints) is not benchmarked.
LEGACY_PROTOCOLS = ("2025-03-26", "2025-06-18", "2025-11-25")
MODERN_PROTOCOLS = ("2026-07-28",)
PROTOCOLS = (*LEGACY_PROTOCOLS, *MODERN_PROTOCOLS)
FIRST_ID = 1_000_000_000  # ids stay ten digits long for 9e9 requests per connection
ACCEPT = b"application/json, text/event-stream"
CLIENT_INFO = {"name": "trio-mcp-bench", "version": "1"}
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
_ID_MARK = b"1234567890"  # stands for the id while the body is encoded


def is_modern(protocol: str) -> bool:
    return protocol in MODERN_PROTOCOLS


def header_value(text: str) -> bytes:
    """`text` as an Mcp-Name header value: literal when safe, else the base64 sentinel."""
    safe = (
        text.isascii()
        and text == text.strip(" \t")
        and not any(ord(c) < 0x20 or c == "\x7f" for c in text)
        and not (text.startswith("=?base64?") and text.endswith("?="))
    )
    if safe:
        return text.encode()
    return b"=?base64?" + base64.b64encode(text.encode()) + b"?="


@dataclass(frozen=True, slots=True)
class RequestFactory:
    """Builds the requests of one target, protocol revision and tool call."""

    target: Target
    protocol: str
    tool: str
    arguments: dict[str, object]

    def _head(self, method: bytes, headers: list[tuple[bytes, bytes]], length: int | None) -> bytes:
        lines = [
            method + b" " + self.target.path.encode() + b" HTTP/1.1",
            b"Host: " + self.target.host_header.encode(),
            b"User-Agent: trio-mcp-bench",
        ]
        lines += [name + b": " + value for name, value in headers]
        if length is not None:
            lines.append(b"Content-Length: %d" % length)
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def _legacy_headers(
        self, session: bytes | None, version: str | None
    ) -> list[tuple[bytes, bytes]]:
        headers = [(b"Accept", ACCEPT), (b"Content-Type", b"application/json")]
        if session is not None:
            headers.append((b"Mcp-Session-Id", session))
        if version is not None and version != "2025-03-26":  # the header came with 2025-06-18
            headers.append((b"MCP-Protocol-Version", version.encode()))
        return headers

    def post(self, body: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
        return self._head(b"POST", headers, len(body)) + body

    def initialize(self) -> bytes:
        body = orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": self.protocol,
                    "capabilities": {},
                    "clientInfo": CLIENT_INFO,
                },
            }
        )
        return self.post(body, self._legacy_headers(None, None))

    def initialized(self, session: bytes | None, version: str) -> bytes:
        body = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        return self.post(body, self._legacy_headers(session, version))

    def delete(self, session: bytes | None, version: str) -> bytes:
        headers = [h for h in self._legacy_headers(session, version) if h[0] != b"Content-Type"]
        return self._head(b"DELETE", headers, None)

    def get_stream(self, session: bytes | None, version: str) -> bytes:
        headers = [(b"Accept", b"text/event-stream")]
        headers += [
            h
            for h in self._legacy_headers(session, version)
            if h[0] not in (b"Accept", b"Content-Type")
        ]
        return self._head(b"GET", headers, None)

    def listen(self) -> bytes:
        """2026-07-28 subscriptions/listen for tools/list changes: a long-lived stream."""
        body = orjson.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "subscriptions/listen",
                "params": {
                    "_meta": {META_VERSION: self.protocol, META_CAPABILITIES: {}},
                    "notifications": {"toolsListChanged": True},
                },
            }
        )
        headers = [
            (b"Accept", ACCEPT),
            (b"Content-Type", b"application/json"),
            (b"MCP-Protocol-Version", self.protocol.encode()),
            (b"Mcp-Method", b"subscriptions/listen"),
        ]
        return self.post(body, headers)

    def call_parts(
        self, session: bytes | None, version: str, *, progress: bool
    ) -> tuple[bytes, ...]:
        """The tools/call request split where the id (and progress token) go."""
        meta: dict[str, object] = {}
        if progress:
            meta["progressToken"] = int(_ID_MARK)
        if is_modern(self.protocol):
            meta[META_VERSION] = self.protocol
            meta[META_CAPABILITIES] = {}
        # _meta first, so the marks are the first occurrences in the body, before
        # any argument that might contain the same digits
        params: dict[str, object] = {"_meta": meta} if meta else {}
        params["name"] = self.tool
        params["arguments"] = self.arguments
        body = orjson.dumps(
            {"jsonrpc": "2.0", "id": int(_ID_MARK), "method": "tools/call", "params": params}
        )
        if is_modern(self.protocol):
            headers = [
                (b"Accept", ACCEPT),
                (b"Content-Type", b"application/json"),
                (b"MCP-Protocol-Version", self.protocol.encode()),
                (b"Mcp-Method", b"tools/call"),
                (b"Mcp-Name", header_value(self.tool)),
            ]
        else:
            headers = self._legacy_headers(session, version)
        ids = 2 if progress else 1
        first, *rest = body.split(_ID_MARK, ids)
        return (self._head(b"POST", headers, len(body)) + first, *rest)
