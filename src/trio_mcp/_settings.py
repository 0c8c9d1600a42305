"""Where ``trio-mcp run`` takes its configuration from: command-line flags,
``TRIO_MCP_*`` environment variables and a TOML file, in that precedence (a
flag over the environment over the file over the default).

Every field of `RunConfig` and of the dataclasses nested in it (`MCPConfig`,
`ServerConfig`) is a setting under its field's name, found here by walking the
dataclasses, so a new field needs no code of its own: ``max_sessions`` is the
flag ``--max-sessions``, the variable ``TRIO_MCP_MAX_SESSIONS`` and the file
key ``max_sessions``, and its help is its line in its class's docstring. The
dataclasses validate; this module only turns text and TOML values into field
values and says where each came from, so that an error names the setting and
its source in one line.

A secret (a field with ``metadata={"secret": True}``) has no flag, since any
user can read a process's flags in ``ps``: it comes from the environment, the
file, or a file of its own named by ``--NAME-file`` (``TRIO_MCP_NAME_FILE``,
``NAME_file``), and is redacted when the configuration is printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import inspect
import re
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from . import _config
from ._config import RunConfig
from ._errors import SettingError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover (3.10)
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

#: The environment variables of trio-mcp that are not settings; any other
#: ``TRIO_MCP_*`` variable close to a setting's is reported as a likely typo.
OTHER_VARIABLES: Final = frozenset(
    {"TRIO_MCP_CONFIG", "TRIO_MCP_NO_EXTENSIONS", "TRIO_MCP_REQUIRE_EXTENSIONS"}
)
#: Flags kept for their familiar names: uvicorn's, and earlier ones of ours.
ALIASES: Final[Mapping[str, tuple[str, ...]]] = {
    "idle_timeout_s": ("--timeout-keep-alive",),
    "shutdown_timeout_s": ("--timeout-graceful-shutdown",),
    "json_response_only": ("--json-response",),
    "gc_full_interval_s": ("--gc-full-interval",),
}
#: Flags whose value may be left out, and the value they then give.
OPTIONAL_VALUE: Final[Mapping[str, tuple[str, str]]] = {"metrics_path": ("--metrics", "/metrics")}
REDACTED: Final = "<redacted>"
DEFAULT: Final = "default"

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})
#: What each kind of value looks like, for errors and help.
_EXPECTED: Final = {
    "bool": "true or false",
    "int": "a whole number",
    "float": "a number",
    "str": "a string",
    "strings": "a comma-separated list (in TOML, an array of strings)",
    "hints": "METHOD=TTL_MS:SCOPE,... (in TOML, a table of [ttl_ms, scope])",
}


@dataclass(frozen=True, slots=True)
class Setting:
    """One configuration field, under every name it goes by."""

    name: str
    #: Attribute names from a `RunConfig` down to the field.
    path: tuple[str, ...]
    #: bool, int, float, str, strings (a tuple of str) or hints (cache hints).
    kind: str
    #: Whether None is a value (written ``none`` in text and TOML).
    optional: bool
    default: object
    help: str
    secret: bool

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def variable(self) -> str:
        return "TRIO_MCP_" + self.name.upper()


def _kind(hint: object) -> tuple[str, bool]:
    """A field type's kind, and whether it is optional."""
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        optional = len(members) < len(typing.get_args(hint))
        if len(members) == 1:
            hint = members[0]
    if hint in (bool, int, float, str):
        return typing.cast(type, hint).__name__, optional
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and args == (str, ...):
        return "strings", optional
    if origin is Mapping and args == (str, tuple[int, str]):
        return "hints", optional
    raise TypeError(f"a setting of type {hint!r} has no text form (see _settings._kind)")


def _attribute_docs(cls: type) -> dict[str, str]:
    """The ``Attributes:`` section of a class docstring, by name."""
    _, _, section = inspect.cleandoc(cls.__doc__ or "").partition("\nAttributes:\n")
    docs: dict[str, list[str]] = {}
    names: list[str] = []
    for line in section.splitlines():
        head = re.match(r"    (\w+(?:, \w+)*): (.*)", line)
        if head:
            names = head.group(1).split(", ")
            for name in names:
                docs[name] = [head.group(2)]
        elif line.startswith("        ") and names:
            for name in names:
                docs[name].append(line.strip())
        elif line.strip():
            break  # the section ended
    # (help is plain text: the docstrings' ``literal`` and `name` marks go)
    return {name: re.sub(r"``?([^`]*)``?", r"\1", " ".join(words)) for name, words in docs.items()}


