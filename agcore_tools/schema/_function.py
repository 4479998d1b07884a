"""From a type-hinted function to its tool schema and argument validator.

Only pydantic's public API is used: ``create_model``, ``Field``, ``ConfigDict`` and
``model_json_schema``.
"""

from __future__ import annotations

import functools
import inspect
import logging
import math
import re
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, is_dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema
from typing_extensions import is_typeddict

from .._context import ToolContext
from ..error import ToolConfigError, ToolDefinitionError
from ._argplan import ArgumentPlan, build_plan
from ._docstring import parse_docstring
from ._facing import ModelFacingSchema, hidden_fields
from ._jsonschema import close_open_objects
from ._model_class import by_name, model_fields_of

logger = logging.getLogger("agcore_tools.code_mode")  # as _returns: the return type is code mode's


def _is_context_annotation(annotation: Any) -> bool:
    if annotation is ToolContext:
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return _is_context_annotation(get_args(annotation)[0])
    if origin is Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        return len(members) == 1 and members[0] is ToolContext
    return False


def _annotated_description(annotation: Any) -> str | None:
    if get_origin(annotation) is not Annotated:
        return None
    from pydantic.fields import FieldInfo  # on first use: see function_schema

    for meta in get_args(annotation)[1:]:
        if isinstance(meta, FieldInfo) and meta.description:
            return meta.description
    return None


_DATA_KEYWORDS = frozenset({"default", "examples", "example", "enum", "const"})
"""Keywords whose value is data, where a "title" key is the data's own."""


_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
"""Keywords whose value maps names (which may be "title") to schemas."""


def _strip_titles(schema: Any, *, in_properties: bool = False) -> Any:
    # "title" is noise for a model, but it can also be a property's name or a key of a
    # default or an example: only drop it where it is a schema keyword.
    if isinstance(schema, dict):
        if in_properties:  # names to schemas: a property named "properties" is one
            return {key: _strip_titles(value) for key, value in schema.items()}
        return {
            key: value
            if key in _DATA_KEYWORDS
            else _strip_titles(value, in_properties=key in _NAME_MAPS)
            for key, value in schema.items()
            if key != "title"
        }
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    return schema


class _ToolArguments(ModelFacingSchema):
    """pydantic's schema of a tool's arguments, saying what validation takes where
    pydantic's own says more: the model reads only the schema. No hidden default
    (see :class:`ModelFacingSchema`)."""

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        # dict[int, ...]: JSON keys are strings, and only integer-like ones validate.
        json_schema = super().dict_schema(schema)
        keys = schema.get("keys_schema")
        if keys is not None and keys["type"] == "int" and "propertyNames" not in json_schema:
            json_schema["propertyNames"] = {"pattern": "^-?[0-9]+$"}
        return json_schema

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        # A default of inf or NaN is no JSON: every request offering the tool would fail
        # to encode. Left out, as pydantic leaves out a default it cannot serialize.
        json_schema = super().default_schema(schema)
        if "default" in json_schema and not _json_finite(json_schema["default"]):
            del json_schema["default"]
        return json_schema

    def is_subclass_schema(self, schema: core_schema.IsSubclassSchema) -> JsonSchemaValue:
        # type[X]: pydantic writes {} (any value), yet no JSON value is a class. Refused
        # as a type pydantic cannot describe (see _unsupported_type).
        return self.handle_invalid_for_json_schema(
            schema, f"core_schema.IsSubclassSchema ({schema['cls']})"
        )


def _json_finite(value: Any) -> bool:
    """Whether ``value`` holds no infinite or NaN number, which JSON cannot write (not
    ``json.dumps(allow_nan=False)``: ``import agcore_tools`` does not load json).

    Example:
        >>> _json_finite({"a": [1.5, "x"]}), _json_finite([float("inf")])
        (True, False)
    """
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_json_finite(item) for item in value.values())
    if isinstance(value, list):
        return all(_json_finite(item) for item in value)
    return True


