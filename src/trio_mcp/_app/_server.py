"""The application API: `Server` with tools, resources and prompts, and `Context`.

Everything a registration needs is worked out once, when it is registered:
the input schema and its compiled validator, the entry ``tools/list`` shows,
whether the function is async, which parameter receives the `Context`. A call
then only validates, calls and wraps the result.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, get_args, get_origin, get_type_hints, overload

from .._errors import InputRequired, LocalProtocolError, MCPError
from .._json import dumps
from .._protocol._logging import LOG_LEVELS
from . import _content
from ._schema import (
    HeaderParam,
    JSONSchema,
    compile_checks,
    header_params,
    schema_for,
    signature_schema,
)

F = TypeVar("F", bound=Callable[..., Any])

# MCP 2025-11-25 tool names: 1-128 of A-Z a-z 0-9 _ - .
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


#: The client capability each kind of input request needs.
_INPUT_CAPABILITY: Final = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}

#: ``await authorize(principal, method, name) -> bool``: may this request run?
Authorizer = Callable[[object, str, str | None], Awaitable[bool]]


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
        "_emit",
        "_log_level",
        "_cancel_scope",
        "_request",
        "_close_stream",
        "_input_responses",
        "_asked",
        "_mrtr",
        "state",
        "lifespan",
    )

    # The endpoint passes these by position (see MCPEndpoint._run): keep the order.
    def __init__(
        self,
        request_id: str | int,
        session_id: str | None,
        principal: object,
        headers: list[tuple[bytes, bytes]],
        protocol_version: str,
        client_capabilities: Mapping[str, Any],
        progress_token: str | int | None,
        emit: Callable[[bytes], Awaitable[None]],
        log_level: str | None,
        cancel_scope: Any,
        lifespan: Any = None,
        request: Callable[[str, dict[str, Any], str, float | None], Awaitable[Any]] | None = None,
        close_stream: Callable[[], Awaitable[None]] | None = None,
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
        self._emit = emit
        self._log_level = log_level
        self._cancel_scope = cancel_scope
        #: What the server's lifespan context manager yielded (None without one).
        self.lifespan = lifespan
        self._request = request
        self._close_stream = close_stream
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
        await self._emit(
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
        await self._emit(
            dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": params})
        )

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
        if self._request is None:
            raise MCPError(
                -32600,
                f"{method} needs a session and a response stream; this request has neither",
            )
        return await self._request(method, params, capability, timeout_s)

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
        await self._emit(
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
        if self._close_stream is not None:
            await self._close_stream()

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled this request."""
        return bool(self._cancel_scope.cancel_called)


def _is_context(hint: Any) -> bool:
    return hint is Context


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    fn: Callable[..., Any]
    is_async: bool
    param_names: tuple[str, ...]
    context_param: str | None
    accepts: Callable[[Any], bool]  # the arguments' fast check...
    validate: Callable[[Any], str | None]  # ...and why they fail it
    wrap_result: bool  # structured output of a non-object type, wrapped as {"result": ...}
    has_output_schema: bool
    header_params: tuple[HeaderParam, ...]
    listing: dict[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class Resource:
    uri: str
    fn: Callable[..., Any]
    is_async: bool
    mime_type: str | None
    context_param: str | None
    cache: tuple[int, str] | None
    listing: dict[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class ResourceTemplate:
    uri_template: str
    pattern: re.Pattern[str]
    fn: Callable[..., Any]
    is_async: bool
    mime_type: str | None
    context_param: str | None
    cache: tuple[int, str] | None
    listing: dict[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class Prompt:
    name: str
    fn: Callable[..., Any]
    is_async: bool
    param_names: tuple[str, ...]
    required: frozenset[str]
    context_param: str | None
    listing: dict[str, Any] = field(repr=False)


def _doc(fn: Callable[..., Any]) -> str | None:
    """The docstring without its ``Args:`` section (that goes into the schema)."""
    doc = inspect.getdoc(fn)
    if not doc:
        return None
    kept = []
    for line in doc.splitlines():
        if re.match(r"^(Args|Arguments|Parameters|Params):\s*$", line.strip()):
            break
        kept.append(line)
    return "\n".join(kept).strip() or None


def _context_param(fn: Callable[..., Any]) -> str | None:
    hints = get_type_hints(fn)
    for name, hint in hints.items():
        if name != "return" and _is_context(hint):
            return name
    return None


def _is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn)


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


def _put(listing: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        listing[key] = value


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
    ) -> Tool:
        """Register `fn` as a tool.

        The input schema comes from the type hints of `fn`'s parameters, or is
        `input_schema` verbatim (then the arguments object is passed as keyword
        arguments). The output schema comes from the return annotation unless
        it is str, None or content; `output_schema` overrides it.
        """
        tool_name = name or fn.__name__
        if not _TOOL_NAME.fullmatch(tool_name):
            raise LocalProtocolError(f"invalid tool name {tool_name!r}")
        if tool_name in self.tools:
            raise LocalProtocolError(f"a tool named {tool_name!r} is already registered")
        context_param = _context_param(fn)
        if input_schema is None:
            schema, names = signature_schema(fn, skip=_is_context)
        else:
            schema = input_schema
            names = list(input_schema.get("properties", {}))
        if schema.get("type") != "object":
            raise LocalProtocolError(
                f"tool {tool_name!r}: the input schema must be an object schema"
            )
        for param, header in (headers or {}).items():
            prop = schema.get("properties", {}).get(param)
            if prop is None:
                raise LocalProtocolError(f"tool {tool_name!r}: no parameter {param!r} for a header")
            prop["x-mcp-header"] = header
        try:
            mirrored = header_params(schema)
        except LocalProtocolError as exc:
            raise LocalProtocolError(f"tool {tool_name!r}: {exc}") from None
        wrap_result = False
        if output_schema is None:
            output_schema, wrap_result = _output_schema(fn)
        listing: dict[str, Any] = {"name": tool_name}
        _put(listing, "title", title)
        _put(listing, "description", description if description is not None else _doc(fn))
        listing["inputSchema"] = schema
        _put(listing, "outputSchema", output_schema)
        _put(listing, "annotations", annotations)
        accepts, validate = compile_checks(schema)
        tool = Tool(
            name=tool_name,
            fn=fn,
            is_async=_is_async(fn),
            param_names=tuple(names),
            context_param=context_param,
            accepts=accepts,
            validate=validate,
            wrap_result=wrap_result,
            has_output_schema=output_schema is not None,
            header_params=mirrored,
            listing=listing,
        )
        self.tools[tool_name] = tool
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
        listing: dict[str, Any] = {"name": name or fn.__name__}
        _put(listing, "title", title)
        _put(listing, "description", description if description is not None else _doc(fn))
        _put(listing, "mimeType", mime_type)
        context_param = _context_param(fn)
        if "{" in uri:
            if uri in self.resource_templates:
                raise LocalProtocolError(f"resource template {uri!r} is already registered")
            template = ResourceTemplate(
                uri_template=uri,
                pattern=_template_pattern(uri),
                fn=fn,
                is_async=_is_async(fn),
                mime_type=mime_type,
                context_param=context_param,
                cache=cache,
                listing={"uriTemplate": uri, **listing},
            )
            self.resource_templates[uri] = template
            return template
        if uri in self.resources:
            raise LocalProtocolError(f"resource {uri!r} is already registered")
        resource = Resource(
            uri=uri,
            fn=fn,
            is_async=_is_async(fn),
            mime_type=mime_type,
            context_param=context_param,
            cache=cache,
            listing={"uri": uri, **listing},
        )
        self.resources[uri] = resource
        return resource

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
        prompt_name = name or fn.__name__
        if prompt_name in self.prompts:
            raise LocalProtocolError(f"a prompt named {prompt_name!r} is already registered")
        schema, names = signature_schema(fn, skip=_is_context)
        required = frozenset(schema.get("required", ()))
        arguments = []
        for arg in names:
            entry: dict[str, Any] = {"name": arg, "required": arg in required}
            _put(entry, "description", schema["properties"][arg].get("description"))
            arguments.append(entry)
        listing: dict[str, Any] = {"name": prompt_name}
        _put(listing, "title", title)
        _put(listing, "description", description if description is not None else _doc(fn))
        if arguments:
            listing["arguments"] = arguments
        prompt = Prompt(
            name=prompt_name,
            fn=fn,
            is_async=_is_async(fn),
            param_names=tuple(names),
            required=required,
            context_param=_context_param(fn),
            listing=listing,
        )
        self.prompts[prompt_name] = prompt
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


def _template_pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template)
    regex = "".join(
        re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts)
    )
    return re.compile(regex)


