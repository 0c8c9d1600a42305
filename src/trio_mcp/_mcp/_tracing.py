"""Traces: a server span for each MCP request, after the OpenTelemetry
semantic conventions for MCP, made through the OpenTelemetry API.

Built only when ``MCPConfig.traces`` is on (the ``otel`` extra installs the
API); off, the runner holds None and nothing here is imported. The spans go
to whatever tracer provider the process set up (the application, or
``opentelemetry-instrument``); with none, the API's default drops them.

A span's parent is the trace context the client put in the request's
``params._meta`` (``traceparent``, ``tracestate``, ``baggage``), as the
conventions ask, since an HTTP request may carry many MCP messages. Span
names stay low in cardinality: a tool's or prompt's name joins the method
only when the application registered it; any other name a client sends is
an attribute, cut to `MAX_NAME_CHARS`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Final

from .._app._server import Server
from .._errors import InputRequired, MCPError, StartupError
from .._protocol._jsonrpc import RPCRequest
from .._protocol._sessions import Session
from .._version import __version__

#: The ``_meta`` keys that carry trace context (W3C Trace Context and Baggage).
CONTEXT_KEYS: Final = ("traceparent", "tracestate", "baggage")
#: A client-sent name is kept to this many characters in an attribute.
MAX_NAME_CHARS: Final = 128


class Tracing:
    """Makes the server span of each request it is handed (`traced`)."""

    __slots__ = ("app", "transport", "_tracer", "_extract", "_server", "_error")

    def __init__(self, app: Server, transport: str) -> None:
        try:
            from opentelemetry import propagate, trace
        except ImportError:
            raise StartupError(
                "traces needs the OpenTelemetry API: pip install 'trio-mcp[otel]'"
            ) from None
        self.app = app
        #: ``tcp`` (HTTP) or ``pipe`` (stdio), for ``network.transport``.
        self.transport = transport
        self._tracer = trace.get_tracer("trio_mcp", __version__)
        self._extract = propagate.extract
        self._server = trace.SpanKind.SERVER
        self._error = trace.StatusCode.ERROR

    def _target(self, method: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The span's name and the request's attributes of its target."""
        attributes: dict[str, Any] = {}
        name = params.get("name")
        if method in ("tools/call", "prompts/get") and isinstance(name, str):
            tool = method == "tools/call"
            attributes["gen_ai.tool.name" if tool else "gen_ai.prompt.name"] = name[:MAX_NAME_CHARS]
            if tool:
                attributes["gen_ai.operation.name"] = "execute_tool"
            if name in (self.app.tools if tool else self.app.prompts):
                return f"{method} {name}", attributes
        uri = params.get("uri")
        if method.startswith("resources/") and isinstance(uri, str):
            attributes["mcp.resource.uri"] = uri[: MAX_NAME_CHARS * 8]
        return method, attributes

    async def traced(
        self,
        answer: Awaitable[Any],
        message: RPCRequest,
        session: Session | None,
        version: str,
    ) -> Any:
        """Await `answer` (the handler's result for `message`) inside its span;
        an error of the handler marks the span and goes on as it was."""
        params = message.params if isinstance(message.params, dict) else {}
        meta = params.get("_meta")
        carrier = (
            {key: meta[key] for key in CONTEXT_KEYS if isinstance(meta.get(key), str)}
            if isinstance(meta, dict)
            else {}
        )
        name, attributes = self._target(message.method, params)
        attributes["mcp.method.name"] = message.method
        attributes["mcp.protocol.version"] = version
        attributes["jsonrpc.request.id"] = str(message.id)
        attributes["network.transport"] = self.transport
        if session is not None:
            attributes["mcp.session.id"] = session.id
        with self._tracer.start_as_current_span(
            name,
            context=self._extract(carrier) if carrier else None,
            kind=self._server,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                result = await answer
            except MCPError as exc:
                span.set_attribute("error.type", str(exc.code))
                span.set_attribute("rpc.response.status_code", str(exc.code))
                span.set_status(self._error, exc.message)
                raise
            except InputRequired:
                raise  # (a question to the client, not a failure)
            except Exception as exc:
                span.set_attribute("error.type", type(exc).__qualname__)
                span.record_exception(exc)
                span.set_status(self._error)
                raise
            if isinstance(result, dict) and result.get("isError") is True:
                span.set_attribute("error.type", "tool_error")
                span.set_status(self._error)
            return result