@dataclass(frozen=True)
class FunctionSchema:
    """Everything needed to expose a function as a tool."""

    name: str
    """The tool name (the function's ``__name__`` unless overridden)."""
    description: str
    """The docstring's description."""
    parameters: dict[str, Any]
    """The JSON Schema of the arguments object."""
    model: type[BaseModel]
    """The pydantic model that validates the arguments."""
    context_param: str | None
    """The parameter that receives the :class:`ToolContext`, if any."""
    positional_only: tuple[str, ...]
    """Parameters that must be passed by position, in order."""
    renamed: tuple[tuple[str, str], ...]
    """``(model field, parameter)`` pairs for parameters whose names pydantic reserves."""
    plan: ArgumentPlan | None = None
    """What to do with arguments before validation (nulls, unknown keys of nested models)."""
    method: bool = False
    """Whether the first parameter is a method's ``self``/``cls``, left out of the schema."""
    returns: Any = None
    """The resolved return annotation (None when there is none)."""


@dataclass(frozen=True)
class _Callable:
    """Where a callable keeps what a schema is built from."""

    name: str | None
    """Its own name (None for a lambda)."""
    annotated: Any
    """The function whose annotations describe the parameters."""
    documented: Any
    """The object whose docstring describes the tool."""
    bound: frozenset[str]
    """Parameters a ``functools.partial`` already fixed by keyword."""


def _snake_case(name: str) -> str:
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()


def _unwrap(func: Callable[..., Any]) -> _Callable:
    bound: set[str] = set()
    inner: Any = func
    while isinstance(inner, functools.partial):
        bound.update(inner.keywords)
        inner = inner.func
    if inspect.isroutine(inner) or inspect.isclass(inner):
        return _Callable(getattr(inner, "__name__", None), inner, inner, frozenset(bound))
    # A callable object: its __call__ holds the annotations and the better docstring.
    call = type(inner).__call__
    documented = call if inspect.isfunction(call) and call.__doc__ else type(inner)
    return _Callable(_snake_case(type(inner).__name__), call, documented, frozenset(bound))


def _docstring(documented: Any) -> str | None:
    """The docstring describing a tool: its function's, or its class's own.

    Not ``inspect.getdoc``'s, which inherits: a class without one would be described
    by its base's (pydantic's ``BaseModel`` docstring), and a ``__call__`` without one
    as "Call self as a function." (``object``'s); either would also hide the missing
    docstring's warning. A method without one may still read the one it overrides in
    a base class of the app's.
    """
    if inspect.isclass(documented):
        doc = vars(documented).get("__doc__")
        if isinstance(doc, str) and _generated(documented, doc):
            doc = None
    else:
        doc = getattr(documented, "__doc__", None)
        if doc is None and inspect.ismethod(documented):
            receiver = documented.__self__
            owner = receiver if inspect.isclass(receiver) else type(receiver)
            for base in owner.__mro__[1:]:
                if base.__module__.partition(".")[0] not in ("builtins", "pydantic"):
                    doc = getattr(vars(base).get(documented.__name__), "__doc__", None)
                    if doc is not None:
                        break
    return inspect.cleandoc(doc) if isinstance(doc, str) else None


def _generated(cls: type, doc: str) -> bool:
    """Whether ``doc`` is the stand-in that ``@dataclass`` or ``NamedTuple`` writes for
    a class without a docstring (``Point(x: int, y: int = 0)``): its signature, not a
    description.

    Example:
        >>> from typing import NamedTuple
        >>> class Pair(NamedTuple):
        ...     a: int
        ...     b: int
        >>> _generated(Pair, Pair.__doc__), _generated(Pair, "Pair(a, b) of numbers.")
        (True, False)
    """
    if is_dataclass(cls):
        try:  # as dataclasses writes it
            return doc == cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
        except (TypeError, ValueError):
            return False
    fields = getattr(cls, "_fields", None)
    if issubclass(cls, tuple) and isinstance(fields, tuple):  # as namedtuple writes it
        return doc == f"{cls.__name__}({', '.join(map(str, fields))})"
    return False


def _is_record_class(cls: type) -> bool:
    # A class whose constructor takes its annotated fields, and whose instance is JSON:
    # its class annotations are the tool's parameters. A plain class's are not (its
    # __init__ takes others), and its instance could not be a result.
    return (
        is_dataclass(cls)
        or issubclass(cls, BaseModel)
        or (issubclass(cls, tuple) and hasattr(cls, "_fields"))  # a NamedTuple
        or is_typeddict(cls)
    )


