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
from typing import Any, Final, get_args, get_origin

from .._errors import LocalProtocolError, MCPError
from .._json import dumps, encoded_once, loads
from . import _content
from ._context import Context
from ._schema import HeaderParam, JSONSchema, header_params, verbatim_arguments, verbatim_result
from ._types import Result, json_text, parameters, result_type, type_hints

# MCP 2025-11-25 tool names: 1-128 of A-Z a-z 0-9 _ - .
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")


def _is_context(hint: Any) -> bool:
    return hint is Context


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    fn: Callable[..., Any]
    is_async: bool
    context_param: str | None
    #: The arguments object -> a new dict of keyword arguments, converted to the
    #: parameters' types; ValueError (`_types.describe` says why) if they do not fit.
    convert: Callable[[Any], dict[str, Any]]
    #: What the tool returned -> its structuredContent, checked against the output
    #: schema (ValueError if it does not fit); None without an output schema.
    to_json: Callable[[Any], Any] | None
    wrap_result: bool  # structured output of a non-object type, wrapped as {"result": ...}
    header_params: tuple[HeaderParam, ...]
    listing: dict[str, Any] = field(repr=False)
    #: `listing` encoded once, for the list answers (`_json.encoded_once`).
    listed: Any = field(repr=False)


@dataclass(frozen=True, slots=True)
class Resource:
    uri: str
    fn: Callable[..., Any]
    is_async: bool
    mime_type: str | None
    context_param: str | None
    cache: tuple[int, str] | None
    listing: dict[str, Any] = field(repr=False)
    #: `listing` encoded once, for the list answers (`_json.encoded_once`).
    listed: Any = field(repr=False)


@dataclass(frozen=True, slots=True)
class ResourceTemplate:
    uri_template: str
    pattern: re.Pattern[str]
    #: The URI's variables -> keyword arguments of their parameters' types
    #: (ValueError: the URI does not fit the template).
    convert: Callable[[Any], dict[str, Any]]
    fn: Callable[..., Any]
    is_async: bool
    mime_type: str | None
    context_param: str | None
    cache: tuple[int, str] | None
    listing: dict[str, Any] = field(repr=False)
    #: `listing` encoded once, for the list answers (`_json.encoded_once`).
    listed: Any = field(repr=False)


@dataclass(frozen=True, slots=True)
class Prompt:
    name: str
    fn: Callable[..., Any]
    is_async: bool
    #: The arguments (strings, as MCP sends them) -> keyword arguments of the
    #: parameters' types (ValueError if they do not fit).
    convert: Callable[[Any], dict[str, Any]]
    context_param: str | None
    listing: dict[str, Any] = field(repr=False)
    #: `listing` encoded once, for the list answers (`_json.encoded_once`).
    listed: Any = field(repr=False)


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


