"""A pydantic model class (or pydantic dataclass) made a tool: its fields are the
tool's parameters.

The class's signature names a field by its alias when that is an identifier, else by
its name, and gives its bare type and default: the field's constraints, description and
validation alias are not in it. The tool takes each field's own ``FieldInfo`` instead,
so its arguments model reads what the class reads (by alias, the way pydantic's own
schema lists it), and passes each value to the class under the key the class takes.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..error import ToolDefinitionError

__all__ = ["ModelField", "by_name", "model_fields_of"]


@dataclass(frozen=True)
class ModelField:
    """A pydantic model class's field, as its constructor's parameter."""

    name: str
    """The field's name (its type hint's key)."""
    info: Any
    """Its ``FieldInfo``: alias, constraints, description, default."""
    key: str
    """The keyword the constructor takes it by (its alias, unless it validates by name)."""


def _fields_and_config(cls: Any) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """A pydantic model class's or pydantic dataclass's fields and config; else None."""
    if not inspect.isclass(cls):
        return None
    if issubclass(cls, BaseModel):
        return cls.model_fields, cls.model_config
    # A pydantic dataclass (pydantic.dataclasses.is_pydantic_dataclass, without loading
    # that module): its signature, as a model's, has neither constraints nor aliases read.
    # One that names a class not yet defined when it was (its FieldInfo holds a
    # ForwardRef) is read from its signature, whose hints resolve now, as before.
    if dataclasses.is_dataclass(cls) and "__pydantic_validator__" in cls.__dict__:
        if not getattr(cls, "__pydantic_complete__", False):
            return None
        return cls.__pydantic_fields__, cls.__pydantic_config__  # type: ignore[attr-defined]
    return None


def by_name(cls: Any) -> bool:
    """Whether a pydantic model class (or pydantic dataclass) takes its aliased fields by
    their names too."""
    found = _fields_and_config(cls)
    config = found[1] if found is not None else {}
    return bool(config.get("validate_by_name") or config.get("populate_by_name"))


def model_fields_of(cls: Any, tool_name: str) -> dict[str, ModelField]:
    """A pydantic model class's (or pydantic dataclass's) fields by the names its
    signature gives them (an identifier alias, else the field's name); none for another
    callable.

    Example:
        >>> from pydantic import Field
        >>> class Login(BaseModel):
        ...     api_key: str = Field(alias="apiKey")
        >>> field = model_fields_of(Login, "login")["apiKey"]
        >>> field.name, field.key
        ('api_key', 'apiKey')
    """
    fields_and_config = _fields_and_config(cls)
    if fields_and_config is None:
        return {}
    from pydantic import AliasChoices  # on first use: see function_schema

    takes_names = by_name(cls)
    found: dict[str, ModelField] = {}
    for name, info in fields_and_config[0].items():
        read_as: Any = info.validation_alias if info.validation_alias is not None else info.alias
        if isinstance(read_as, AliasChoices):
            read_as = read_as.choices[0]
        if takes_names or read_as is None:
            key = name
        elif isinstance(read_as, str):
            key = read_as
        else:
            raise ToolDefinitionError(
                f"cannot make tool '{tool_name}': field '{name}' is read from an AliasPath, "
                "which a tool cannot pass its class; give it a plain alias, or set "
                "validate_by_name=True in its model_config",
                tool_name=tool_name,
            )
        field = ModelField(name, info, key)
        for spelling in (name, info.alias, info.validation_alias):
            if isinstance(spelling, str):
                found.setdefault(spelling, field)
    return found
