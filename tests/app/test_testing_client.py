"""trio_mcp.testing.Client: every method, in both eras, through the real endpoint."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from _support import load_example

from trio_mcp import (
    Context,
    MCPConfig,
    MCPError,
    Request,
    ResourceError,
    ResourceNotFound,
    Server,
    ToolError,
)
from trio_mcp.testing import Client

EVERYTHING = load_example("everything").server
ERAS = pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
NAME = {"action": "accept", "content": {"name": "Ada", "username": "ada", "email": "a@b.c"}}


def text(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block["type"] == "text")


class Recorder:
    """An input handler that answers `answer` and keeps what it was asked."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.asked: list[dict[str, Any]] = []

    async def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(params)
        return self.answer


@ERAS
async def test_each_list_answer_carries_the_listings_as_registered(version: str) -> None:
    # (the listings go out encoded once, at registration: `_json.encoded_once`)
    server = EVERYTHING
    async with Client(server, version) as client:
        tools = (await client.list_tools())["tools"]
        resources = (await client.list_resources())["resources"]
        templates = (await client.list_resource_templates())["resourceTemplates"]
        prompts = (await client.list_prompts())["prompts"]
    page = server.page_size  # (each answer is the first page of its list)
    assert tools == [tool.listing for tool in server.tools.values()][:page]
    assert resources == [r.listing for r in server.resources.values()][:page]
    assert templates == [t.listing for t in server.resource_templates.values()][:page]
    assert prompts == [p.listing for p in server.prompts.values()][:page]
    assert tools and resources and templates and prompts