def _hints(cls: type) -> dict[str, Any]:
    # (the public classes say they are trio_mcp's, where their annotations'
    # names are not: resolve them where they were written)
    return typing.get_type_hints(cls, globalns=vars(_config))


def _walk(cls: type, path: tuple[str, ...] = ()) -> Iterator[Setting]:
    hints = _hints(cls)
    docs = _attribute_docs(cls)
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            yield from _walk(hint, (*path, field.name))
            continue
        kind, optional = _kind(hint)
        factory = field.default_factory
        default = factory() if callable(factory) else field.default
        yield Setting(
            field.name,
            (*path, field.name),
            kind,
            optional,
            default,
            docs.get(field.name, ""),
            bool(field.metadata.get("secret")),
        )


#: Every setting, in the order of the dataclasses' fields.
SETTINGS: Final = tuple(_walk(RunConfig))
BY_NAME: Final = {setting.name: setting for setting in SETTINGS}


def from_text(setting: Setting, text: str) -> object:
    """`text` (a flag's or a variable's value) as `setting`'s value."""
    words = text.strip()
    if setting.optional and words.lower() in ("none", ""):
        return None
    kind = setting.kind
    if kind == "bool":
        if words.lower() in _TRUE:
            return True
        if words.lower() in _FALSE:
            return False
        raise ValueError(f"expected true or false (1/0, yes/no, on/off), got {text!r}")
    try:
        if kind == "int":
            return int(words)
        if kind == "float":
            return float(words)
    except ValueError:
        raise ValueError(f"expected {_EXPECTED[kind]}, got {text!r}") from None
    if kind == "strings":
        return tuple(item.strip() for item in words.split(",") if item.strip())
    if kind == "hints":
        return _hints_from_text(text)
    return text


def _hints_from_text(text: str) -> dict[str, tuple[int, str]]:
    hints: dict[str, tuple[int, str]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        method, _, hint = item.partition("=")
        ttl, _, scope = hint.partition(":")
        try:
            hints[method.strip()] = (int(ttl), scope.strip())
        except ValueError:
            raise ValueError(f"expected {_EXPECTED['hints']}, got {item!r}") from None
    return hints


def from_toml(setting: Setting, value: object) -> object:
    """A TOML value as `setting`'s value."""
    kind = setting.kind
    if setting.optional and value == "none":
        return None
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind in ("int", "float") and isinstance(value, int) and not isinstance(value, bool):
        return value if kind == "int" else float(value)
    if kind == "float" and isinstance(value, float):
        return value
    if kind == "str" and isinstance(value, str):
        return value
    if kind == "strings":
        if isinstance(value, str):
            return from_text(setting, value)
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return tuple(value)
    if kind == "hints" and isinstance(value, dict):
        hints: dict[str, tuple[int, str]] = {}
        for method, hint in value.items():
            if not (
                isinstance(hint, list)
                and len(hint) == 2
                and isinstance(hint[0], int)
                and isinstance(hint[1], str)
            ):
                raise ValueError(f"{method}: expected [ttl_ms, scope], got {hint!r}")
            hints[method] = (hint[0], hint[1])
        return hints
    raise ValueError(f"expected {_EXPECTED[kind]}, got {type(value).__name__} {value!r}")


def _secret_from_file(setting: Setting, path: str) -> object:
    """A secret read from its own file: one value a line for a list."""
    try:
        with open(path, encoding="utf-8") as file:
            content = file.read()
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    if setting.kind == "strings":
        return tuple(line.strip() for line in content.splitlines() if line.strip())
    # (a password may hold spaces: only the file's last line end goes)
    return from_text(setting, content.removesuffix("\n").removesuffix("\r"))


# ---- the command line --------------------------------------------------------

_GROUPS: Final = {
    (): "the command",
    ("mcp",): "the MCP endpoint (MCPConfig)",
    ("mcp", "http"): "the HTTP server (ServerConfig)",
}


def add_flags(parser: argparse.ArgumentParser) -> None:
    """A flag for every setting (a ``--NAME-file`` one for a secret), each with
    no default, so that what was not given is told from what was. `parser`
    must not take abbreviations (``allow_abbrev=False``): a secret's name would
    pass for its file's flag."""
    assert not parser.allow_abbrev, "a secret's --NAME would pass for --NAME-file"
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="a TOML file of settings (top-level keys named as the settings); also TRIO_MCP_CONFIG",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective configuration, each value with its source "
        "(secrets redacted), as TOML, and exit",
    )
    groups = {path: parser.add_argument_group(title) for path, title in _GROUPS.items()}
    for setting in SETTINGS:
        group = groups[setting.path[:-1]]
        text = setting.help.replace("%", "%%")
        names = (setting.flag, *ALIASES.get(setting.name, ()))
        if setting.name in OPTIONAL_VALUE:
            flag, const = OPTIONAL_VALUE[setting.name]
            group.add_argument(
                flag,
                dest=setting.name,
                nargs="?",
                const=const,
                metavar="PATH",
                default=argparse.SUPPRESS,
                help=f"the same as {setting.flag}, {const} when no PATH is given",
            )
        if setting.secret:
            group.add_argument(
                f"{setting.flag}-file",
                dest=f"{setting.name}_file",
                metavar="PATH",
                default=argparse.SUPPRESS,
                help=f"a file holding {setting.name} (one value a line); never a flag "
                f"value, which ps shows. {text}",
            )
        elif setting.kind == "bool":
            group.add_argument(
                *names,
                dest=setting.name,
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=f"{text} (default: {_text(setting.default)})",
            )
        else:
            group.add_argument(
                *names,
                dest=setting.name,
                metavar=_metavar(setting),
                default=argparse.SUPPRESS,
                help=f"{text} (default: {_text(setting.default)})",
            )


