"""An MCP server exposing what the official conformance suite and the benchmarks look for.

    python examples/everything.py --port 8000

serves http://127.0.0.1:8000/mcp until SIGINT or SIGTERM, which drain it.
"""

from __future__ import annotations

import argparse
import base64
import logging
from typing import Annotated

import trio

from trio_mcp import (
    Content,
    Context,
    MCPConfig,
    Server,
    ServerConfig,
    ToolError,
    audio_content,
    embedded_text,
    image_content,
    run_mcp,
    text_content,
)

# A 1x1 red PNG and a tiny WAV, as the conformance scenarios expect images and audio.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC"
)
WAV = base64.b64decode("UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=")

server = Server(
    "trio-mcp-everything",
    "0.1.0",
    instructions="A test server exposing every kind of MCP feature.",
)


@server.tool()
async def echo(text: Annotated[str, "The text to send back"]) -> str:
    """Return the text it is given."""
    return text


@server.tool()
async def test_simple_text() -> str:
    """Return a fixed text."""
    return "This is a simple text response for testing."


@server.tool()
async def test_image_content() -> Content:
    """Return an image."""
    return image_content(PNG, "image/png")


@server.tool()
async def test_audio_content() -> Content:
    """Return audio."""
    return audio_content(WAV, "audio/wav")


@server.tool()
async def test_embedded_resource() -> Content:
    """Return an embedded resource."""
    return embedded_text("test://embedded-resource", "This is an embedded resource content.")


@server.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Report progress three times, then answer."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"step {step}")
        await trio.sleep(0.01)
    return "Progress test completed"


@server.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Send three log messages, then answer."""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.log("info", message)
        await trio.sleep(0.05)
    return "Logging test completed"


@server.tool()
async def test_error_handling() -> str:
    """Always fail, as a tool error the model can see."""
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Ask the client's model, and return what it said."""
    result = await ctx.sample(
        [{"role": "user", "content": {"type": "text", "text": prompt}}], max_tokens=100
    )
    content = result.get("content", {})
    return f"LLM response: {content.get('text', '') if isinstance(content, dict) else content}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Ask the user for input, and return the answer."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    result = await ctx.elicit(message, schema)
    return f"User response: action={result.get('action')}, content={result.get('content')}"


@server.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicit a form whose fields carry default values (SEP-1034)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {
                "type": "string",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "default": True},
        },
    }
    result = await ctx.elicit("Please review and update the form fields with defaults", schema)
    return f"Elicitation completed: action={result.get('action')}, content={result.get('content')}"


@server.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicit the five enum shapes of SEP-1330."""
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
    }
    result = await ctx.elicit("Please select options from the enum fields", schema)
    return f"Elicitation completed: action={result.get('action')}, content={result.get('content')}"


@server.tool()
async def test_list_roots(ctx: Context) -> str:
    """Return the URIs of the client's roots, one per line."""
    return "\n".join(root["uri"] for root in await ctx.list_roots())


@server.tool()
async def test_reconnection(ctx: Context) -> str:
    """Close the response stream mid-call; the client resumes it (SEP-1699)."""
    await ctx.close_sse_stream()
    await trio.sleep(0.1)  # the client reconnects with Last-Event-ID meanwhile
    return "Reconnection test completed successfully"


@server.tool()
async def test_trigger_tool_change() -> str:
    """Tell every session that the tool list changed."""
    server.notify_tools_changed()
    return "Tool list change notified"


@server.tool()
async def test_trigger_prompt_change() -> str:
    """Tell every session (and listener) that the prompt list changed."""
    server.notify_prompts_changed()
    return "Prompt list change notified"


@server.tool()
async def test_trigger_resource_update(uri: str = "test://watched-resource") -> str:
    """Tell the sessions subscribed to `uri` that it changed."""
    server.notify_resource_updated(uri)
    return f"Update of {uri} notified"


# ---- 2026-07-28 fixtures: capabilities per request, logging, input-required rounds ----

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
THREE_INPUTS = {
    "user_name": (
        "elicitation/create",
        {"mode": "form", "message": "Your name?", "requestedSchema": NAME_SCHEMA},
    ),
    "greeting": (
        "sampling/createMessage",
        {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
            "maxTokens": 20,
        },
    ),
    "client_roots": ("roots/list", {}),
}


@server.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs sampling; a request that did not declare it gets -32021."""
    question = [{"role": "user", "content": {"type": "text", "text": "Anything?"}}]
    answer = await ctx.sample(question, max_tokens=10, key="probe")
    return f"sampled: {answer.get('model')}"


@server.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs once; 2026 requests without a logLevel must not see it."""
    await ctx.log("info", "a log message")
    return "logged"


