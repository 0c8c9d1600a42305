"""The MCP methods, over a `Server` application.

`Dispatcher` turns ``tools/call``, ``resources/read``, ``prompts/get`` and the
other methods into calls of the registered functions and their results into
MCP result objects. It knows nothing of HTTP: the endpoint decides what a
request may run and where its answer goes.
"""

from __future__ import annotations

import base64
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .._app._context import Context
from .._app._records import prompt_messages, resource_contents, tool_result
from .._app._server import Server
from .._app._types import describe
from .._errors import InputRequired, MCPError, ResourceError, ResourceNotFound, ToolError
from .._protocol._envelope import ALL_VERSIONS
from .._protocol._jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
)
from .._protocol._logging import LOG_LEVELS
from .._protocol._revisions import at_least
from .._protocol._sessions import Session
from .._stores._sessions import SessionStore

logger = logging.getLogger("trio_mcp.endpoint")


class Dispatcher:
    """Answers MCP requests from the functions registered on `app`."""

    __slots__ = ("app", "sessions", "methods", "_modern_for", "_modern_methods")

    def __init__(self, app: Server, sessions: SessionStore) -> None:
        self.app = app
        #: Where subscriptions and log levels are kept.
        self.sessions = sessions
        #: JSON-RPC method name -> handler(params, ctx, session, version) -> result
        #: (`session`: the request's session record, None without one).
        self.methods: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
            "ping": self._ping,
            "tools/list": self._tools_list,
            "tools/call": self._tools_call,
            "resources/list": self._resources_list,
            "resources/templates/list": self._resource_templates_list,
            "resources/read": self._resources_read,
            "resources/subscribe": self._resources_subscribe,
            "resources/unsubscribe": self._resources_unsubscribe,
            "prompts/list": self._prompts_list,
            "prompts/get": self._prompts_get,
            "logging/setLevel": self._logging_set_level,
            "completion/complete": self._completion_complete,
            "server/discover": self._discover,
        }
        #: The capabilities _modern_methods was built from.
        self._modern_for: dict[str, Any] | None = None
        self._modern_methods: frozenset[str] = frozenset()

    def modern_methods(self) -> frozenset[str]:
        """The methods a 2026-07-28 request may call: no handshake or session methods,
        and only what the server's capabilities advertise."""
        caps = self.app.shared_capabilities()
        # built once per change of the capabilities (a new shared dict)
        if caps is not self._modern_for:
            found = {"server/discover"}
            if "tools" in caps:
                found |= {"tools/list", "tools/call"}
            if "resources" in caps:
                found |= {"resources/list", "resources/templates/list", "resources/read"}
            if "prompts" in caps:
                found |= {"prompts/list", "prompts/get"}
            if "completions" in caps:
                found.add("completion/complete")
            self._modern_for, self._modern_methods = caps, frozenset(found)
        return self._modern_methods

    async def _discover(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        result: dict[str, Any] = {
            "supportedVersions": list(ALL_VERSIONS),
            "capabilities": self.app.shared_capabilities(),
        }
        if self.app.instructions is not None:
            result["instructions"] = self.app.instructions
        return result

    async def _call(self, fn: Callable[..., Any], is_async: bool, kwargs: dict[str, Any]) -> Any:
        if is_async:
            return await fn(**kwargs)
        # Sync handlers run in a worker thread so they never block the server.
        return await trio.to_thread.run_sync(functools.partial(fn, **kwargs))

    async def _ping(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        return {}

    def _page(self, items: list[Any], params: dict[str, Any], key: str) -> dict[str, Any]:
        start = _decode_cursor(params.get("cursor"))
        end = start + self.app.page_size
        result: dict[str, Any] = {key: items[start:end]}
        if end < len(items):
            result["nextCursor"] = _encode_cursor(end)
        return result

    async def _tools_list(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        return self._page([t.listed for t in self.app.tools.values()], params, "tools")

    async def _tools_call(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        name = dict.get(params, "name")
        tool = dict.get(self.app.tools, name) if isinstance(name, str) else None
        if tool is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = dict.get(params, "arguments", {})
        if arguments is None:
            arguments = {}
        problem: str | None = None
        if not isinstance(arguments, dict):
            problem = "arguments must be an object"
        else:
            try:
                kwargs = tool.convert(arguments)
            except ValueError as exc:
                problem = describe(exc)
            except RecursionError:
                problem = "the arguments nest too deeply"
        if problem is not None:
            message = f"Invalid arguments for tool {tool.name}: {problem}"
            if at_least(version, "2025-11-25"):
                return {"content": [{"type": "text", "text": message}], "isError": True}
            raise MCPError(INVALID_PARAMS, message)
        if tool.context_param is not None:
            kwargs[tool.context_param] = ctx
        try:
            if tool.is_async:
                value = await tool.fn(**kwargs)
            else:
                value = await self._call(tool.fn, False, kwargs)
        except (MCPError, InputRequired, trio.Cancelled):
            raise
        except ToolError as exc:
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        except Exception:
            logger.exception("tool %s failed", tool.name)
            return _failed(f"Tool {tool.name} failed")
        try:
            return tool_result(tool, value)
        except ValueError as exc:
            logger.error(
                "tool %s returned a value that does not fit its output schema: %s",
                tool.name,
                describe(exc, "field"),
            )
            return _failed(
                f"Tool {tool.name} returned a result that does not fit its output schema"
            )

    async def _resources_list(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        return self._page([r.listed for r in self.app.resources.values()], params, "resources")

    async def _resource_templates_list(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        listings = [t.listed for t in self.app.resource_templates.values()]
        return self._page(listings, params, "resourceTemplates")

    async def _resources_read(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        uri = _uri(params)
        resource = self.app.resources.get(uri)
        if resource is not None:
            kwargs: dict[str, Any] = {}
            if resource.context_param is not None:
                kwargs[resource.context_param] = ctx
            value = await self._read(resource.fn, resource.is_async, kwargs, uri, version)
            return _with_cache(
                {"contents": resource_contents(uri, resource.mime_type, value)},
                resource.cache,
                version,
            )
        for template in self.app.resource_templates.values():
            match = template.pattern.fullmatch(uri)
            if match is not None:
                try:
                    kwargs = template.convert(match.groupdict())
                except ValueError:
                    continue  # the URI does not fit the template's types
                if template.context_param is not None:
                    kwargs[template.context_param] = ctx
                value = await self._read(template.fn, template.is_async, kwargs, uri, version)
                return _with_cache(
                    {"contents": resource_contents(uri, template.mime_type, value)},
                    template.cache,
                    version,
                )
        raise _not_found(uri, version, "Resource not found")

    async def _read(
        self,
        fn: Callable[..., Any],
        is_async: bool,
        kwargs: dict[str, Any],
        uri: str,
        version: str,
    ) -> Any:
        """What a resource function returned; its ResourceError (or ToolError)
        as the error the client sees."""
        try:
            return await self._call(fn, is_async, kwargs)
        except ResourceNotFound as exc:
            raise _not_found(uri, version, str(exc)) from None
        except (ResourceError, ToolError) as exc:
            raise MCPError(INTERNAL_ERROR, str(exc), {"uri": uri}) from None

    async def _resources_subscribe(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        uri = _uri(params)
        if session is not None:
            await self.sessions.subscribe(session.id, uri)
        return {}

    async def _resources_unsubscribe(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        uri = _uri(params)
        if session is not None:
            await self.sessions.unsubscribe(session.id, uri)
        return {}

    async def _prompts_list(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        return self._page([p.listed for p in self.app.prompts.values()], params, "prompts")

    async def _prompts_get(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        name = params.get("name")
        prompt = self.app.prompts.get(name) if isinstance(name, str) else None
        if prompt is None:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}")
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise MCPError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        try:
            kwargs = prompt.convert(arguments)
        except ValueError as exc:
            raise MCPError(
                INVALID_PARAMS, f"Invalid arguments for prompt {prompt.name}: {describe(exc)}"
            ) from None
        if prompt.context_param is not None:
            kwargs[prompt.context_param] = ctx
        value = await self._call(prompt.fn, prompt.is_async, kwargs)
        result: dict[str, Any] = {"messages": prompt_messages(value)}
        description = prompt.listing.get("description")
        if description is not None:
            result["description"] = description
        return result

    async def _logging_set_level(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        level = params.get("level")
        if level not in LOG_LEVELS:
            raise MCPError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
        if session is not None:
            await self.sessions.set_log_level(session.id, level)
        return {}

    async def _completion_complete(
        self, params: dict[str, Any], ctx: Context, session: Session | None, version: str
    ) -> dict[str, Any]:
        completer = self.app.completer
        if completer is None:
            raise MCPError(METHOD_NOT_FOUND, "Method not found: completion/complete")
        ref, argument = params.get("ref"), params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise MCPError(INVALID_PARAMS, "Invalid params: ref and argument are required")
        context = params.get("context")
        given = context.get("arguments", {}) if isinstance(context, dict) else {}
        kwargs = {"ref": ref, "argument": argument, "context_arguments": given}
        values = list(await self._call(completer, inspect.iscoroutinefunction(completer), kwargs))
        return {
            "completion": {
                "values": values[:100],
                "total": len(values),
                "hasMore": len(values) > 100,
            }
        }


def _not_found(uri: str, version: str, message: str) -> MCPError:
    # 2026-07-28 forbids -32002 and answers an unknown resource as invalid params.
    code = INVALID_PARAMS if at_least(version, "2026-07-28") else RESOURCE_NOT_FOUND
    return MCPError(code, message, {"uri": uri})


def _failed(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


def _with_cache(
    result: dict[str, Any], cache: tuple[int, str] | None, version: str
) -> dict[str, Any]:
    """A resource's own cache hints, on 2026-07-28 reads (older revisions have none)."""
    if cache is not None and version >= "2026-07-28":
        result["ttlMs"], result["cacheScope"] = cache
    return result


def _uri(params: dict[str, Any]) -> str:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise MCPError(INVALID_PARAMS, "Invalid params: uri must be a string")
    return uri


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(b"o:%d" % offset).decode("ascii")


def _decode_cursor(cursor: object) -> int:
    if cursor is None:
        return 0
    if isinstance(cursor, str):
        try:
            raw = base64.urlsafe_b64decode(cursor.encode("ascii"))
            if raw.startswith(b"o:") and raw[2:].isdigit():
                return int(raw[2:])
        except (ValueError, UnicodeEncodeError):
            pass
    raise MCPError(INVALID_PARAMS, "Invalid params: bad cursor")