def _metavar(setting: Setting) -> str:
    if setting.name.endswith("_s"):
        return "SECONDS"
    if setting.name.endswith("_ms"):
        return "MS"
    if setting.name.endswith("_bytes"):
        return "BYTES"
    return {"int": "N", "float": "X", "strings": "A,B", "hints": "M=TTL:SCOPE"}.get(
        setting.kind, setting.name.rpartition("_")[2].upper()
    )


def _text(value: object) -> str:
    """A value as one would write it in a flag."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value) if value else "(none)"
    if isinstance(value, Mapping):
        return ",".join(f"{m}={ttl}:{scope}" for m, (ttl, scope) in value.items()) or "(none)"
    return str(value)


# ---- resolution ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resolved:
    """The effective configuration, where each value came from, and what to
    warn about (unknown variables that look like a setting's)."""

    config: RunConfig
    sources: Mapping[str, str]
    warnings: tuple[str, ...] = ()


def resolve(given: Mapping[str, object], environ: Mapping[str, str]) -> Resolved:
    """The configuration from flags (`given`: the parsed namespace's items),
    the environment and the TOML file named by ``--config`` or TRIO_MCP_CONFIG.

    Raises SettingError (one line, naming the setting and its source)."""
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    path = given.get("config") or environ.get("TRIO_MCP_CONFIG")
    if path:
        source = str(path) if given.get("config") else f"{path} (TRIO_MCP_CONFIG)"
        _take(values, sources, _read_file(str(path)), source, from_toml)
    _take(values, sources, _environment(environ), "", from_text)
    for setting in SETTINGS:
        if setting.name in given:
            value = given[setting.name]
            flag = setting.flag
            try:
                values[setting.name] = (
                    value if isinstance(value, bool) else from_text(setting, str(value))
                )
            except ValueError as exc:
                raise SettingError(f"{flag} {value}: {setting.name}: {exc}") from None
            sources[setting.name] = flag
        if setting.secret and f"{setting.name}_file" in given:
            file = str(given[f"{setting.name}_file"])
            try:
                values[setting.name] = _secret_from_file(setting, file)
            except ValueError as exc:
                raise SettingError(f"{setting.flag}-file: {exc}") from None
            sources[setting.name] = f"{setting.flag}-file {file}"
    try:
        config = _build(RunConfig, (), values)
    except ValueError as exc:
        raise SettingError(_blame(str(exc), sources)) from None
    return Resolved(config, sources, _typos(environ))


def _take(
    values: dict[str, object],
    sources: dict[str, str],
    raw: Mapping[str, tuple[object, str]],
    source: str,
    convert: Any,
) -> None:
    """Convert and record `raw` (name -> (value, where)); later sources win."""
    for key, (value, where) in raw.items():
        origin = where or source
        name = key.removesuffix("_file") if key not in BY_NAME else key
        setting = BY_NAME.get(name)
        if setting is None:
            close = difflib.get_close_matches(key, BY_NAME, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise SettingError(f"{origin}: unknown setting {key!r}{hint}")
        try:
            if key != name and setting.secret:
                values[name] = _secret_from_file(setting, str(value))
            elif key != name:
                raise ValueError(f"only secrets have a {key!r} (a file of their own)")
            else:
                values[name] = convert(setting, value)
        except ValueError as exc:
            raise SettingError(f"{origin}: {name}: {exc}") from None
        sources[name] = origin


def _read_file(path: str) -> dict[str, tuple[object, str]]:
    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except OSError as exc:
        raise SettingError(f"cannot read the configuration file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingError(f"{path}: not valid TOML: {exc}") from None
    return {key: (value, "") for key, value in document.items()}


def _environment(environ: Mapping[str, str]) -> dict[str, tuple[object, str]]:
    found: dict[str, tuple[object, str]] = {}
    for setting in SETTINGS:
        if setting.variable in environ:
            found[setting.name] = (environ[setting.variable], setting.variable)
        if setting.secret and f"{setting.variable}_FILE" in environ:
            variable = f"{setting.variable}_FILE"
            found[f"{setting.name}_file"] = (environ[variable], variable)
    return found


def _typos(environ: Mapping[str, str]) -> tuple[str, ...]:
    known = {setting.variable for setting in SETTINGS}
    known |= {f"{setting.variable}_FILE" for setting in SETTINGS if setting.secret}
    warnings = []
    for variable in sorted(environ):
        if variable.startswith("TRIO_MCP_") and variable not in known | OTHER_VARIABLES:
            close = difflib.get_close_matches(variable, known, n=1, cutoff=0.85)
            if close:
                warnings.append(f"{variable} is not a setting; did you mean {close[0]}?")
    return tuple(warnings)


def _build(cls: type, path: tuple[str, ...], values: Mapping[str, object]) -> Any:
    kwargs: dict[str, object] = {}
    hints = _hints(cls)
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            kwargs[field.name] = _build(hint, (*path, field.name), values)
        elif field.name in values:
            kwargs[field.name] = values[field.name]
    return cls(**kwargs)


def _blame(message: str, sources: Mapping[str, str]) -> str:
    """A validation error, with the source of each setting it names."""
    named = [name for name in BY_NAME if re.search(rf"\b{re.escape(name)}\b", message)]
    if len(named) == 1:
        return f"{sources.get(named[0], DEFAULT)}: {message}"
    given = [f"{name} from {sources[name]}" for name in named if name in sources]
    return f"{message} ({'; '.join(given)})" if given else message


# ---- printing -----------------------------------------------------------------


def render(resolved: Resolved) -> str:
    """The configuration as a TOML file that would give it, each line saying
    where its value came from; secrets redacted."""
    lines = ["# trio-mcp: the effective configuration (flag > environment > file > default)"]
    for setting in SETTINGS:
        value = _get(resolved.config, setting.path)
        source = resolved.sources.get(setting.name, DEFAULT)
        shown = f'"{REDACTED}"' if setting.secret and value else _toml(value)
        lines.append(f"{setting.name} = {shown}  # {source}")
    return "\n".join(lines) + "\n"


def _get(config: object, path: tuple[str, ...]) -> object:
    for name in path:
        config = getattr(config, name)
    return config


def _toml(value: object) -> str:
    if value is None:
        return '"none"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml_string(item) for item in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{_toml_string(m)} = [{ttl}, {_toml_string(s)}]" for m, (ttl, s) in value.items())
        return "{" + ", ".join(items) + "}"
    return repr(value)


def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in escaped) + '"'


# ---- handing a configuration to another process --------------------------------


def config_values(config: RunConfig) -> dict[str, object]:
    """`config` as JSON values by setting name, secrets included: what a
    ``--workers`` supervisor hands each worker (over a pipe, never argv)."""
    values: dict[str, object] = {}
    for setting in SETTINGS:
        value = _get(config, setting.path)
        if isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = {method: list(hint) for method, hint in value.items()}
        values[setting.name] = value
    return values


def config_from_values(values: Mapping[str, object]) -> RunConfig:
    """The configuration `config_values` gave (ValueError if it is not one)."""
    converted: dict[str, object] = {}
    for name, value in values.items():
        setting = BY_NAME[name]
        converted[name] = None if value is None else from_toml(setting, value)
    built: RunConfig = _build(RunConfig, (), converted)
    return built