def _is_method(func: Callable[..., Any], first: inspect.Parameter | None) -> bool:
    # A plain function defined in a class body whose first parameter is the receiver.
    if first is None or first.name not in ("self", "cls") or not inspect.isfunction(func):
        return False
    if first.kind not in (first.POSITIONAL_ONLY, first.POSITIONAL_OR_KEYWORD):
        return False
    owner = func.__qualname__.rsplit(".", 1)
    return len(owner) == 2 and not owner[0].endswith("<locals>")


def _enclosing_locals(qualname: str) -> dict[str, Any]:
    """The names local to the scopes a function was defined in, the innermost first,
    for its string annotations (``from __future__ import annotations``).

    The first frame outside this package is where ``@tool`` was applied, the function's
    own scope for a decorator. Outward from it, the frames of the scopes its qualified
    name lists (a class body, then the function around it: ``make.<locals>.Notes.add``)
    add their names, an inner one's winning, as Python resolves an annotation that is no
    string. Module level is the function's own globals, left to ``get_type_hints``.
    """
    scopes = [part for part in qualname.split(".")[:-1] if part != "<locals>"]
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("agcore_tools."):
        frame = frame.f_back
    merged: dict[str, Any] = {}
    # A function defined at module level (or in a class there) has no local scope: the
    # caller's names, where it was made into a tool later, are not its own.
    first = "<locals>" in qualname
    while frame is not None and frame.f_code.co_name != "<module>":
        enclosing = bool(scopes) and frame.f_code.co_name == scopes[-1]
        if not (first or enclosing):
            break  # a caller's frame, not a scope of the function's
        for key, value in frame.f_locals.items():
            merged.setdefault(key, value)
        if enclosing:
            scopes.pop()
        first, frame = False, frame.f_back
    return merged


def _type_hints(annotated: Any) -> dict[str, Any]:
    # A function's string annotations resolve in its enclosing scopes first (see
    # _enclosing_locals): only walked for those, so plain annotations stay cheap. A
    # class tool's are resolved as get_type_hints does, its scopes only as a fallback.
    if not inspect.isclass(annotated):
        annotations = getattr(annotated, "__annotations__", None) or {}
        if any(isinstance(value, str) for value in annotations.values()):
            localns = _enclosing_locals(getattr(annotated, "__qualname__", ""))
            return typing.get_type_hints(annotated, localns=localns or None, include_extras=True)
    try:
        return typing.get_type_hints(annotated, include_extras=True)
    except NameError:
        localns = _enclosing_locals(getattr(annotated, "__qualname__", ""))
        return typing.get_type_hints(annotated, localns=localns, include_extras=True)