def _context_param(fn: Callable[..., Any], owner: str) -> str | None:
    hints = type_hints(fn, owner)
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
    allow_unknown: bool = False,
) -> Tool:
    """The `Tool` for `fn` (see `Server.add_tool`); LocalProtocolError for a
    bad name or schema."""
    tool_name = name or fn.__name__
    if not _TOOL_NAME.fullmatch(tool_name):
        raise LocalProtocolError(f"invalid tool name {tool_name!r}")
    owner = f"tool {tool_name!r}"
    context_param = _context_param(fn, owner)
    if input_schema is None:
        params = parameters(fn, owner=owner, skip=_is_context, allow_unknown=allow_unknown)
        schema, convert = params.schema, params.convert
    else:
        schema, convert = input_schema, verbatim_arguments(input_schema)
    if schema.get("type") != "object":
        raise LocalProtocolError(f"{owner}: the input schema must be an object schema")
    for param, header in (headers or {}).items():
        prop = schema.get("properties", {}).get(param)
        if prop is None:
            raise LocalProtocolError(f"{owner}: no parameter {param!r} for a header")
        prop["x-mcp-header"] = header
    try:
        mirrored = header_params(schema)
    except LocalProtocolError as exc:
        raise LocalProtocolError(f"{owner}: {exc}") from None
    wrap_result = False
    to_json = None
    if output_schema is not None:
        to_json = verbatim_result(output_schema)
    else:
        result = _result(fn, owner)
        if result is not None:
            output_schema, wrap_result, to_json = result.schema, result.wrapped, result.to_json
    listing: dict[str, Any] = {"name": tool_name}
    _put(listing, "title", title)
    _put(listing, "description", description if description is not None else _doc(fn))
    listing["inputSchema"] = schema
    _put(listing, "outputSchema", output_schema)
    _put(listing, "annotations", annotations)
    tool = Tool(
        name=tool_name,
        fn=fn,
        is_async=_is_async(fn),
        context_param=context_param,
        convert=convert,
        to_json=to_json,
        wrap_result=wrap_result,
        header_params=mirrored,
        listing=listing,
        listed=_listed(listing, owner),
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
    owner = f"resource {uri!r}"
    context_param = _context_param(fn, owner)
    if "{" in uri:
        listing = {"uriTemplate": uri, **listing}
        return ResourceTemplate(
            uri_template=uri,
            pattern=_template_pattern(uri),
            convert=_template_parameters(fn, uri),
            fn=fn,
            is_async=_is_async(fn),
            mime_type=mime_type,
            context_param=context_param,
            cache=cache,
            listing=listing,
            listed=_listed(listing, owner),
        )
    listing = {"uri": uri, **listing}
    return Resource(
        uri=uri,
        fn=fn,
        is_async=_is_async(fn),
        mime_type=mime_type,
        context_param=context_param,
        cache=cache,
        listing=listing,
        listed=_listed(listing, owner),
    )


def prompt_record(
    fn: Callable[..., Any], *, name: str | None, title: str | None, description: str | None
) -> Prompt:
    """The `Prompt` for `fn` (see `Server.add_prompt`)."""
    prompt_name = name or fn.__name__
    owner = f"prompt {prompt_name!r}"
    params = parameters(fn, owner=owner, skip=_is_context, allow_unknown=True)
    required = frozenset(params.schema.get("required", ()))
    properties = params.schema.get("properties", {})
    arguments = []
    for arg in params.names:
        entry: dict[str, Any] = {"name": arg, "required": arg in required}
        _put(entry, "description", properties[arg].get("description"))
        arguments.append(entry)
    listing: dict[str, Any] = {"name": prompt_name}
    _put(listing, "title", title)
    _put(listing, "description", description if description is not None else _doc(fn))
    if arguments:
        listing["arguments"] = arguments
    return Prompt(
        name=prompt_name,
        fn=fn,
        is_async=_is_async(fn),
        convert=_from_strings(params.convert, properties),
        context_param=_context_param(fn, owner),
        listing=listing,
        listed=_listed(listing, owner),
    )


def _listed(listing: dict[str, Any], owner: str) -> Any:
    """`listing` encoded once for the list answers (`_json.encoded_once`); a
    TypeError naming `owner` when it holds a value JSON cannot carry, at
    registration rather than in every list answer."""
    try:
        return encoded_once(listing)
    except TypeError as exc:  # (orjson.JSONEncodeError is a TypeError)
        raise TypeError(f"{owner}: its listing is not JSON: {exc}") from None


def _from_strings(
    convert: Callable[[Any], dict[str, Any]], properties: dict[str, JSONSchema]
) -> Callable[[Any], dict[str, Any]]:
    """`convert` for prompt arguments, which MCP sends as strings: the value of
    a parameter that takes no string (a list, a model, a number) is read as JSON
    first when it is JSON, as FastMCP does."""
    decoded = frozenset(name for name, prop in properties.items() if not _takes_strings(prop))
    if not decoded:
        return convert

    def convert_strings(arguments: Any) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            return convert(arguments)
        given = dict(arguments)
        for name in decoded & given.keys():
            if isinstance(given[name], str):
                try:
                    given[name] = loads(given[name])
                except ValueError:
                    pass  # validation says what is wrong with it
        return convert(given)

    return convert_strings


def _takes_strings(prop: JSONSchema) -> bool:
    kinds = [prop.get("type"), *(option.get("type") for option in prop.get("anyOf", ()))]
    return "string" in kinds or all(kind is None for kind in kinds)


def _template_parameters(fn: Callable[..., Any], uri: str) -> Callable[[Any], dict[str, Any]]:
    """`convert` for a resource template's variables; LocalProtocolError when the
    variables and `fn`'s parameters do not pair up."""
    owner = f"resource template {uri!r}"
    params = parameters(fn, owner=owner, skip=_is_context)
    variables = set(re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", uri))
    required = set(params.schema.get("required", ()))
    if variables - set(params.names) or required - variables:
        raise LocalProtocolError(
            f"{owner}: the function's parameters must be the template's variables "
            f"({', '.join(sorted(variables))}); it takes {', '.join(params.names) or 'none'}"
        )
    return params.convert


def _template_pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template)
    regex = "".join(
        re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts)
    )
    return re.compile(regex)


_UNSTRUCTURED: Final = (str, type(None), inspect.Signature.empty, Any, _content.Content)


def _result(fn: Callable[..., Any], owner: str) -> Result | None:
    """The output schema of `fn`'s return annotation, or None for text, content
    or no annotation."""
    ret = type_hints(fn, owner).get("return", inspect.Signature.empty)
    if ret in _UNSTRUCTURED:
        return None
    if get_origin(ret) is list and get_args(ret) == (_content.Content,):
        return None
    return result_type(ret, owner)


def tool_result(tool: Tool, value: Any) -> dict[str, Any]:
    """The CallToolResult for what a tool returned; ValueError when the tool has
    an output schema and the value does not fit it."""
    if isinstance(value, dict) and "content" in value and isinstance(value["content"], list):
        return value  # already a CallToolResult
    if tool.to_json is not None:
        # With an output schema every answer is structured and fits it (the
        # spec's MUST); a value that does not fit is the handler's error.
        data = tool.to_json(value)
        return {
            "content": [_content.text(dumps(data).decode())],
            "structuredContent": {"result": data} if tool.wrap_result else data,
        }
    if value is None:
        return {"content": []}
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}  # _content.text(value), inlined
    if _content.is_content(value):
        return {"content": [value]}
    if isinstance(value, list) and value and all(_content.is_content(v) for v in value):
        return {"content": value}
    return {"content": [_content.text(json_text(value))]}


def resource_contents(uri: str, mime_type: str | None, value: Any) -> list[dict[str, Any]]:
    """The ``contents`` of a ReadResourceResult for what a resource function returned."""
    if isinstance(value, str):
        entry: dict[str, Any] = {"uri": uri, "text": value}
    elif isinstance(value, bytes | bytearray):
        entry = {"uri": uri, "blob": _content._b64(bytes(value))}
    elif isinstance(value, list) and value and all(_is_resource_entry(v) for v in value):
        return value
    else:  # any other value (a list of titles, a model, a dict) as JSON, as FastMCP does
        entry = {"uri": uri, "text": json_text(value)}
        mime_type = mime_type or "application/json"
    if mime_type is not None:
        entry["mimeType"] = mime_type
    return [entry]


def _is_resource_entry(value: object) -> bool:
    return isinstance(value, dict) and "uri" in value and ("text" in value or "blob" in value)


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
