"""How a function tool's arguments model reads the arguments a model sent.

Split from ``_function_tool`` because it is a job of its own, and a subtle one: pydantic's
Python mode reads every call, and a strict model (or field) takes what the model wrote
as JSON (a datetime, an enum, a UUID, a tuple) only in JSON mode, so such arguments are
read again there, when they are plain JSON. Pure: a pydantic model and a dict in, a
validated model (or pydantic's ``ValidationError``) out; the tool turns the error into
the model's :class:`~agcore_tools.InvalidArgumentsError` (``_invalid_args``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

__all__ = ["takes_json", "validated_arguments"]


def validated_arguments(model: type[BaseModel], args: dict[str, Any], as_json: bool) -> BaseModel:
    """``args`` validated by a tool's arguments ``model``; raises its ``ValidationError``.

    In pydantic's Python mode, as any call is; with ``as_json`` (see :func:`takes_json`)
    arguments that mode refuses are read again in JSON mode when they are plain JSON
    (dicts, lists, strings, numbers, booleans and None): a strict model or field takes
    the model's JSON only there (a datetime, an enum, a UUID or a tuple written as JSON
    writes it), and JSON mode's verdict is then the one raised. Arguments Python mode
    takes, and a Python caller's objects, are never read as JSON: that could change
    them (a union may pick another branch; a secret would be masked). Arguments nested
    too deeply for pydantic's JSON writer or reader get Python mode's verdict.

    Example:
        >>> from pydantic import ConfigDict
        >>> class Box(BaseModel):
        ...     model_config = ConfigDict(strict=True)
        ...     size: tuple[int, int]
        >>> validated_arguments(Box, {"size": [2, 3]}, takes_json(Box)).size  # a JSON array
        (2, 3)
    """
    try:
        return model.model_validate(args)
    except ValidationError as exc:
        if not (as_json and _plain_json(args)):
            raise
        refused = exc
    try:
        return model.model_validate_json(to_json(args))
    except PydanticSerializationError:
        pass  # nested deeper than pydantic writes JSON, or in a cycle
    except ValidationError as exc:
        # The text is JSON, written here: pydantic's reader refused its depth alone. (A
        # Json[...] field's own bad text is a json_invalid error too, at its field.)
        errors = exc.errors(include_input=False)
        if not any(e["type"] == "json_invalid" and not e["loc"] for e in errors):
            raise
    # Too deep for JSON mode: Python mode's verdict stands, an error the model can fix
    # (the strict field it names), not a RecursionError.
    raise refused


def _plain_json(value: Any) -> bool:
    """Whether ``value`` is made of JSON's own types only (so reading it as JSON text
    changes nothing).

    Example:
        >>> _plain_json({"a": [1, 2.5, None, True, "x"]}), _plain_json({"a": (1, 2)})
        (True, False)
        >>> looped: list[Any] = [1]; looped.append(looped)
        >>> _plain_json(looped)
        True
    """
    # A loop, not recursion: a model's arguments may nest as deeply as json.loads
    # allows, and a Python caller's deeper still. A container held twice, or inside
    # itself, is walked once (pydantic's JSON writer then refuses a cycle).
    stack = [value]
    walked: set[int] = set()
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict or kind is list:
            if id(item) in walked:
                continue
            walked.add(id(item))
        if kind is dict:
            if any(type(key) is not str for key in item):
                return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif not (kind in _SCALARS or item is None):
            return False
    return True


_SCALARS = (str, int, float, bool)


def takes_json(model: type[BaseModel]) -> bool:
    """Whether ``model`` or a field in it is strict, and so takes the model's JSON
    arguments only in JSON mode (see :func:`validated_arguments`).

    Example:
        >>> from pydantic import Field
        >>> class Loose(BaseModel):
        ...     n: int
        >>> class Tight(BaseModel):
        ...     n: int = Field(strict=True)
        >>> takes_json(Loose), takes_json(Tight)
        (False, True)
    """
    stack: list[Any] = [model.__pydantic_core_schema__]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("strict") is True:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
