"""What a registration is, built once when it is registered, and how what its
function returns becomes an MCP result.

`tool_record`, `resource_record` and `prompt_record` work out everything a
call will need (the input schema and its compiled validator, the entry the
list methods show, whether the function is async, which parameter receives
the `Context`), so that a call only validates, calls and wraps the result
(`tool_result`, `resource_contents`, `prompt_messages`).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, get_args, get_origin, get_type_hints

from .._errors import LocalProtocolError, MCPError
from .._json import dumps
from . import _content
from ._context import Context
from ._schema import (
    HeaderParam,
    JSONSchema,
    compile_checks,
    header_params,
    schema_for,
    signature_schema,
)

# MCP 2025-11-25 tool names: 1-128 of A-Z a-z 0-9 _ - .
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


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


def _put(listing: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        listing[key] = value


def tool_record(
    fn: Callable[..., Any],
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    input_schema: JSONSchema | None,
    output_schema: JSONSchema | None,
    annotations: dict[str, Any] | None,
    headers: dict[str, str] | None,
) -> Tool:
    """The `Tool` for `fn` (see `Server.add_tool`); LocalProtocolError for a
    bad name or schema."""
    tool_name = name or fn.__name__
    if not _TOOL_NAME.fullmatch(tool_name):
        raise LocalProtocolError(f"invalid tool name {tool_name!r}")
    context_param = _context_param(fn)
    if input_schema is None:
        schema, names = signature_schema(fn, skip=_is_context)
    else:
        schema = input_schema
        names = list(input_schema.get("properties", {}))
    if schema.get("type") != "object":
        raise LocalProtocolError(f"tool {tool_name!r}: the input schema must be an object schema")
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
    return tool


def resource_record(
    fn: Callable[..., Any],
    uri: str,
    *,
    name: str | None,
    title: str | None,
    description: str | None,
    mime_type: str | None,
    cache: tuple[int, str] | None,
) -> Resource | ResourceTemplate:
    """The `Resource` for `fn`, or the `ResourceTemplate` when `uri` has
    ``{var}`` parts (see `Server.add_resource`)."""
    listing: dict[str, Any] = {"name": name or fn.__name__}
    _put(listing, "title", title)
    _put(listing, "description", description if description is not None else _doc(fn))
    _put(listing, "mimeType", mime_type)
    context_param = _context_param(fn)
    if "{" in uri:
        return ResourceTemplate(
            uri_template=uri,
            pattern=_template_pattern(uri),
            fn=fn,
            is_async=_is_async(fn),
            mime_type=mime_type,
            context_param=context_param,
            cache=cache,
            listing={"uriTemplate": uri, **listing},
        )
    return Resource(
        uri=uri,
        fn=fn,
        is_async=_is_async(fn),
        mime_type=mime_type,
        context_param=context_param,
        cache=cache,
        listing={"uri": uri, **listing},
    )


def prompt_record(
    fn: Callable[..., Any], *, name: str | None, title: str | None, description: str | None
) -> Prompt:
    """The `Prompt` for `fn` (see `Server.add_prompt`)."""
    prompt_name = name or fn.__name__
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
    return prompt


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
