"""The application API: `Server`, with the tools, resources and prompts it serves.

Register with the decorators (``@server.tool``) or the ``add_*`` methods they
call; each builds its record once (``_records.py``). `Server` keeps the
registries, works out the capabilities they imply, and tells the endpoints
serving it when something changes (``listeners``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar, overload

from .._errors import LocalProtocolError
from .._protocol._logging import LOG_LEVELS
from ._records import (
    Prompt,
    Resource,
    ResourceTemplate,
    Tool,
    prompt_record,
    resource_record,
    tool_record,
)
from ._schema import JSONSchema

F = TypeVar("F", bound=Callable[..., Any])

#: ``await authorize(principal, method, name) -> bool``: may this request run?
Authorizer = Callable[[object, str, str | None], Awaitable[bool]]


def _decorator_name(
    kind: str, name: str | Callable[..., Any] | None
) -> tuple[str | None, Callable[..., Any] | None]:
    """A decorator's first argument: (the name it gives, None) when called, or
    (None, the function) when used bare; anything else is a TypeError at once."""
    if name is None or isinstance(name, str):
        return name, None
    if callable(name):
        return None, name
    raise TypeError(f"{kind}() takes the {kind}'s name (a str) or, used bare, the function")


class Server:
    """An MCP server application: tools, resources and prompts to serve.

    Register with the decorators (``@server.tool()``) or the ``add_*`` methods
    they call. Serve it with `trio_mcp.serve_mcp` or `trio_mcp.run_mcp`.
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        instructions: str | None = None,
        title: str | None = None,
        page_size: int = 100,
        lifespan: Callable[[Server], AbstractAsyncContextManager[Any]] | None = None,
        authorize: Authorizer | None = None,
        tools: Iterable[Callable[..., Any]] = (),
        prompts: Iterable[Callable[..., Any]] = (),
    ) -> None:
        """Args:
        name, version, title, instructions: what ``initialize`` tells clients.
        page_size: entries per page of the ``*/list`` results.
        lifespan: ``lifespan(server)`` gives an async context manager entered
            before serving and exited after; what it yields is
            ``Context.lifespan`` (database pools and the like).
        authorize: ``await authorize(principal, method, name)`` decides whether
            a request may run; `name` is the tool or prompt name or the
            resource URI, else None. False answers 403.
        tools, prompts: functions to register with default options.
        """
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.name = name
        self.version = version
        self.instructions = instructions
        self.title = title
        self.page_size = page_size
        self.lifespan = lifespan
        self.authorize = authorize
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.resource_templates: dict[str, ResourceTemplate] = {}
        self.prompts: dict[str, Prompt] = {}
        #: The ``completion/complete`` handler, if one is registered.
        self.completer: Callable[..., Any] | None = None
        #: Called with each server notification (method, params, resource uri or
        #: None); the endpoints serving this app listen here.
        self.listeners: list[Callable[[str, dict[str, Any], str | None], None]] = []
        self._capabilities_key: tuple[bool, ...] | None = None
        self._capabilities: dict[str, Any] = {}
        for fn in tools:
            self.add_tool(fn)
        for fn in prompts:
            self.add_prompt(fn)

    # ---- tools ------------------------------------------------------------

    @overload
    def tool(self, name: F, /) -> F: ...
    @overload
    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: JSONSchema | None = None,
        output_schema: JSONSchema | None = None,
        annotations: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        allow_unknown_arguments: bool = False,
    ) -> Callable[[F], F]: ...
    def tool(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        input_schema: JSONSchema | None = None,
        output_schema: JSONSchema | None = None,
        annotations: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        allow_unknown_arguments: bool = False,
    ) -> Any:
        """Register the decorated function as a tool (see `add_tool`).

        Bare (``@server.tool``) or called (``@server.tool()``,
        ``@server.tool("name", title=...)``); the function comes back unchanged.
        """

        def register(fn: F) -> F:
            self.add_tool(
                fn,
                name=tool_name,
                title=title,
                description=description,
                input_schema=input_schema,
                output_schema=output_schema,
                annotations=annotations,
                headers=headers,
                allow_unknown_arguments=allow_unknown_arguments,
            )
            return fn

        tool_name, bare = _decorator_name("tool", name)
        return register(bare) if bare is not None else register

    def add_tool(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: JSONSchema | None = None,
        output_schema: JSONSchema | None = None,
        annotations: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        allow_unknown_arguments: bool = False,
    ) -> Tool:
        """Register `fn` as a tool.

        The input schema comes from the type hints of `fn`'s parameters
        (through pydantic: JSON types, pydantic models, dataclasses, TypedDicts,
        enums, datetimes, UUIDs and the rest; ``Annotated[T, Field(...)]`` or
        ``Annotated[T, "description"]``; descriptions from the docstring's
        ``Args:``), and `fn` receives the arguments converted to those types.
        Arguments that are no parameter are refused unless
        `allow_unknown_arguments` (then they are dropped). Or the schema is
        `input_schema` verbatim, and the arguments object is passed as keyword
        arguments as it came.

        The output schema comes from the return annotation unless it is str,
        None or content (a non-object type is wrapped as ``{"result": ...}``);
        `output_schema` overrides it. A value that does not fit the output
        schema is the tool's error. LocalProtocolError, naming the parameter,
        for a type with no JSON Schema.
        """
        tool = tool_record(
            fn,
            name=name,
            title=title,
            description=description,
            input_schema=input_schema,
            output_schema=output_schema,
            annotations=annotations,
            headers=headers,
            allow_unknown=allow_unknown_arguments,
        )
        if tool.name in self.tools:
            raise LocalProtocolError(f"a tool named {tool.name!r} is already registered")
        self.tools[tool.name] = tool
        if self.listeners:
            self.notify_tools_changed()
        return tool

    def remove_tool(self, name: str) -> None:
        del self.tools[name]
        self.notify_tools_changed()

    # ---- notifications to connected clients --------------------------------

    def _notify(self, method: str, params: dict[str, Any], uri: str | None = None) -> None:
        for listener in self.listeners:
            listener(method, params, uri)

    def notify_tools_changed(self) -> None:
        """Tell every session (on its GET stream) that the tool list changed."""
        self._notify("notifications/tools/list_changed", {})

    def notify_prompts_changed(self) -> None:
        """Tell every session that the prompt list changed."""
        self._notify("notifications/prompts/list_changed", {})

    def notify_resources_changed(self) -> None:
        """Tell every session that the resource list changed."""
        self._notify("notifications/resources/list_changed", {})

    def notify_resource_updated(self, uri: str) -> None:
        """Tell the sessions subscribed to `uri` that it changed."""
        self._notify("notifications/resources/updated", {"uri": uri}, uri)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message not tied to a request to every session whose level admits it."""
        if level not in LOG_LEVELS:
            raise LocalProtocolError(f"unknown log level {level!r}")
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        self._notify("notifications/message", params)

    # ---- resources --------------------------------------------------------

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        cache: tuple[int, str] | None = None,
    ) -> Callable[[F], F]:
        """Register the decorated function as a resource or, with ``{var}`` parts, a template."""
        if not isinstance(uri, str):
            raise TypeError(
                'resource() needs the resource\'s URI first: @server.resource("demo://readme")'
            )

        def register(fn: F) -> F:
            self.add_resource(
                fn,
                uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                cache=cache,
            )
            return fn

        return register

    def add_resource(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        cache: tuple[int, str] | None = None,
    ) -> Resource | ResourceTemplate:
        """Register `fn` to produce the contents of `uri` (a URI template if it has ``{var}``).

        `fn` returns str (text), bytes (a blob), or a list of content dicts with
        ``uri`` and ``text``/``blob``; a template's variables are passed as
        keyword arguments. `cache` is this resource's ``(ttlMs, cacheScope)``
        for 2026-07-28 reads.
        """
        record = resource_record(
            fn,
            uri,
            name=name,
            title=title,
            description=description,
            mime_type=mime_type,
            cache=cache,
        )
        if isinstance(record, ResourceTemplate):
            if uri in self.resource_templates:
                raise LocalProtocolError(f"resource template {uri!r} is already registered")
            self.resource_templates[uri] = record
        else:
            if uri in self.resources:
                raise LocalProtocolError(f"resource {uri!r} is already registered")
            self.resources[uri] = record
        return record

    # ---- prompts ----------------------------------------------------------

    @overload
    def prompt(self, name: F, /) -> F: ...
    @overload
    def prompt(
        self, name: str | None = None, *, title: str | None = None, description: str | None = None
    ) -> Callable[[F], F]: ...
    def prompt(
        self,
        name: str | Callable[..., Any] | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
    ) -> Any:
        """Register the decorated function as a prompt (see `add_prompt`); bare
        (``@server.prompt``) or called (``@server.prompt()``)."""

        def register(fn: F) -> F:
            self.add_prompt(fn, name=prompt_name, title=title, description=description)
            return fn

        prompt_name, bare = _decorator_name("prompt", name)
        return register(bare) if bare is not None else register

    def add_prompt(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
    ) -> Prompt:
        """Register `fn` as a prompt; its str parameters are the prompt's arguments.

        `fn` returns str (one user message), or a list whose items are messages
        (``{"role": ..., "content": ...}``) or content blocks (user messages).
        """
        prompt = prompt_record(fn, name=name, title=title, description=description)
        if prompt.name in self.prompts:
            raise LocalProtocolError(f"a prompt named {prompt.name!r} is already registered")
        self.prompts[prompt.name] = prompt
        return prompt

    # ---- completions ------------------------------------------------------

    @overload
    def completion(self, fn: F, /) -> F: ...
    @overload
    def completion(self) -> Callable[[F], F]: ...
    def completion(self, fn: Callable[..., Any] | None = None) -> Any:
        """Register the decorated function as the ``completion/complete`` handler;
        bare (``@server.completion``) or called (``@server.completion()``).

        It is called as ``fn(ref, argument, context_arguments)`` with the
        request's ``ref`` (``{"type": "ref/prompt", "name": ...}`` or
        ``{"type": "ref/resource", "uri": ...}``), ``argument`` (``name`` and
        ``value``) and the other arguments already given (a dict), and returns
        the suggested values (at most 100 are sent).
        """

        def register(fn: F) -> F:
            self.completer = fn
            return fn

        if fn is not None and not callable(fn):
            raise TypeError("completion() takes no arguments; use @server.completion")
        return register(fn) if fn is not None else register

    # ---- what initialize announces ----------------------------------------

    def shared_capabilities(self) -> dict[str, Any]:
        """`capabilities()` as one shared dict, rebuilt only when what they depend
        on changes (every initialize answer carries them); callers must not
        modify it."""
        key = (
            bool(self.tools),
            bool(self.resources or self.resource_templates),
            bool(self.prompts),
            self.completer is not None,
        )
        if key != self._capabilities_key:
            self._capabilities_key, self._capabilities = key, self.capabilities()
        return self._capabilities

    def capabilities(self) -> dict[str, Any]:
        """The server capabilities, derived from what is registered (a new dict)."""
        caps: dict[str, Any] = {"logging": {}}
        if self.tools:
            caps["tools"] = {"listChanged": True}
        if self.resources or self.resource_templates:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self.prompts:
            caps["prompts"] = {"listChanged": True}
        if self.completer is not None:
            caps["completions"] = {}
        return caps
