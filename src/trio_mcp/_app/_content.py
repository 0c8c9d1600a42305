"""Content helpers: the blocks tools and prompts return, as plain JSON-ready dicts.

Each helper builds exactly the wire form of MCP's content types, so a handler
can return them (or a list of them) and nothing is converted per request.
"""

from __future__ import annotations

import base64
from typing import Any


class Content(dict[str, Any]):
    """A content block (a dict in its wire form). As a tool's return annotation,
    ``Content`` or ``list[Content]`` means "no structured output"."""

    __slots__ = ()


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


def text(value: str, *, annotations: dict[str, Any] | None = None) -> Content:
    """A text block."""
    block = Content(type="text", text=value)
    if annotations:
        block["annotations"] = annotations
    return block


def image(data: bytes | str, mime_type: str) -> Content:
    """An image block; `data` is raw bytes or already base64 text."""
    return Content(type="image", data=_b64(data), mimeType=mime_type)


def audio(data: bytes | str, mime_type: str) -> Content:
    """An audio block; `data` is raw bytes or already base64 text."""
    return Content(type="audio", data=_b64(data), mimeType=mime_type)


def embedded_text(uri: str, value: str, mime_type: str = "text/plain") -> Content:
    """An embedded resource holding text."""
    return Content(type="resource", resource={"uri": uri, "mimeType": mime_type, "text": value})


def embedded_blob(uri: str, data: bytes | str, mime_type: str) -> Content:
    """An embedded resource holding binary data (base64 on the wire)."""
    return Content(
        type="resource", resource={"uri": uri, "mimeType": mime_type, "blob": _b64(data)}
    )


def resource_link(
    uri: str,
    name: str,
    *,
    description: str | None = None,
    mime_type: str | None = None,
) -> Content:
    """A link to a resource the client may read later."""
    block = Content(type="resource_link", uri=uri, name=name)
    if description is not None:
        block["description"] = description
    if mime_type is not None:
        block["mimeType"] = mime_type
    return block


CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})


def is_content(value: object) -> bool:
    return isinstance(value, dict) and value.get("type") in CONTENT_TYPES