_UNSTRUCTURED: Final = (str, type(None), inspect.Signature.empty)


def _output_schema(fn: Callable[..., Any]) -> tuple[JSONSchema | None, bool]:
    hints = get_type_hints(fn, include_extras=True)
    ret = hints.get("return", inspect.Signature.empty)
    if ret in _UNSTRUCTURED or ret is Any or ret is _content.Content:
        return None, False
    if get_origin(ret) is list and get_args(ret) == (_content.Content,):
        return None, False
    try:
        schema = schema_for(ret)
    except LocalProtocolError:
        return None, False
    if schema.get("type") == "object":
        return schema, False
    return {"type": "object", "properties": {"result": schema}, "required": ["result"]}, True


def tool_result(tool: Tool, value: Any) -> dict[str, Any]:
    """The CallToolResult for what a tool returned."""
    if isinstance(value, dict) and "content" in value and isinstance(value["content"], list):
        return value  # already a CallToolResult
    if value is None:
        return {"content": []}
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}  # _content.text(value), inlined
    if _content.is_content(value):
        return {"content": [value]}
    if isinstance(value, list) and value and all(_content.is_content(v) for v in value):
        return {"content": value}
    structured = {"result": value} if tool.wrap_result else value
    result: dict[str, Any] = {"content": [_content.text(dumps(value).decode())]}
    if tool.has_output_schema:
        result["structuredContent"] = structured
    return result


def resource_contents(uri: str, mime_type: str | None, value: Any) -> list[dict[str, Any]]:
    """The ``contents`` of a ReadResourceResult for what a resource function returned."""
    if isinstance(value, str):
        entry: dict[str, Any] = {"uri": uri, "text": value}
    elif isinstance(value, bytes | bytearray):
        entry = {"uri": uri, "blob": _content._b64(bytes(value))}
    elif isinstance(value, list):
        return value
    else:
        entry = {"uri": uri, "text": dumps(value).decode()}
        mime_type = mime_type or "application/json"
    if mime_type is not None:
        entry["mimeType"] = mime_type
    return [entry]


def prompt_messages(value: Any) -> list[dict[str, Any]]:
    """The ``messages`` of a GetPromptResult for what a prompt function returned."""
    if isinstance(value, str):
        return [{"role": "user", "content": _content.text(value)}]
    if not isinstance(value, list):
        raise MCPError(-32603, "Internal error: the prompt returned an unusable value")
    messages = []
    for item in value:
        if isinstance(item, str):
            messages.append({"role": "user", "content": _content.text(item)})
        elif isinstance(item, dict) and "role" in item:
            messages.append(item)
        elif _content.is_content(item):
            messages.append({"role": "user", "content": item})
        else:
            raise MCPError(-32603, "Internal error: the prompt returned an unusable message")
    return messages
