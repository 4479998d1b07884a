"""What a function tool's result looks like, as JSON Schema: the return annotation
read the way the result is written (pydantic's serialization schema, every field of a
model present).

Code mode lists it as each function's return type, so that a program need not spend a
call finding out; MCP's ``outputSchema`` plays the same part for a server's tools. A
server's plain value wrapped as ``{"result": v}`` is listed so, and a program gets it
so, while the model reads ``v`` (:func:`wraps_plain_value`).
"""

from __future__ import annotations

import inspect
import logging
import types
import typing
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from pydantic_core import core_schema

from .content import CONTENT_TYPES
from .schema import ModelFacingSchema

__all__ = ["UNWRAPS", "return_schema", "wraps_plain_value"]

logger = logging.getLogger("agcore_tools.code_mode")

UNWRAPS: ContextVar[bool] = ContextVar("agcore_tools_unwraps", default=True)
"""Whether an MCP tool's adapter gives the model a wrapped plain value as the value
itself. A Temporal activity says False for a workflow of an earlier version, which
would hand a code-mode program the bare value where its listing promises
``{result: ...}``."""


def wraps_plain_value(schema: Any) -> bool:
    """Whether an output schema is the object FastMCP and the MCP Python SDK wrap a
    plain return value in (a string, a list, a number): one property, ``result``
    (FastMCP 4 also marks it ``x-fastmcp-wrap-result``). The listing then promises a
    program ``{result: ...}``.

    Example:
        >>> wraps_plain_value({"type": "object", "properties": {"result": {"type": "string"}}})
        True
        >>> wraps_plain_value({"type": "object", "properties": {"result": {}, "total": {}}})
        False
    """
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return False
    properties = schema.get("properties")
    return isinstance(properties, Mapping) and list(properties) == ["result"]


class _AsReceived(ModelFacingSchema):
    """pydantic's serialization schema, with a field that has a default required: the
    result is ``to_jsonable_python`` of the value, which writes every field, so a reader
    always gets its key. (``ConfigDict(json_schema_serialization_defaults_required=True)``
    says the same, but a ``TypeAdapter`` of a model or dataclass refuses a config.) A
    TypedDict's ``NotRequired`` key, which a value may lack, stays optional. As the
    parameters are, without the default of a ``repr=False`` or ``exclude=True`` field
    (see :class:`~agcore_tools.schema.ModelFacingSchema`)."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        if field["type"] == "typed-dict-field":
            return super().field_is_required(field, total)
        return field.get("serialization_exclude_if") is None


def return_schema(annotation: Any, tool_name: str | None = None) -> dict[str, Any] | None:
    """The JSON Schema of what a function annotated to return ``annotation`` gives as a
    tool result: pydantic's serialization schema, since the result is
    ``to_jsonable_python`` of the value (a model or dataclass becomes a dict keyed by
    its fields' aliases, every field present). None when it says nothing (no
    annotation, ``Any``, ``None``), when it holds an ``Image``, ``Audio`` or ``File``
    (its schema is not what a reader gets), or when pydantic cannot describe it (a
    ``typing.TypedDict`` before Python 3.12: use ``typing_extensions.TypedDict``), which
    is logged at debug level naming ``tool_name``.

    Example:
        >>> return_schema(list[str])
        {'items': {'type': 'string'}, 'type': 'array'}
        >>> return_schema(None), return_schema(Any), return_schema(type(None))
        (None, None, None)
    """
    if annotation is None or annotation is Any or annotation is type(None):
        return None
    if _holds_content(annotation):
        return None
    # On first use, as function_schema loads pydantic.fields: `import agcore_tools`
    # does not pay for it.
    from pydantic import TypeAdapter

    try:
        schema = TypeAdapter(annotation).json_schema(
            mode="serialization", schema_generator=_AsReceived
        )
    except Exception as exc:  # noqa: BLE001 - any type pydantic cannot describe shows no return
        reason = " ".join(str(exc).split())[:200]
        logger.debug(
            "tool %r: its return annotation %r cannot be described, so code mode lists "
            "it as returning Any: %s",
            tool_name,
            annotation,
            reason,
        )
        return None
    return schema or None  # {}: any value


def _holds_content(annotation: Any) -> bool:
    if inspect.isclass(annotation) and not isinstance(annotation, types.GenericAlias):
        return issubclass(annotation, CONTENT_TYPES)
    return any(_holds_content(arg) for arg in typing.get_args(annotation))
