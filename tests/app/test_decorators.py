"""The registration decorators work bare and called, or refuse at once."""

from __future__ import annotations

import re
from typing import Any

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


@pytest.mark.parametrize(
    ("register", "owner"),
    [
        (lambda s, fn: s.add_tool(fn, annotations={"hint": {1, 2}}), "tool 'fn'"),
        (lambda s, fn: s.add_resource(fn, "mem://a", title=b"raw"), "resource 'mem://a'"),
        (lambda s, fn: s.add_resource(fn, "mem://{x}", title=b"raw"), "resource 'mem://{x}'"),
        (lambda s, fn: s.add_prompt(fn, description=object()), "prompt 'fn'"),
    ],
    ids=["tool", "resource", "template", "prompt"],
)
def test_a_listing_json_cannot_carry_is_refused_at_registration_naming_its_owner(
    register: Any, owner: str
) -> None:
    # The list answers carry each listing encoded once, at registration: a
    # value JSON cannot carry would otherwise fail every tools/list.
    server = Server("t")

    async def fn(x: str = "") -> str:
        return x

    with pytest.raises(TypeError, match=f"^{re.escape(owner)}: its listing is not JSON"):
        register(server, fn)
    assert not server.tools and not server.resources and not server.resource_templates
    assert not server.prompts
