"""`Context`: what a handler may know and do about the request it serves.

The request runner builds one per request (``_mcp/_runner.py``); a handler
receives it through a parameter annotated ``Context``. Its methods send on the
request's own stream (progress, log messages), ask the client for input
(elicitation, sampling, roots) and end the response early, through the
request's stream and the runner (protocols here, so this module imports no
trio).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

from .._errors import InputRequired, LocalProtocolError, MCPError
from .._json import dumps
from .._protocol._logging import LOG_LEVELS


class _Cancellation(Protocol):
    """What tells a handler its request was cancelled (a trio cancel scope)."""

    @property
    def cancel_called(self) -> bool: ...


class _Stream(Protocol):
    """The request's stream, as a handler's context uses it (the runner's
    ``RequestStream``)."""

    @property
    def session(self) -> Any: ...

    async def emit(self, data: bytes) -> None: ...

    async def close_connection(self) -> None: ...


class _Asker(Protocol):
    """What sends a request to the client and awaits its answer (the runner)."""

    async def ask_client(
        self,
        session: Any,
        emit: Callable[[bytes], Awaitable[None]],
        method: str,
        params: dict[str, Any],
        capability: str,
        timeout_s: float | None,
    ) -> Any: ...


#: The client capability each kind of input request needs.
_INPUT_CAPABILITY: Final = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


class Context:
    """What a handler may know and do about the request it serves.

    Declare a parameter annotated ``Context`` to receive it; it is not part of
    the tool's input schema.
    """

    __slots__ = (
        "request_id",
        "session_id",
        "principal",
        "headers",
        "protocol_version",
        "client_capabilities",
        "_progress_token",
        "_stream",
        "_log_level",
        "_cancel_scope",
        "_asker",
        "_input_responses",
        "_asked",
        "_mrtr",
        "state",
        "lifespan",
    )

    # The request runner passes these by position (RequestRunner._context): keep the order.
    def __init__(
        self,
        request_id: str | int,
        session_id: str | None,
        principal: object,
        headers: list[tuple[bytes, bytes]],
        protocol_version: str,
        client_capabilities: Mapping[str, Any],
        progress_token: str | int | None,
        stream: _Stream,
        log_level: str | None,
        cancel_scope: _Cancellation,
        lifespan: Any = None,
        asker: _Asker | None = None,
        input_responses: dict[str, Any] | None = None,
        state: dict[str, Any] | None = None,
        mrtr: bool = False,
    ) -> None:
        self.request_id = request_id
        self.session_id = session_id
        self.principal = principal
        self.headers = headers
        self.protocol_version = protocol_version
        self.client_capabilities = client_capabilities
        self._progress_token = progress_token
        self._stream = stream
        self._log_level = log_level
        self._cancel_scope = cancel_scope
        #: What the server's lifespan context manager yielded (None without one).
        self.lifespan = lifespan
        # None: this request cannot ask its client (no session, or JSON answers only)
        self._asker = asker
        # 2026-07-28: input comes back with the retry (multi round-trip requests).
        self._mrtr = mrtr
        self._input_responses = input_responses if input_responses is not None else {}
        self._asked: dict[str, dict[str, Any]] = {}
        #: Handler data kept across the rounds of a 2026-07-28 request (sealed in
        #: ``requestState``); empty on the first round.
        self.state: dict[str, Any] = state if state is not None else {}

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the client asked for progress."""
        if self._progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self._progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._stream.emit(
            dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        )

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` to the client, if its log level lets it through."""
        if level not in LOG_LEVELS:
            raise LocalProtocolError(f"unknown log level {level!r}")
        threshold = self._log_level
        if threshold is not None and LOG_LEVELS[level] < LOG_LEVELS.get(threshold, 99):
            return  # below the client's level ("off": a 2026 request that set none)
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._stream.emit(
            dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        )

    # FastMCP's shorthands for log(), so that handlers written for it run unchanged.
    async def debug(self, message: Any, logger_name: str | None = None) -> None:
        """``log("debug", message)``."""
        await self.log("debug", message, logger_name)

    async def info(self, message: Any, logger_name: str | None = None) -> None:
        """``log("info", message)``."""
        await self.log("info", message, logger_name)

    async def warning(self, message: Any, logger_name: str | None = None) -> None:
        """``log("warning", message)``."""
        await self.log("warning", message, logger_name)

    async def error(self, message: Any, logger_name: str | None = None) -> None:
        """``log("error", message)``."""
        await self.log("error", message, logger_name)

    async def _ask(
        self,
        method: str,
        params: dict[str, Any],
        capability: str,
        timeout_s: float | None,
        key: str | None = None,
    ) -> Any:
        if self._mrtr:
            self._require(capability)
            key = key or f"{method}#{len(self._asked) + 1}"
            if key in self._input_responses:
                return self._input_responses[key]
            self._asked[key] = {"method": method, "params": params}
            raise InputRequired(dict(self._asked))
        if self._asker is None:
            raise MCPError(
                -32600,
                f"{method} needs a session and a response stream; this request has neither",
            )
        stream = self._stream
        return await self._asker.ask_client(
            stream.session, stream.emit, method, params, capability, timeout_s
        )

    async def elicit(
        self,
        message: str,
        requested_schema: dict[str, Any],
        *,
        timeout_s: float | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Ask the user for input through the client (form mode).

        Returns the client's answer: ``{"action": "accept" | "decline" |
        "cancel", "content": {...}}``. Raises MCPError if the client did not
        declare the ``elicitation`` capability or does not answer in time.
        """
        params: dict[str, Any] = {"message": message, "requestedSchema": requested_schema}
        if self.protocol_version >= "2025-11-25":
            params["mode"] = "form"
        result: dict[str, Any] = await self._ask(
            "elicitation/create", params, "elicitation", timeout_s, key
        )
        return result

    async def elicit_url(
        self, message: str, url: str, elicitation_id: str, *, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Ask the user to visit `url` (URL-mode elicitation, 2025-11-25)."""
        params = {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id}
        result: dict[str, Any] = await self._ask(
            "elicitation/create", params, "elicitation", timeout_s
        )
        return result

    @property
    def input_responses(self) -> dict[str, Any]:
        """The client's answers to input requests so far (2026-07-28 rounds)."""
        return self._input_responses

    def _require(self, capability: str) -> None:
        if capability not in self.client_capabilities:
            raise MCPError(
                -32021,
                f"this request needs the client capability {capability!r}",
                {"requiredCapabilities": {capability: {}}},
            )

    async def ask_inputs(
        self, requests: Mapping[str, tuple[str, dict[str, Any]]]
    ) -> dict[str, Any]:
        """Ask the client for several inputs at once: ``{key: (method, params)}``.

        Returns ``{key: answer}``. On 2026-07-28 all missing answers are asked
        for in one ``input_required`` round, and inputs whose capability the
        client did not declare in this request are left out (not in the result);
        on older revisions they are sent one after the other.
        """
        answers: dict[str, Any] = {}
        for key, (method, params) in requests.items():
            capability = _INPUT_CAPABILITY[method]
            if capability not in self.client_capabilities:
                continue
            if not self._mrtr:
                answers[key] = await self._ask(method, params, capability, None)
            elif key in self._input_responses:
                answers[key] = self._input_responses[key]
            else:
                self._asked[key] = {"method": method, "params": params}
        if self._asked:
            raise InputRequired(dict(self._asked))
        return answers

    async def elicitation_complete(self, elicitation_id: str) -> None:
        """Tell the client a URL-mode elicitation finished (2025-11-25)."""
        await self._stream.emit(
            dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/elicitation/complete",
                    "params": {"elicitationId": elicitation_id},
                }
            )
        )

    async def sample(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        timeout_s: float | None = None,
        key: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Ask the client's model for a completion (``sampling/createMessage``).

        `messages` are ``{"role": ..., "content": {...}}`` dicts; `extra` adds
        other request fields (``temperature``, ``modelPreferences``, ...).
        """
        params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens, **extra}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        result: dict[str, Any] = await self._ask(
            "sampling/createMessage", params, "sampling", timeout_s, key
        )
        return result

    async def list_roots(
        self, *, timeout_s: float | None = None, key: str | None = None
    ) -> list[dict[str, Any]]:
        """The client's roots (``roots/list``)."""
        result = await self._ask("roots/list", {}, "roots", timeout_s, key)
        roots: list[dict[str, Any]] = result.get("roots", [])
        return roots

    async def close_sse_stream(self) -> None:
        """End this request's HTTP response now, while the request goes on (SEP-1699).

        The client reconnects with GET and ``Last-Event-ID`` and receives the
        events it missed, then the rest, including the response. Does nothing
        when the answer is not a stream yet or there is no session.
        """
        await self._stream.close_connection()

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled this request."""
        return bool(self._cancel_scope.cancel_called)