@server.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Reports progress, then needs input: never a request on the stream."""
    await ctx.report_progress(1, 2)
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {answer.get('content', {}).get('name')}!"


@server.tool(headers={"region": "Region"})
async def test_x_mcp_header(region: str, count: int = 1) -> str:
    """Its region argument travels in the Mcp-Param-Region header too."""
    return f"region={region} count={count}"


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks for a name with an input-required round."""
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {answer.get('content', {}).get('name')}!"


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model with an input-required round."""
    question = [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}]
    answer = await ctx.sample(question, max_tokens=50, key="capital_question")
    content = answer.get("content", {})
    return f"The model said: {content.get('text') if isinstance(content, dict) else content}"


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks for the client's roots with an input-required round."""
    roots = await ctx.list_roots(key="client_roots")
    return "Roots: " + ", ".join(root.get("uri", "") for root in roots)


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Keeps state across the rounds in the sealed requestState."""
    ctx.state.setdefault("issued", "confirm-requested")
    answer = await ctx.elicit("Confirm?", NAME_SCHEMA, key="confirm")
    ok = ctx.state.get("issued") == "confirm-requested"
    return f"{'state-ok' if ok else 'state-lost'}: {answer.get('action')}"


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks for three inputs in one round."""
    ctx.state["round"] = "multiple"
    answers = await ctx.ask_inputs(THREE_INPUTS)
    return f"Got inputs: {', '.join(sorted(answers))}"


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Two rounds of input, each with a new requestState."""
    first = await ctx.elicit("Step 1: your name?", NAME_SCHEMA, key="step1")
    ctx.state["step1"] = first.get("content", {}).get("name")
    second = await ctx.elicit("Step 2: your name again?", NAME_SCHEMA, key="step2")
    return f"Completed both rounds: {ctx.state['step1']} / {second.get('content', {}).get('name')}"


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Its requestState is sealed: a tampered one is refused."""
    ctx.state["secret"] = "sealed"
    answer = await ctx.elicit("Confirm?", NAME_SCHEMA, key="confirm")
    return f"accepted: {answer.get('action')}"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only for the inputs the client declared."""
    answers = await ctx.ask_inputs(THREE_INPUTS)
    return f"Got inputs: {', '.join(sorted(answers))}"


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that needs context from the user first."""
    answer = await ctx.elicit(
        "What context should the prompt use?", NAME_SCHEMA, key="user_context"
    )
    return f"Prompt with context: {answer.get('content', {}).get('name')}"


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers (a sync tool: it runs in a worker thread)."""
    return a + b


@server.tool()
async def test_multiple_content_types() -> list[Content]:
    """Return text, an image and an embedded resource."""
    return [
        text_content("Multiple content types test:"),
        image_content(PNG, "image/png"),
        embedded_text(
            "test://mixed-content-resource", '{"test":"data","value":123}', "application/json"
        ),
    ]


# A tool whose input schema uses JSON Schema 2020-12 keywords, given verbatim.
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@server.tool(description="Tool with JSON Schema 2020-12 features", input_schema=JSON_SCHEMA_2020_12)
async def json_schema_2020_12_tool(**arguments: object) -> str:
    return "ok"


@server.resource("test://static-text", mime_type="text/plain")
async def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


@server.resource("test://template/{id}/data", mime_type="application/json")
async def template_data(id: str) -> str:
    """A resource template with one parameter."""
    return f'{{"id":"{id}","templateTest":true,"data":"Data for ID: {id}"}}'


@server.resource("test://static-binary", mime_type="image/png")
async def static_binary() -> bytes:
    """A static binary resource (a PNG image)."""
    return PNG


@server.resource("test://watched-resource", mime_type="text/plain")
async def watched_resource() -> str:
    """A resource clients may subscribe to."""
    return "Watched resource content"


@server.prompt()
async def test_simple_prompt() -> str:
    """A prompt without arguments."""
    return "This is a simple prompt for testing."


@server.prompt()
async def test_prompt_with_arguments(
    arg1: Annotated[str, "First test argument"], arg2: Annotated[str, "Second test argument"]
) -> str:
    """A prompt with two arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt()
async def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, "URI of the resource to embed"],
) -> list[object]:
    """A prompt that embeds a resource."""
    return [
        embedded_text(resourceUri, "Embedded resource content for testing."),
        "Please process the embedded resource above.",
    ]


@server.prompt()
async def test_prompt_with_image() -> list[object]:
    """A prompt with an image."""
    return [image_content(PNG, "image/png"), "Please analyze the image above."]


@server.completion()
async def complete(
    ref: dict[str, str], argument: dict[str, str], context_arguments: dict[str, str]
) -> list[str]:
    """Suggest values for prompt arguments."""
    candidates = ["paris", "park", "party", "python", "pytest"]
    return [c for c in candidates if c.startswith(argument.get("value", ""))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    run_mcp(server, MCPConfig(http=ServerConfig(host=args.host, port=args.port)))


if __name__ == "__main__":
    main()
