"""The 2026-07-28 revision's request envelope and header rules (sans-IO).

A modern request stands alone: ``params._meta`` carries the protocol version
and the client's capabilities, and the headers ``MCP-Protocol-Version``,
``Mcp-Method`` and (for the three name-bearing methods) ``Mcp-Name`` mirror
the body. `check_envelope` applies the digest's validation ladder (3.7) in
order and says, with the HTTP status, what is wrong with the first thing that
is: missing ``_meta`` (400/-32602), a header that is absent, mismatched or
badly encoded (400/-32020), an unsupported version (400/-32022), an unknown
log level (400/-32602). On stdio there are no headers, and the rest applies.
"""

from __future__ import annotations

from typing import Any, Final

from .._errors import HeaderValueError, MCPError, Rejection
from .._speedups import decode_header_value
from ._jsonrpc import HEADER_MISMATCH, INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION
from ._logging import LOG_LEVELS
from ._revisions import LEGACY_VERSIONS

MODERN_VERSIONS: Final = ("2026-07-28",)
#: Every version this server speaks, newest first (``supportedVersions``).
ALL_VERSIONS: Final = MODERN_VERSIONS + tuple(reversed(LEGACY_VERSIONS))
#: The legacy revisions as MCP-Protocol-Version header values: read per request
#: without decoding the header.
_LEGACY_HEADER_VALUES: Final = frozenset(v.encode("ascii") for v in LEGACY_VERSIONS)

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

#: Methods whose ``Mcp-Name`` header mirrors ``params.name``; resources/read uses ``uri``.
_NAME_PARAM: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class Envelope:
    """What a modern request says about itself (read-only by convention: a
    plain class, since one is made per request and a frozen dataclass's
    ``__init__`` costs ten times as much)."""

    __slots__ = ("version", "client_capabilities", "client_info", "log_level")

    def __init__(
        self,
        version: str,
        client_capabilities: dict[str, Any],
        client_info: dict[str, Any] | None,
        log_level: str | None,
    ) -> None:
        self.version = version
        self.client_capabilities = client_capabilities
        self.client_info = client_info
        self.log_level = log_level

    def __repr__(self) -> str:
        return f"<Envelope {self.version} log_level={self.log_level!r}>"


def is_modern(header_version: bytes | None, params: object) -> bool:
    """Whether a POST belongs to the 2026-07-28 pipeline (digest 3.12).

    A modern or unknown ``MCP-Protocol-Version`` decides; without the header a
    body carrying the modern ``_meta`` version does (the request then fails
    for the missing header, with a modern error a dual-era client understands).
    """
    if header_version is not None:
        return header_version not in _LEGACY_HEADER_VALUES
    meta = dict.get(params, "_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and META_VERSION in meta


def _mismatch(message: str) -> Rejection:
    return Rejection(400, MCPError(HEADER_MISMATCH, message))


def check_envelope(
    method: str, params: dict[str, Any], singles: dict[bytes, bytes] | None
) -> Envelope:
    """Validate a modern request's ``_meta`` and standard headers, in the digest's order;
    `singles` None: a transport without headers (stdio), only ``_meta`` is checked."""
    meta = dict.get(params, "_meta")
    version = dict.get(meta, META_VERSION) if isinstance(meta, dict) else None
    capabilities = dict.get(meta, META_CAPABILITIES) if isinstance(meta, dict) else None
    if (
        not isinstance(meta, dict)
        or not isinstance(version, str)
        or not isinstance(capabilities, dict)
    ):
        raise Rejection(
            400,
            MCPError(
                INVALID_PARAMS,
                f"Invalid params: _meta must carry {META_VERSION} and {META_CAPABILITIES}",
            ),
        )
    if singles is not None:  # (stdio has no headers: the body alone speaks)
        header = dict.get(singles, b"mcp-protocol-version")
        if header is None:
            raise _mismatch("MCP-Protocol-Version header is required")
        if header.decode("latin-1") != version:
            raise _mismatch(
                f"MCP-Protocol-Version header {header.decode('latin-1')!r} does not match "
                f"_meta version {version!r}"
            )
        method_header = dict.get(singles, b"mcp-method")
        if method_header is None:
            raise _mismatch("Mcp-Method header is required")
        if method_header.decode("latin-1") != method:
            raise _mismatch(
                f"Mcp-Method header {method_header.decode('latin-1')!r} does not match "
                f"body method {method!r}"
            )
        name_param = dict.get(_NAME_PARAM, method)
        if name_param is not None:
            expected = dict.get(params, name_param)
            raw = dict.get(singles, b"mcp-name")
            if isinstance(expected, str):
                if raw is None:
                    raise _mismatch("Mcp-Name header is required")
                try:
                    name = decode_header_value(raw)
                except HeaderValueError as exc:
                    raise _mismatch(f"Mcp-Name header: {exc}") from None
                if name != expected:
                    raise _mismatch(f"Mcp-Name header does not match params.{name_param}")
    if version not in MODERN_VERSIONS:
        raise Rejection(
            400,
            MCPError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": list(ALL_VERSIONS), "requested": version},
            ),
        )
    info = dict.get(meta, META_CLIENT_INFO)
    level = dict.get(meta, META_LOG_LEVEL)
    if not isinstance(level, str):
        level = None
    elif level not in LOG_LEVELS:
        raise Rejection(
            400, MCPError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
        )
    return Envelope(version, capabilities, info if isinstance(info, dict) else None, level)
