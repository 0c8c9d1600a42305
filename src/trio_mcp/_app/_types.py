"""Parameter and result types, through pydantic: the JSON Schemas clients see,
and the validators that turn JSON arguments into the annotated types.

Everything is worked out once, when a function is registered. `parameters`
gives a function's input schema and a pydantic-core validator that takes the
JSON arguments object and returns the keyword arguments for the call: model
instances, enum members, datetimes and so on, built from JSON (pydantic's lax
mode, as FastMCP validates: ``"42"`` is accepted for an ``int``). `result_type`
gives a return annotation's output schema and the function that checks a
returned value against it and turns it into JSON-ready data.

The schemas are pydantic's, made to read as FastMCP's do: no ``title``
keywords, ``$ref`` to non-recursive definitions inlined, descriptions from a
docstring's ``Args:`` section, and unknown arguments refused
(``additionalProperties: false``) unless the registration allows them.
"""

from __future__ import annotations

import inspect
import reprlib
import sys
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Union, get_args, get_origin

import pydantic
import pydantic_core
import typing_extensions
from pydantic.json_schema import PydanticJsonSchemaWarning

from .._errors import LocalProtocolError
from ._schema import JSONSchema, param_docs

#: How many of a ValidationError's problems a refusal lists.
_PROBLEMS_SHOWN: Final = 5


@dataclass(frozen=True, slots=True)
class Parameters:
    """What a registration needs of a function's parameters."""

    schema: JSONSchema
    names: tuple[str, ...]
    #: ``convert(arguments) -> kwargs``: a new dict of converted values (an
    #: absent parameter is absent: the call gives it its default); ValueError
    #: (pydantic's ValidationError) for arguments that do not fit, `describe`
    #: says why.
    convert: Callable[[Any], dict[str, Any]]


def parameters(
    fn: Callable[..., Any],
    *,
    owner: str,
    skip: Callable[[Any], bool],
    allow_unknown: bool = False,
) -> Parameters:
    """The `Parameters` of `fn`, leaving out those whose annotation satisfies
    `skip` (the injected Context).

    `owner` names the registration in errors ("tool 'add'"). With
    `allow_unknown`, arguments that are no parameter are dropped instead of
    refused. LocalProtocolError, naming the parameter, for a type with no
    JSON Schema.
    """
    hints = type_hints(fn, owner)
    kept: list[inspect.Parameter] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise LocalProtocolError(
                f"{owner}: *{param.name} and **{param.name} can't be inputs; "
                "name each parameter (or give input_schema=... and take **arguments)"
            )
        hint = hints.get(param.name, Any)
        if skip(hint):
            continue
        hint = _described(hint)
        # Keyword-only: MCP arguments come by name, whatever the signature says.
        kept.append(param.replace(kind=param.KEYWORD_ONLY, annotation=_compatible(hint)))
    # The schema is that of a function of these parameters, as FastMCP derives
    # it (defaults included); the arguments are validated as a TypedDict of
    # them, which returns the converted dict without calling anything back.
    signature = _adapter(_collector(kept), owner, kept)
    schema = clean_schema(_json_schema(signature, "validation"))
    extra = "ignore" if allow_unknown else "forbid"
    validator = _adapter(_arguments_type(kept, owner, extra), owner, kept).validator
    documented = param_docs(inspect.getdoc(fn) or "")
    for name, prop in schema.get("properties", {}).items():
        if "description" not in prop and name in documented:
            prop["description"] = documented[name]
    if allow_unknown:
        schema.pop("additionalProperties", None)
    else:
        schema["additionalProperties"] = False
    names = tuple(param.name for param in kept)
    return Parameters(schema, names, validator.validate_python)


def type_hints(fn: Callable[..., Any], owner: str) -> dict[str, Any]:
    """`fn`'s annotations, evaluated; LocalProtocolError naming `owner` for one
    that names something the function's module does not have."""
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except NameError as exc:
        raise LocalProtocolError(
            f"{owner}: an annotation names {exc.name!r}, which is not defined where the "
            "function is (with `from __future__ import annotations`, a type must be "
            "importable from the function's module, not local to another function)"
        ) from None


def _described(hint: Any) -> Any:
    """``Annotated[T, "text"]`` as ``Annotated[T, Field(description="text")]``:
    a plain string is a description to FastMCP's users, and unknown to pydantic."""
    if get_origin(hint) is not typing.Annotated:
        return hint
    texts = [extra for extra in hint.__metadata__ if isinstance(extra, str)]
    if not texts:
        return hint
    others = [extra for extra in hint.__metadata__ if not isinstance(extra, str)]
    parts = (get_args(hint)[0], *others, pydantic.Field(description=texts[-1]))
    return typing.Annotated[parts]


