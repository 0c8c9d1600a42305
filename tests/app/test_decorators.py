"""The registration decorators work bare and called, or refuse at once."""

from __future__ import annotations

import pytest

from trio_mcp import Server


def test_tool_bare_and_called_register_the_same() -> None:
    server = Server("t")

    @server.tool
    async def bare(x: int) -> int:
        return x

    @server.tool()
    async def called(x: int) -> int:
        return x

    @server.tool("renamed")
    async def positional_name(x: int) -> int:
        return x

    assert set(server.tools) == {"bare", "called", "renamed"}
    # the decorator gives the function back unchanged, in every form
    assert server.tools["bare"].fn is bare
    assert server.tools["called"].fn is called
    assert server.tools["renamed"].fn is positional_name
    assert (
        server.tools["bare"].listing["inputSchema"] == server.tools["called"].listing["inputSchema"]
    )


def test_prompt_bare_and_called_register_the_same() -> None:
    server = Server("t")

    @server.prompt
    async def bare(code: str) -> str:
        return code

    @server.prompt(title="Called")
    async def called(code: str) -> str:
        return code

    assert set(server.prompts) == {"bare", "called"}
    assert server.prompts["bare"].fn is bare
    assert server.prompts["called"].listing["title"] == "Called"


def test_completion_bare_and_called() -> None:
    server = Server("t")

    @server.completion
    async def first(ref: dict, argument: dict, context_arguments: dict) -> list[str]:
        return []

    assert server.completer is first

    @server.completion()
    async def second(ref: dict, argument: dict, context_arguments: dict) -> list[str]:
        return []

    assert server.completer is second


def test_resource_without_its_uri_is_a_type_error_at_once() -> None:
    server = Server("t")

    async def readme() -> str:
        return "x"

    with pytest.raises(TypeError, match="URI"):
        server.resource(readme)  # type: ignore[arg-type]
    assert not server.resources and not server.resource_templates


@pytest.mark.parametrize("method", ["tool", "prompt"])
def test_a_name_that_is_not_a_string_is_a_type_error(method: str) -> None:
    server = Server("t")
    with pytest.raises(TypeError, match="name"):
        getattr(server, method)(42)