@ERAS
async def test_lists_reads_and_prompts_of_the_example(version: str) -> None:
    async with Client(EVERYTHING, version) as client:
        assert client.protocol_version == version
        assert client.server_info["name"] == "trio-mcp-everything"
        assert client.instructions == "A test server exposing every kind of MCP feature."
        assert "tools" in client.server_capabilities
        tools = {tool["name"]: tool for tool in (await client.list_tools())["tools"]}
        assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
        assert "echo" in tools and "test_x_mcp_header" in tools
        resources = (await client.list_resources())["resources"]
        assert {r["uri"] for r in resources} >= {"test://static-text", "test://static-binary"}
        templates = (await client.list_resource_templates())["resourceTemplates"]
        assert [t["uriTemplate"] for t in templates] == ["test://template/{id}/data"]
        read = await client.read_resource("test://static-text")
        assert read["contents"] == [
            {
                "uri": "test://static-text",
                "mimeType": "text/plain",
                "text": "This is the content of the static text resource.",
            }
        ]
        from_template = await client.read_resource("test://template/42/data")
        assert '"id":"42"' in from_template["contents"][0]["text"]
        prompts = {p["name"] for p in (await client.list_prompts())["prompts"]}
        assert {"test_simple_prompt", "test_prompt_with_arguments"} <= prompts
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "x", "arg2": "y"})
        message = prompt["messages"][0]
        assert message["role"] == "user"
        assert message["content"]["text"] == "Prompt with arguments: arg1='x', arg2='y'"
        completed = await client.complete(
            {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            {"name": "arg1", "value": "pa"},
        )
        assert completed["completion"]["values"] == ["paris", "park", "party"]
        result = await client.call_tool("add", {"a": 1, "b": 2})
        assert result["structuredContent"] == {"result": 3}
        assert text(await client.call_tool("echo", {"text": "hé"})) == "hé"
        if version == "2026-07-28":
            assert result["resultType"] == "complete"
            assert "ttlMs" in (await client.list_tools()) and client.session_id is None


@ERAS
async def test_progress_reaches_the_callback_sync_or_async(version: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    awaited: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        await trio.lowlevel.checkpoint()
        awaited.append(progress)

    async with Client(EVERYTHING, version) as client:
        result = await client.call_tool(
            "test_tool_with_progress",
            progress=lambda *args: seen.append(args),  # type: ignore[arg-type]
        )
        assert text(result) == "Progress test completed"
        await client.call_tool("test_tool_with_progress", progress=on_progress)
    assert seen == [(0, 100, "step 0"), (50, 100, "step 50"), (100, 100, "step 100")]
    assert awaited == [0, 50, 100]
    progress = [n for n in client.notifications if n["method"] == "notifications/progress"]
    assert len(progress) == 6


@ERAS
async def test_a_call_without_a_callback_asks_for_no_progress(version: str) -> None:
    async with Client(EVERYTHING, version) as client:
        await client.call_tool("test_tool_with_progress")
    assert not [n for n in client.notifications if n["method"] == "notifications/progress"]


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_log_messages_arrive_as_notifications(version: str) -> None:
    async with Client(EVERYTHING, version, log_level="info") as client:
        result = await client.call_tool("test_tool_with_logging")
        assert text(result) == "Logging test completed"
    logged = [n["params"] for n in client.notifications if n["method"] == "notifications/message"]
    assert [entry["data"] for entry in logged] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    assert {entry["level"] for entry in logged} == {"info"}


async def test_a_2026_request_without_a_log_level_gets_no_log_message() -> None:
    async with Client(EVERYTHING, "2026-07-28") as client:
        assert text(await client.call_tool("test_logging_tool")) == "logged"
        assert not [n for n in client.notifications if n["method"] == "notifications/message"]
        await client.set_logging_level("info")
        await client.call_tool("test_logging_tool")
        logged = await client.wait_for_notification("notifications/message")
        assert logged["params"]["data"] == "a log message"


async def test_elicitation_round_trip_on_a_2025_session() -> None:
    elicit = Recorder({"action": "accept", "content": {"username": "ada", "email": "a@b.c"}})
    async with Client(EVERYTHING, "2025-11-25", elicitation=elicit) as client:
        result = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert text(result) == (
        "User response: action=accept, content={'username': 'ada', 'email': 'a@b.c'}"
    )
    [asked] = elicit.asked
    assert asked["message"] == "Who are you?"
    assert asked["mode"] == "form"
    assert asked["requestedSchema"]["required"] == ["username", "email"]


async def test_elicitation_round_trip_on_2026_is_input_required() -> None:
    elicit = Recorder(NAME)
    async with Client(EVERYTHING, "2026-07-28", elicitation=elicit) as client:
        result = await client.call_tool("test_input_required_result_elicitation")
        assert text(result) == "Hello, Ada!"
        assert result["resultType"] == "complete"
        assert [a["message"] for a in elicit.asked] == ["What is your name?"]
        # two rounds, each asked and answered; the sealed state went with them
        elicit.asked.clear()
        result = await client.call_tool("test_input_required_result_multi_round")
        assert text(result) == "Completed both rounds: Ada / Ada"
        assert [a["message"] for a in elicit.asked] == [
            "Step 1: your name?",
            "Step 2: your name again?",
        ]
        state = await client.call_tool("test_input_required_result_request_state")
        assert text(state) == "state-ok: accept"
        prompt = await client.get_prompt("test_input_required_result_prompt")
        assert prompt["messages"][0]["content"]["text"] == "Prompt with context: Ada"


async def test_sampling_and_roots_in_both_eras() -> None:
    sample = Recorder({"role": "assistant", "content": {"type": "text", "text": "Paris"}})
    roots = [{"uri": "file:///work", "name": "work"}, {"uri": "file:///tmp"}]
    async with Client(EVERYTHING, "2025-11-25", sampling=sample, roots=roots) as client:
        assert client.capabilities == {"sampling": {}, "roots": {}}
        result = await client.call_tool("test_sampling", {"prompt": "Capital?"})
        assert text(result) == "LLM response: Paris"
        assert sample.asked[0]["messages"][0]["content"]["text"] == "Capital?"
        assert text(await client.call_tool("test_list_roots")) == "file:///work\nfile:///tmp"
    async with Client(EVERYTHING, "2026-07-28", sampling=sample, roots=roots) as client:
        result = await client.call_tool("test_input_required_result_sampling")
        assert text(result) == "The model said: Paris"
        result = await client.call_tool("test_input_required_result_list_roots")
        assert text(result) == "Roots: file:///work, file:///tmp"


async def test_several_inputs_in_one_2026_round() -> None:
    elicit, sample = Recorder(NAME), Recorder({"role": "assistant", "content": {}})
    async with Client(
        EVERYTHING, "2026-07-28", elicitation=elicit, sampling=sample, roots=[]
    ) as client:
        result = await client.call_tool("test_input_required_result_multiple_inputs")
    assert text(result) == "Got inputs: client_roots, greeting, user_name"
    assert len(elicit.asked) == len(sample.asked) == 1


@ERAS
async def test_an_undeclared_capability_is_an_error(version: str) -> None:
    async with Client(EVERYTHING, version) as client:
        assert client.capabilities == {}
        with pytest.raises(MCPError) as caught:
            await client.call_tool("test_missing_capability")
    if version == "2026-07-28":
        assert caught.value.code == -32021
        assert caught.value.data == {"requiredCapabilities": {"sampling": {}}}
    else:  # the server cannot send sampling/createMessage on this session
        assert caught.value.code == -32600
        assert "'sampling'" in caught.value.message


@ERAS
async def test_a_tool_error_is_a_result_and_an_unknown_tool_raises(version: str) -> None:
    async with Client(EVERYTHING, version) as client:
        failed = await client.call_tool("test_error_handling")
        assert failed["isError"] is True
        assert text(failed) == "This tool intentionally returns an error for testing"
        with pytest.raises(MCPError) as caught:
            await client.call_tool("no_such_tool")
        assert caught.value.code == -32602
        assert "no_such_tool" in caught.value.message
        if version == "2025-11-25":
            with pytest.raises(MCPError) as caught:
                await client.read_resource("test://nowhere")
            assert (caught.value.code, caught.value.data) == (-32002, {"uri": "test://nowhere"})


async def test_an_unknown_resource_is_invalid_params_on_2026() -> None:
    async with Client(EVERYTHING, "2026-07-28") as client:
        with pytest.raises(MCPError) as caught:
            await client.read_resource("test://nowhere")
    assert (caught.value.code, caught.value.data) == (-32602, {"uri": "test://nowhere"})


def _shelf() -> Server:
    app = Server("shelf")
    books = {1: "Dune"}

    @app.resource("books://{book_id}")
    def book(book_id: int) -> str:
        if book_id not in books:
            raise ResourceNotFound(f"no book {book_id}")
        return books[book_id]

    @app.resource("broken://{part}")
    def broken(part: str) -> str:
        if part == "tool":
            raise ToolError("the shelf fell over")
        raise ResourceError(f"cannot read {part}")

    return app


@ERAS
async def test_resource_errors_reach_the_client_with_their_message(version: str) -> None:
    not_found = -32002 if version == "2025-11-25" else -32602
    async with Client(_shelf(), version) as client:
        assert (await client.read_resource("books://1"))["contents"][0]["text"] == "Dune"
        with pytest.raises(MCPError) as caught:
            await client.read_resource("books://2")
        assert (caught.value.code, caught.value.message) == (not_found, "no book 2")
        assert caught.value.data == {"uri": "books://2"}
        with pytest.raises(MCPError) as caught:
            await client.read_resource("books://two")  # no int: the template does not match
        assert (caught.value.code, caught.value.message) == (not_found, "Resource not found")
        for part, message in (("tool", "the shelf fell over"), ("x", "cannot read x")):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(f"broken://{part}")
            assert (caught.value.code, caught.value.message) == (-32603, message)


async def test_an_error_leaves_the_block_as_raised() -> None:
    with pytest.raises(MCPError):
        async with Client(EVERYTHING) as client:
            await client.call_tool("no_such_tool")


async def test_list_changes_arrive_on_the_session_stream() -> None:
    async with Client(EVERYTHING, "2025-11-25") as client:
        assert client.endpoint.statistics().streams == 1  # the session's GET stream
        await client.call_tool("test_trigger_tool_change")
        changed = await client.wait_for_notification("notifications/tools/list_changed")
        assert changed["params"] == {}
        EVERYTHING.notify_prompts_changed()
        await client.wait_for_notification("notifications/prompts/list_changed")
        EVERYTHING.notify_tools_changed()
        again = await client.wait_for_notification("notifications/tools/list_changed")
        assert again is not changed  # each wait takes the next one
        with pytest.raises(trio.TooSlowError):
            await client.wait_for_notification("notifications/tools/list_changed", timeout_s=0.2)


async def test_list_changes_arrive_on_the_2026_listen_stream() -> None:
    async with Client(EVERYTHING, "2026-07-28") as client:
        acknowledged = client.notifications[0]
        assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
        assert acknowledged["params"]["notifications"]["toolsListChanged"] is True
        EVERYTHING.notify_tools_changed()
        changed = await client.wait_for_notification("notifications/tools/list_changed")
        assert "io.modelcontextprotocol/subscriptionId" in changed["params"]["_meta"]


@ERAS
async def test_resource_updates_after_subscribing(version: str) -> None:
    async with Client(EVERYTHING, version) as client:
        await client.subscribe_resource("test://watched-resource")
        await client.call_tool("test_trigger_resource_update")
        updated = await client.wait_for_notification("notifications/resources/updated")
        assert updated["params"]["uri"] == "test://watched-resource"


async def test_a_stream_the_server_ends_early_is_resumed() -> None:
    async with Client(EVERYTHING, "2025-11-25") as client:
        result = await client.call_tool("test_reconnection")
    assert text(result) == "Reconnection test completed successfully"


async def test_x_mcp_header_arguments_travel_in_headers_on_2026() -> None:
    async with Client(EVERYTHING, "2026-07-28") as client:
        # not listed yet: the first call is refused (-32020), the client learns
        # the annotations from tools/list and calls again
        result = await client.call_tool("test_x_mcp_header", {"region": "eu wést", "count": 2})
        assert text(result) == "region=eu wést count=2"


async def test_the_session_ends_with_delete_and_the_lifespan_with_the_client() -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[dict[str, str]]:
        events.append("enter")
        yield {"db": "pool"}
        events.append("exit")

    server = Server("life", lifespan=lifespan)

    @server.tool()
    async def which(ctx: Context) -> str:
        return str(ctx.lifespan["db"])

    async with Client(server) as client:
        assert events == ["enter"]
        assert client.endpoint.statistics().sessions == 1
        assert text(await client.call_tool("which")) == "pool"
        assert client.session_id is not None
    assert events == ["enter", "exit"]
    assert client.session_id is None
    assert client.endpoint.statistics().sessions == 0


@ERAS
async def test_headers_reach_the_handler_and_the_authenticate_hook(version: str) -> None:
    server = Server("auth")

    @server.tool()
    async def whoami(ctx: Context) -> str:
        return f"{ctx.principal}:{dict(ctx.headers).get(b'x-team', b'').decode()}"

    async def authenticate(request: Request) -> object:
        token = request.header(b"authorization")
        return "alice" if token == b"Bearer good" else None

    headers = {"Authorization": "Bearer good", "X-Team": "blue"}
    async with Client(server, version, headers=headers, authenticate=authenticate) as client:
        assert text(await client.call_tool("whoami")) == "alice:blue"
    with pytest.raises(MCPError) as caught:  # (the 401's body)
        async with Client(server, version, authenticate=authenticate):
            pass
    assert (caught.value.code, caught.value.message) == (-32600, "Unauthorized")


async def test_a_long_tool_costs_no_wall_time_under_the_autojump_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = Server("slow")

    @server.tool()
    async def nap(ctx: Context) -> str:
        for step in range(3):
            await trio.sleep(600)
            await ctx.report_progress(step + 1, 3)
        return "rested"

    steps: list[float] = []
    start = trio.current_time()
    async with Client(server, "2025-11-25") as client:
        result = await client.call_tool("nap", progress=lambda p, t, m: steps.append(p))
    assert text(result) == "rested"
    assert steps == [1, 2, 3]
    assert trio.current_time() - start >= 1800


async def test_a_legacy_revision_and_a_config() -> None:
    config = MCPConfig(path="/api/mcp")
    async with Client(EVERYTHING, "2025-06-18", config=config) as client:
        assert client.protocol_version == "2025-06-18"
        assert text(await client.call_tool("echo", {"text": "old"})) == "old"
        assert await client.request("ping") == {}