def _collector(params: list[inspect.Parameter]) -> Callable[..., dict[str, Any]]:
    """A function with these parameters (and nothing else of the handler's):
    pydantic's schema of it is the input schema."""

    def collect(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    collect.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    collect.__annotations__ = {param.name: param.annotation for param in params}
    return collect


def _arguments_type(params: list[inspect.Parameter], owner: str, extra: str) -> Any:
    """A TypedDict of the parameters (those without a default are required) whose
    pydantic config says what becomes of other keys (`extra`)."""
    fields = {
        param.name: (
            typing_extensions.Required[param.annotation]
            if param.default is param.empty
            else typing_extensions.NotRequired[param.annotation]
        )
        for param in params
    }
    arguments: Any = typing_extensions.TypedDict(f"{owner} arguments", fields)  # type: ignore[misc]
    config = pydantic.ConfigDict(extra=extra)  # type: ignore[typeddict-item]
    arguments.__pydantic_config__ = config  # type: ignore[attr-defined]
    return arguments


def _adapter(target: Any, owner: str, params: list[inspect.Parameter]) -> pydantic.TypeAdapter[Any]:
    try:
        return pydantic.TypeAdapter(target)
    except pydantic.PydanticUserError:
        pass
    # Find the parameter to blame, and say what to do about it.
    for param in params:
        try:
            pydantic.TypeAdapter(param.annotation)
        except pydantic.PydanticUserError as exc:
            raise LocalProtocolError(
                f"{owner}, parameter {param.name!r}: {_unsupported(param.annotation, exc)}"
            ) from None
    raise LocalProtocolError(f"{owner}: the parameters have no JSON Schema")  # pragma: no cover


def _unsupported(hint: Any, exc: pydantic.PydanticUserError) -> str:
    return (
        f"no JSON Schema for {_name(hint)}. Use a JSON type, a pydantic model, a "
        "dataclass, a TypedDict or another type pydantic supports, or give the "
        f"schema with input_schema=... (pydantic: {str(exc).splitlines()[0]})"
    )


def _name(hint: Any) -> str:
    return hint.__qualname__ if isinstance(hint, type) else repr(hint)


def _json_schema(adapter: pydantic.TypeAdapter[Any], mode: str) -> JSONSchema:
    # A default that is not JSON (an object, a sentinel) is left out of the
    # schema, as pydantic does; its warning would only repeat that.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
        schema: JSONSchema = adapter.json_schema(mode=mode)  # type: ignore[arg-type]
        return schema


@dataclass(frozen=True, slots=True)
class Result:
    """What a tool registration needs of its return annotation."""

    schema: JSONSchema
    #: True when the schema is ``{"result": <the type>}`` around a non-object type.
    wrapped: bool
    #: ``to_json(value)``: the value, checked against the type, as JSON-ready
    #: data; ValueError (pydantic's ValidationError) when it does not fit.
    to_json: Callable[[Any], Any]


def result_type(hint: Any, owner: str) -> Result:
    """The `Result` for a return annotation; LocalProtocolError if it has no schema."""
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(_compatible(hint))
    except pydantic.PydanticUserError as exc:
        raise LocalProtocolError(
            f"{owner}, return annotation: {_unsupported(hint, exc)}; or give output_schema=..."
        ) from None
    schema = clean_schema(_json_schema(adapter, "serialization"))
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith(_LOCAL_REF):
        # A recursive model at the root: its definition is the root, as FastMCP has it.
        schema = {**schema["$defs"][ref[len(_LOCAL_REF) :]], "$defs": schema["$defs"]}
    wrapped = schema.get("type") != "object"
    if wrapped:
        defs = schema.pop("$defs", None)
        # The marker tells FastMCP's client to unwrap; other clients ignore it.
        schema = {
            "type": "object",
            "properties": {"result": schema},
            "required": ["result"],
            "x-fastmcp-wrap-result": True,
        }
        if defs is not None:
            schema["$defs"] = defs
    validate = adapter.validator.validate_python
    dump = adapter.serializer.to_python

    def to_json(value: Any) -> Any:
        return dump(validate(value), mode="json", by_alias=True)

    return Result(schema, wrapped, to_json)


def json_text(value: Any) -> str:
    """Any value a handler may return (JSON types, models, dataclasses,
    datetimes, UUIDs...) as JSON text, for results with no declared type."""
    return pydantic_core.to_json(value, by_alias=True).decode()


def describe(error: ValueError, kind: str = "argument") -> str:
    """What is wrong with the arguments, in words a client (and the model behind
    it) can act on: each problem's path, what was expected and what came."""
    if not isinstance(error, pydantic_core.ValidationError):
        return str(error)
    problems = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"])
        kind_of = problem["type"]
        if kind_of in ("unexpected_keyword_argument", "extra_forbidden"):
            problems.append(f"unexpected {kind} {where!r}")
        elif kind_of in ("missing_argument", "missing_keyword_only_argument", "missing"):
            problems.append(f"missing required {kind} {where!r}")
        else:
            got = _shown(problem.get("input"))
            problems.append(f"{where}: {problem['msg']} (got {got})" if where else problem["msg"])
    shown = problems[:_PROBLEMS_SHOWN]
    if len(problems) > _PROBLEMS_SHOWN:
        shown.append(f"and {len(problems) - _PROBLEMS_SHOWN} more")
    return "; ".join(shown)


def _shown(value: Any) -> str:
    # A bounded repr: the input may be big or nested as deep as the parser allows.
    text = _SHORT.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_SHORT: Final = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict = 3, 4, 4
_SHORT.maxstring, _SHORT.maxother = 40, 40


# ---- schemas as FastMCP users see them --------------------------------------

#: Keywords whose value maps names to schemas, holds a list of schemas, or is one.
_SCHEMA_MAPS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_SCHEMA_LISTS: Final = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_SCHEMA_ONE: Final = frozenset(
    {
        "items",
        "additionalProperties",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)
_LOCAL_REF: Final = "#/$defs/"


def clean_schema(schema: JSONSchema) -> JSONSchema:
    """`schema` without ``title`` keywords and with every ``$ref`` to a
    definition inlined, except those of recursive types (they stay in
    ``$defs``). Walks schema keywords only, so a property named "title" stays."""
    defs: dict[str, Any] = schema.get("$defs", {})
    recursive = {name for name in defs if name in _reachable(defs[name], defs)}
    kept: set[str] = set()
    out: JSONSchema = _clean(schema, defs, recursive, kept)
    out.pop("$defs", None)
    if kept:
        out["$defs"] = {name: _clean(defs[name], defs, recursive, kept) for name in sorted(kept)}
    return out


def _refs(node: Any) -> typing.Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_LOCAL_REF):
            yield ref[len(_LOCAL_REF) :]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _reachable(node: Any, defs: Mapping[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = list(_refs(node))
    while todo:
        name = todo.pop()
        if name not in seen and name in defs:
            seen.add(name)
            todo.extend(_refs(defs[name]))
    return seen


def _clean(node: Any, defs: Mapping[str, Any], recursive: set[str], kept: set[str]) -> Any:
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_LOCAL_REF):
        name = ref[len(_LOCAL_REF) :]
        if name in recursive:
            kept.add(name)
            kept.update(_reachable(defs[name], defs) & recursive)
        elif name in defs:
            # The definition, with the referring node's own keywords (a
            # field's description) over it.
            inlined = dict(_clean(defs[name], defs, recursive, kept))
            for key, value in node.items():
                if key != "$ref":
                    inlined[key] = _clean_value(key, value, defs, recursive, kept)
            inlined.pop("title", None)
            return inlined
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        out[key] = _clean_value(key, value, defs, recursive, kept)
    return out


def _clean_value(
    key: str, value: Any, defs: Mapping[str, Any], recursive: set[str], kept: set[str]
) -> Any:
    if key in _SCHEMA_MAPS and isinstance(value, dict):
        return {name: _clean(sub, defs, recursive, kept) for name, sub in value.items()}
    if key in _SCHEMA_LISTS and isinstance(value, list):
        return [_clean(sub, defs, recursive, kept) for sub in value]
    if key in _SCHEMA_ONE and isinstance(value, dict):
        return _clean(value, defs, recursive, kept)
    return value


# ---- typing.TypedDict before Python 3.12 ------------------------------------


def _compatible(hint: Any) -> Any:
    """`hint` with each `typing.TypedDict` made a `typing_extensions.TypedDict`:
    pydantic reads only the latter before Python 3.12, and users write the former."""
    if sys.version_info >= (3, 12):
        return hint
    return _rewrite(hint, {})


def _rewrite(hint: Any, done: dict[Any, Any]) -> Any:
    if isinstance(hint, type) and typing.is_typeddict(hint) and type(hint).__module__ == "typing":
        if hint not in done:
            done[hint] = _typed_dict(hint, done)
        return done[hint]
    args = get_args(hint)
    origin = get_origin(hint)
    if not args or origin is Literal:
        return hint
    new_args = tuple(_rewrite(arg, done) for arg in args)
    if all(new is old for new, old in zip(new_args, args, strict=True)):
        return hint
    if origin is typing.Annotated:
        parts = (new_args[0], *hint.__metadata__)
        return typing.Annotated[parts]
    if origin is Union or origin is types.UnionType:
        return Union[new_args]  # noqa: UP007 - a union built from a tuple of arguments
    return origin[new_args]


def _typed_dict(cls: Any, done: dict[Any, Any]) -> Any:
    required: frozenset[str] = cls.__required_keys__
    fields = {}
    for key, value in typing.get_type_hints(cls, include_extras=True).items():
        value = _rewrite(value, done)
        if get_origin(value) not in (typing_extensions.Required, typing_extensions.NotRequired):
            marker = (
                typing_extensions.Required if key in required else typing_extensions.NotRequired
            )
            value = marker[value]
        fields[key] = value
    rebuilt = typing_extensions.TypedDict(cls.__name__, fields)  # type: ignore[misc]
    rebuilt.__doc__ = cls.__doc__
    rebuilt.__module__ = cls.__module__
    return rebuilt
