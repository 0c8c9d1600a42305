"""traces = true: a server span per MCP request, after the OpenTelemetry
semantic conventions for MCP, parented on the trace context in params._meta."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trio_mcp import MCPConfig, MCPError, Server, ToolError
from trio_mcp._errors import StartupError
from trio_mcp.testing import Client

EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
# (the global provider can be set once per process; these tests share it)
trace.set_tracer_provider(_PROVIDER)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
ERAS = pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
TRACED = MCPConfig(traces=True)

server = Server("traced")


@server.tool
async def add(a: int, b: int) -> int:
    return a + b


@server.tool
async def broken() -> str:
    raise ToolError("no")


@server.tool
async def crashes() -> str:
    raise RuntimeError("bug")


@server.prompt
async def greet(who: str) -> str:
    return f"Hello {who}"


@pytest.fixture(autouse=True)
def clear() -> None:
    EXPORTER.clear()


def spans() -> list[ReadableSpan]:
    # (less the handshakes the client makes: initialize, server/discover)
    handshakes = ("initialize", "server/discover")
    return [span for span in EXPORTER.get_finished_spans() if span.name not in handshakes]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@ERAS
async def test_a_tool_call_is_a_server_span(version: str) -> None:
    async with Client(server, version, config=TRACED) as client:
        await client.call_tool("add", {"a": 1, "b": 2})
        session = client.session_id if version != "2026-07-28" else None
    (span,) = spans()
    assert span.name == "tools/call add"
    assert span.kind is trace.SpanKind.SERVER
    assert span.status.status_code is trace.StatusCode.UNSET
    expected = {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": version,
        "gen_ai.tool.name": "add",
        "gen_ai.operation.name": "execute_tool",
        "network.transport": "tcp",
    }
    assert attributes(span).items() >= expected.items()
    assert attributes(span).get("mcp.session.id") == session
    assert "jsonrpc.request.id" in attributes(span)


async def test_the_parent_is_the_context_in_meta() -> None:
    async with Client(server, config=TRACED) as client:
        await client.request(
            "tools/call",
            {"name": "add", "arguments": {"a": 1, "b": 1}, "_meta": {"traceparent": TRACEPARENT}},
        )
        await client.request("prompts/get", {"name": "greet", "arguments": {"who": "x"}})
    called, prompted = spans()
    assert called.parent is not None and called.parent.is_remote
    assert format(called.context.trace_id, "032x") == TRACE_ID
    assert format(called.parent.span_id, "016x") == PARENT_ID
    assert prompted.parent is None  # (no context sent: a new trace)
    assert prompted.name == "prompts/get greet"
    assert attributes(prompted)["gen_ai.prompt.name"] == "greet"


@pytest.mark.parametrize(
    "meta",
    [{"traceparent": "garbage"}, {"traceparent": 7}, {"traceparent": ["a"]}, "not a mapping"],
)
async def test_a_bad_context_starts_a_new_trace(meta: object) -> None:
    async with Client(server, config=TRACED) as client:
        result = await client.request(
            "tools/call", {"name": "add", "arguments": {"a": 2, "b": 2}, "_meta": meta}
        )
    assert result["structuredContent"] == {"result": 4}
    (span,) = spans()
    assert span.parent is None


async def test_errors_mark_the_span() -> None:
    async with Client(server, config=TRACED) as client:
        assert (await client.call_tool("broken"))["isError"] is True
        assert (await client.call_tool("crashes"))["isError"] is True
        assert (await client.call_tool("add", {"a": "x"}))["isError"] is True
        with pytest.raises(MCPError):
            await client.call_tool("missing")
    failures = {span.name: attributes(span) for span in spans()}
    assert failures["tools/call broken"]["error.type"] == "tool_error"
    assert failures["tools/call crashes"]["error.type"] == "tool_error"
    assert failures["tools/call add"]["error.type"] == "tool_error"
    assert failures["tools/call"]["error.type"] == "-32602"
    assert failures["tools/call"]["rpc.response.status_code"] == "-32602"
    assert all(span.status.status_code is trace.StatusCode.ERROR for span in spans())


async def test_an_unregistered_name_stays_out_of_the_span_name() -> None:
    async with Client(server, config=TRACED) as client:
        with pytest.raises(MCPError):
            await client.call_tool("x" * 1000)
    (span,) = spans()
    assert span.name == "tools/call"
    assert attributes(span)["gen_ai.tool.name"] == "x" * 128


async def test_off_builds_nothing() -> None:
    async with Client(server) as client:
        await client.call_tool("add", {"a": 1, "b": 2})
        assert client.endpoint.runner.tracing is None
    assert spans() == []


def test_on_without_the_api_is_one_line(monkeypatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_otel(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("opentelemetry"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_otel)
    with pytest.raises(StartupError, match=r"pip install 'trio-mcp\[otel\]'"):
        Client(server, config=TRACED)


async def test_over_stdio_the_transport_is_a_pipe() -> None:
    from trio_mcp._mcp._tracing import Tracing
    from trio_mcp._protocol._jsonrpc import RPCRequest

    async def answer() -> dict[str, Any]:
        return {"content": []}

    message = RPCRequest(7, "tools/call", {"name": "add", "arguments": {}})
    await Tracing(server, "pipe").traced(answer(), message, None, "2025-11-25")
    (span,) = spans()
    assert attributes(span)["network.transport"] == "pipe"
    assert attributes(span)["jsonrpc.request.id"] == "7"
