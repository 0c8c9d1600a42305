"""An MCP client for tests: it talks to a `Server` through the real endpoint.

    from trio_mcp.testing import Client

    async def test_add() -> None:
        async with Client(server) as client:
            result = await client.call_tool("add", {"a": 1, "b": 2})
            assert result["structuredContent"] == {"result": 3}

The client runs the application's `MCPEndpoint` (its lifespan included) and
an `HTTPServer` in the caller's trio run, and speaks HTTP/1.1 to them over
in-memory streams: no sockets, no threads of its own, and the autojump clock
of pytest-trio works. Every request travels as a remote client's would, in
the revision asked for: with ``protocol_version`` 2025-03-26 to 2025-11-25 it
initializes a session, keeps its GET stream open for the session's
notifications, answers the server's requests (elicitation, sampling, roots)
by posting the responses, resumes a POST stream the server ended early, and
ends the session with DELETE; with 2026-07-28 every request carries the
``_meta`` envelope and the mirrored headers, ``input_required`` results are
answered and retried, and a ``subscriptions/listen`` stream brings the list
changes. Results are the JSON-RPC result objects as the wire has them;
JSON-RPC errors raise `MCPError`, and answers that break the protocol raise
`PeerProtocolError` (a subclass of `TrioMCPError`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

import trio

from ._app._schema import header_params
from ._app._server import Server
from ._config import MCPConfig
from ._errors import LocalProtocolError, MCPError, PeerProtocolError
from ._mcp._endpoint import Authenticator, MCPEndpoint
from ._protocol._envelope import META_SERVER_INFO
from ._protocol._jsonrpc import HEADER_MISMATCH
from ._testing_http import (
    Conversation,
    InputHandler,
    ProgressHandler,
    Wire,
    post_headers,
    result_of,
    stream_headers,
)
from ._trio._server import HTTPServer
from ._version import __version__

__all__ = ["Client", "InputHandler", "PeerProtocolError", "ProgressHandler"]

#: The client capability that answering each kind of server request declares.
_CAPABILITY: Final = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}
#: subscriptions/listen flags, by the server capability that offers them.
_LISTEN_FLAGS: Final = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
}
#: Pages of tools/list read to learn the tools' x-mcp-header annotations.
MAX_PAGES: Final = 1000


class Client:
    """An MCP client of `server`, for tests (see the module docstring).

    `elicitation`, `sampling` and `roots` answer the server's requests of
    that kind (``roots`` may also be the list of roots); each one given is
    declared as a client capability. `headers` go with every HTTP request
    (``Authorization`` for an `authenticate` hook, say). `log_level` asks for
    log messages from that level up (logging/setLevel on 2025, the
    per-request ``logLevel`` on 2026-07-28). `config` and `authenticate` are
    the endpoint's, as `serve_mcp` takes them.
    """

    def __init__(
        self,
        server: Server,
        protocol_version: str = "2025-11-25",
        *,
        elicitation: InputHandler | None = None,
        sampling: InputHandler | None = None,
        roots: InputHandler | Sequence[Mapping[str, Any]] | None = None,
        headers: Mapping[str, str] | None = None,
        log_level: str | None = None,
        config: MCPConfig | None = None,
        authenticate: Authenticator | None = None,
    ) -> None:
        self.config = config = config or MCPConfig()
        #: The endpoint serving `server` while the client is open (its
        #: ``statistics()`` and ``lifespan_state`` are there).
        self.endpoint = MCPEndpoint(server, config, authenticate=authenticate)
        if roots is not None and not callable(roots):
            roots = _roots_answer([dict(root) for root in roots])
        answerers: dict[str, InputHandler] = {
            method: handler
            for method, handler in (
                ("elicitation/create", elicitation),
                ("sampling/createMessage", sampling),
                ("roots/list", roots),
            )
            if handler is not None
        }
        capabilities: dict[str, Any] = {_CAPABILITY[method]: {} for method in answerers}
        if "elicitation" in capabilities and protocol_version >= "2025-11-25":
            capabilities["elicitation"] = {"form": {}, "url": {}}
        client_info = {"name": "trio-mcp-testing", "version": __version__}
        self._talk = Conversation(protocol_version, capabilities, client_info, answerers, log_level)
        #: What the server said about itself (initialize, or server/discover).
        self.server_info: dict[str, Any] = {}
        self.server_capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self._headers = dict(headers or {})
        self._waited: dict[str, int] = {}
        self._resources: list[str] = []  # what a 2026 listen stream watches
        self._stack: contextlib.AsyncExitStack | None = None
        self._nursery: trio.Nursery | None = None

    @property
    def protocol_version(self) -> str:
        """The revision spoken: the one asked for, or the server's counter-offer."""
        return self._talk.version

    @property
    def capabilities(self) -> dict[str, Any]:
        """The client capabilities declared (from the input handlers given)."""
        return self._talk.capabilities

    @property
    def session_id(self) -> str | None:
        """The 2025 session's id (None on 2026-07-28, without a session, or once ended)."""
        session = self._talk.session_id
        return session.decode() if session is not None else None

    @property
    def notifications(self) -> list[dict[str, Any]]:
        """Every notification that arrived, on any stream, in order: the JSON-RPC
        messages as sent (progress and log messages, list changes, ...)."""
        return self._talk.notifications

    # ---- open and close ------------------------------------------------------

    async def __aenter__(self) -> Client:
        if self._stack is not None:
            raise LocalProtocolError("this Client is open already")
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(self.endpoint.running())
        nursery = self._nursery = await stack.enter_async_context(trio.open_nursery())
        try:
            http = HTTPServer(self.endpoint, self.config.http)
            nursery.start_soon(http.enforce_timeouts)
            hosts = [h for h in self.config.allowed_hosts if h != "*"]
            host = hosts[0] if hosts else "127.0.0.1"
            self._talk.wire = Wire(http, nursery, self.config.path, host, self._headers)
            if self._talk.modern:
                await self._discover()
            else:
                await self._initialize()
        except BaseException:
            nursery.cancel_scope.cancel()
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        stack, nursery = self._stack, self._nursery
        assert stack is not None and nursery is not None, "the Client is not open"
        self._stack = None
        try:
            if exc_info[1] is None and self._talk.session_id is not None:
                await self._end_session()
        finally:
            # The body's own exception is not handed to the nursery: it leaves
            # the block as it was raised, not inside an exception group.
            nursery.cancel_scope.cancel()
            await stack.aclose()
            self._talk.wire = None

    async def _initialize(self) -> None:
        talk = self._talk
        params = {
            "protocolVersion": talk.version,
            "capabilities": talk.capabilities,
            "clientInfo": talk.client_info,
        }
        message = talk.message("initialize", params)
        async with talk.exchange(b"POST", post_headers(None), message) as reply:
            result = result_of(await talk.answer(reply, message))
            talk.session_id = reply.header(b"mcp-session-id")
        talk.version = result["protocolVersion"]
        self.server_info = result.get("serverInfo", {})
        self.server_capabilities = result.get("capabilities", {})
        self.instructions = result.get("instructions")
        await talk.post_only({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if talk.log_level is not None:
            await self.request("logging/setLevel", {"level": talk.log_level})
        if talk.session_id is not None:
            assert self._nursery is not None
            await self._nursery.start(self._talk.session_stream)

    async def _discover(self) -> None:
        result = await self.request("server/discover")
        self.server_info = result.get("_meta", {}).get(META_SERVER_INFO, {})
        self.server_capabilities = result.get("capabilities", {})
        self.instructions = result.get("instructions")
        await self._listen_again()

    async def _listen_again(self) -> None:
        """(Re)open the 2026 subscriptions/listen stream for what there is to watch."""
        flags: dict[str, Any] = {
            flag: True
            for capability, flag in _LISTEN_FLAGS.items()
            if self.server_capabilities.get(capability, {}).get("listChanged")
        }
        if self._resources:
            flags["resourceSubscriptions"] = list(self._resources)
        if self._talk.listening is not None:
            self._talk.listening.cancel()  # (closing its response ends the old listen)
        if flags:
            assert self._nursery is not None
            await self._nursery.start(self._talk.listen, flags)

    async def _end_session(self) -> None:
        talk = self._talk
        headers = stream_headers(talk.version, talk.session_id)[1:]  # (no Accept)
        async with talk.exchange(b"DELETE", headers) as reply:
            await reply.body()
        if not 200 <= reply.status < 300:
            raise PeerProtocolError(f"DELETE of the session answered {reply.status}")
        talk.session_id = None

    # ---- what a test calls -----------------------------------------------------

    async def list_tools(self, cursor: str | None = None) -> dict[str, Any]:
        """One page of tools/list (``nextCursor`` says whether more follow)."""
        result = await self.request("tools/list", _cursor(cursor))
        for tool in result.get("tools", []):
            try:
                self._talk.tool_headers[tool["name"]] = header_params(tool.get("inputSchema", {}))
            except LocalProtocolError:
                pass  # (a conforming client drops such a tool; ours sends no headers)
        return result

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: ProgressHandler | None = None,
    ) -> dict[str, Any]:
        """The tools/call result (a failed tool's has ``isError``: it is returned,
        not raised). `progress` receives the call's progress notifications."""
        params = {"name": name, "arguments": dict(arguments or {})}
        try:
            return await self.request("tools/call", params, progress=progress)
        except MCPError as exc:
            # 2026: the tool's Mcp-Param-* headers were not known yet; learn them
            # from tools/list and try once more, as the digest (3.5) advises
            talk = self._talk
            if not talk.modern or exc.code != HEADER_MISMATCH or name in talk.tool_headers:
                raise
        cursor = None
        for _ in range(MAX_PAGES):
            cursor = (await self.list_tools(cursor)).get("nextCursor")
            if not cursor:
                break
        return await self.request("tools/call", params, progress=progress)

    async def list_resources(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.request("resources/list", _cursor(cursor))

    async def list_resource_templates(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.request("resources/templates/list", _cursor(cursor))

    async def read_resource(
        self, uri: str, *, progress: ProgressHandler | None = None
    ) -> dict[str, Any]:
        return await self.request("resources/read", {"uri": uri}, progress=progress)

    async def list_prompts(self, cursor: str | None = None) -> dict[str, Any]:
        return await self.request("prompts/list", _cursor(cursor))

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        progress: ProgressHandler | None = None,
    ) -> dict[str, Any]:
        params = {"name": name, "arguments": dict(arguments or {})}
        return await self.request("prompts/get", params, progress=progress)

    async def complete(self, ref: Mapping[str, Any], argument: Mapping[str, str]) -> dict[str, Any]:
        """completion/complete for `argument` (``{"name", "value"}``) of `ref`."""
        return await self.request("completion/complete", {"ref": ref, "argument": argument})

    async def subscribe_resource(self, uri: str) -> None:
        """Ask for ``notifications/resources/updated`` about `uri` (resources/subscribe
        on 2025; on 2026-07-28 the listen stream is opened again with it)."""
        if not self._talk.modern:
            await self.request("resources/subscribe", {"uri": uri})
            return
        self._resources.append(uri)
        await self._listen_again()

    async def set_logging_level(self, level: str) -> None:
        """Receive log messages from `level` up from now on."""
        self._talk.log_level = level
        if not self._talk.modern:
            await self.request("logging/setLevel", {"level": level})

    async def wait_for_notification(
        self, method: str, *, timeout_s: float = 10.0
    ) -> dict[str, Any]:
        """The next notification of `method` that no earlier wait returned: one
        already in `notifications`, or the next to arrive (`trio.TooSlowError`
        after `timeout_s`)."""
        with trio.fail_after(timeout_s):
            while True:  # (bounded by the deadline)
                seen = [n for n in self.notifications if n.get("method") == method]
                taken = self._waited.get(method, 0)
                if len(seen) > taken:
                    self._waited[method] = taken + 1
                    return seen[taken]
                await self._talk.arrived.wait()

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        progress: ProgressHandler | None = None,
    ) -> dict[str, Any]:
        """Send any request and return its result; `MCPError` for an error answer.
        On 2026-07-28 an ``input_required`` result is answered with the input
        handlers and the request sent again, until it completes."""
        return await self._talk.request(method, dict(params or {}), progress)


def _cursor(cursor: str | None) -> dict[str, Any]:
    return {} if cursor is None else {"cursor": cursor}


def _roots_answer(roots: list[dict[str, Any]]) -> InputHandler:
    async def answer(params: dict[str, Any]) -> dict[str, Any]:
        return {"roots": roots}

    return answer