def _with_annotations(function: types.FunctionType, annotations: dict[str, Any]) -> Any:
    # The function again with only these annotations, to resolve them apart: defaults,
    # globals, qualified name and __wrapped__ kept, as get_type_hints reads them.
    copy = types.FunctionType(
        function.__code__,
        function.__globals__,
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__qualname__ = function.__qualname__
    copy.__annotations__ = annotations
    if hasattr(function, "__wrapped__"):
        copy.__wrapped__ = function.__wrapped__  # type: ignore[attr-defined]
    return copy


def _resolve_hints(annotated: Any, tool_name: str) -> dict[str, Any]:
    """The resolved annotations of ``annotated``. A return annotation that does not
    resolve (a type imported under ``if TYPE_CHECKING:``) is left out, since only code
    mode's output schema reads it; a parameter's that does not is named."""
    try:
        return _type_hints(annotated)
    except Exception as exc:  # noqa: BLE001 - any failure: find which annotation
        failure = exc
    function = getattr(annotated, "__func__", annotated)  # a bound method's function
    annotations = getattr(function, "__annotations__", None)
    if isinstance(function, types.FunctionType) and annotations:
        for key, value in annotations.items():
            if key == "return":
                continue
            try:
                _type_hints(_with_annotations(function, {key: value}))
            except Exception as exc:
                raise ToolDefinitionError(
                    f"cannot make tool '{tool_name}': parameter '{key}' has annotation "
                    f"{value!r}, which does not resolve ({exc})"
                ) from exc
        if "return" in annotations:
            parameters = {k: v for k, v in annotations.items() if k != "return"}
            try:
                hints = _type_hints(_with_annotations(function, parameters))
            except Exception as exc:  # noqa: BLE001 - each resolved alone, not together
                failure = exc
            else:
                logger.debug(
                    "tool %r: its return annotation %r does not resolve (%s), so code "
                    "mode lists it as returning Any",
                    tool_name,
                    annotations["return"],
                    failure,
                )
                return hints
    raise ToolDefinitionError(
        f"cannot make tool '{tool_name}': its annotations do not resolve ({failure})"
    ) from failure


_LAMBDA_ADVICE = (
    "lambdas cannot have type annotations, and a tool's schema is built from them; "
    "define the tool with def (def name(param: str) -> str: ...) and decorate that"
)


def _unsupported_type(
    tool_name: str, fields: dict[str, Any], make_model: Callable[..., type[BaseModel]]
) -> ToolDefinitionError:
    """The error for a parameter whose type has no JSON schema, naming the parameter.

    pydantic's own advice (``arbitrary_types_allowed``) is for model authors; a tool's
    arguments come from the model as JSON, so the fix is another type.
    """
    culprit = None
    for field_name, spec in fields.items():
        try:  # only on failure: find the one parameter pydantic cannot describe
            make_model("probe", **{field_name: spec}).model_json_schema(
                schema_generator=_ToolArguments
            )
        except Exception:  # noqa: BLE001 - any failure points at this parameter
            culprit = (spec[1].alias or field_name, spec[0])
            break
    where = (
        f"parameter '{culprit[0]}' has type {_type_name(culprit[1])}, which"
        if culprit is not None
        else "a parameter's type"
    )
    return ToolDefinitionError(
        f"cannot make tool '{tool_name}': {where} cannot come from a model's JSON "
        "arguments; use a JSON-compatible type (str, int, float, bool, a list or dict of "
        "them, a pydantic model) and build the object in the tool, or take it from "
        "ToolContext or a closure instead of a parameter",
        tool_name=tool_name,
    )


def _type_name(annotation: Any) -> str:
    # Python 3.10 reads list[int] as a type too: keep its parameters.
    if isinstance(annotation, type) and not isinstance(annotation, types.GenericAlias):
        module = annotation.__module__
        return (
            annotation.__qualname__
            if module == "builtins"
            else f"{module}.{annotation.__qualname__}"
        )
    return repr(annotation).replace("typing.", "")


def function_schema(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    method: bool | None = None,
) -> FunctionSchema:
    """Build the tool schema of ``func``; refuse signatures a tool cannot have.

    ``method`` says whether ``func`` is a method whose first parameter (``self`` or
    ``cls``) is left out; None detects a function defined in a class body.
    """
    # pydantic.fields (and pydantic.types under it) is half of what `import agcore_tools`
    # would cost beyond pydantic's BaseModel: load it with the first tool instead.
    from pydantic import (
        Field,
        PydanticInvalidForJsonSchema,
        PydanticSchemaGenerationError,
        create_model,
    )
    from pydantic.fields import FieldInfo
    from pydantic_core import PydanticUndefined

    target = _unwrap(func)
    tool_name = name or target.name or type(func).__name__
    if inspect.isclass(target.annotated) and not _is_record_class(target.annotated):
        raise ToolDefinitionError(
            f"cannot make tool '{tool_name}': {target.annotated.__qualname__} is a class, "
            "and a class is a tool only when its constructor takes its annotated fields "
            "(a dataclass, a pydantic model, a NamedTuple or a TypedDict); make the tool "
            "a function that builds it instead",
            tool_name=tool_name,
        )

    # 1. Read the signature and resolve the annotations (string ones included).
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"cannot make tool '{tool_name}': no signature ({exc})") from exc
    params = list(signature.parameters.values())
    if target.name == "<lambda>":
        if params:
            raise ToolDefinitionError(f"cannot make a tool from a lambda: {_LAMBDA_ADVICE}")
        if name is None:
            raise ToolConfigError("cannot make a tool from a lambda without a name: pass name=")
    if method is None:
        method = _is_method(func, params[0] if params else None)
    if method:
        params = params[1:]
    params = [p for p in params if p.name not in target.bound]
    hints = _resolve_hints(target.annotated, tool_name)
    hidden = hidden_fields(target.annotated)
    # A pydantic model class: its parameters are its fields, read by their aliases.
    model_fields = model_fields_of(target.annotated, tool_name)

    # 2. Parse the docstring for the description and per-parameter text.
    doc = parse_docstring(_docstring(target.documented))

    # 3. One pydantic field per parameter; the ToolContext parameter is injected instead.
    fields: dict[str, Any] = {}
    context_param: str | None = None
    positional_only: list[str] = []
    renamed: list[tuple[str, str]] = []
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise ToolDefinitionError(
                f"cannot make tool '{tool_name}': parameter '{star}{param.name}' is not "
                "supported; a tool takes named, annotated parameters only"
            )
        source = model_fields.get(param.name)
        hinted = source.name if source is not None else param.name
        if hinted not in hints:
            raise ToolDefinitionError(
                f"cannot make tool '{tool_name}': parameter '{param.name}' has no type "
                "annotation; annotate it (use typing.Any to accept anything)"
            )
        annotation = hints[hinted]
        if param.kind is param.POSITIONAL_ONLY:
            positional_only.append(param.name)
        if _is_context_annotation(annotation):
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        if isinstance(default, FieldInfo):
            # `limit: int = Field(10, ge=1)`, as FastAPI writes it: the Field is the
            # parameter's field (default, factory, constraints, description), not a value.
            annotation, default = Annotated[annotation, default], PydanticUndefined
        elif source is not None:
            # The model's own field: its alias (the model reads what the class reads),
            # constraints, description and default; passed to the class by its key. Its
            # type as the class has it: a generic's parameter filled in (G[int]), and the
            # hint's Annotated metadata left in the FieldInfo, so it is taken once.
            annotation, default = Annotated[source.info.annotation, source.info], PydanticUndefined
        # A record class's field marked to hide its default: marked here as well.
        field_kwargs: dict[str, Any] = {"repr": False} if hinted in hidden else {}
        if _annotated_description(annotation) is None and hinted in doc.params:
            field_kwargs["description"] = doc.params[hinted]
        field_name, key = hinted, source.key if source is not None else param.name
        if hinted.startswith("_") or hasattr(BaseModel, hinted):
            # pydantic reserves these names; validate under another name, keep the alias.
            field_name = f"arg_{len(fields)}_{hinted.lstrip('_')}"
            if source is None or source.key == source.name:
                field_kwargs["alias"] = param.name
        if field_name != key:
            renamed.append((field_name, key))
        fields[field_name] = (annotation, Field(default, **field_kwargs))

    # 4. Build the model; extra fields are refused so typos reach the model as errors.
    try:
        model = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(
                extra="forbid",
                arbitrary_types_allowed=False,
                # A model class that takes its fields by name too: so does its tool.
                validate_by_name=bool(model_fields) and by_name(target.annotated),
            ),
            **fields,
        )
        schema = model.model_json_schema(schema_generator=_ToolArguments)
    except (PydanticSchemaGenerationError, PydanticInvalidForJsonSchema) as exc:
        # The second is pydantic's word for a type it validates but cannot describe
        # (a Callable): to the model, the same as one it cannot handle at all.
        raise _unsupported_type(tool_name, fields, create_model) from exc
    except Exception as exc:
        raise ToolDefinitionError(
            f"cannot make tool '{tool_name}': pydantic cannot build its schema ({exc})"
        ) from exc

    # 5. Clean the schema: no titles, always an object with properties. Nested models
    # that would drop unknown keys (pydantic's default) get them reported by the plan
    # instead, and their schema says so.
    parameters = _strip_titles(schema)
    parameters.setdefault("properties", {})
    parameters["additionalProperties"] = False
    plan = build_plan(parameters, check_extras=True)
    close_open_objects(parameters)
    return FunctionSchema(
        name=tool_name,
        description=description if description is not None else doc.description,
        parameters=parameters,
        model=model,
        context_param=context_param,
        positional_only=tuple(positional_only),
        renamed=tuple(renamed),
        plan=plan,
        method=method,
        # A class made into a tool has no return hint: its hints are its attributes'.
        returns=hints.get("return") if inspect.isroutine(target.annotated) else None,
    )
