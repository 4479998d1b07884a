"""pydantic's JSON Schema as a model reads it: no default the type's author kept out of
sight.

A tool's parameters and a structured output's type are described to the model with
their defaults. Two pydantic markers say a field's value is not for every eye, and its
default may well be a secret (an API key, a token) or an internal value:
``Field(exclude=True)``, kept out of ``model_dump()``, and ``Field(repr=False)`` (or
``dataclasses.field(repr=False)``), kept out of ``repr()``. Such a field stays in the
schema, as optional as before (the model may still send it: an excluded field is often
a scratchpad the model fills), without its default. A default that holds a model or
dataclass with such a field (``settings: Settings = Settings()``) is left out as well:
pydantic's dump of it shows a ``repr=False`` value. So is a ``SecretStr``,
``SecretBytes`` or ``Secret[...]`` default: pydantic writes it as ``"**********"``, and
a model that sends back the default it read would replace the secret with the stars.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, NoDefault
from pydantic_core import core_schema

__all__ = ["ModelFacingSchema", "hidden_fields"]

_DEPTH = 16  # how deep a default's models and containers are looked into


class ModelFacingSchema(GenerateJsonSchema):
    """A ``schema_generator`` that leaves out the default of a ``Field(exclude=True)``
    or ``repr=False`` field, and a default that holds a model or dataclass with one, or
    a pydantic secret (``SecretStr``, ``SecretBytes``, ``Secret[...]``).

    Example:
        >>> from pydantic import BaseModel, Field
        >>> class Login(BaseModel):
        ...     user: str = "guest"
        ...     key: str = Field("sk-1", exclude=True)
        ...     password: str = Field("hunter2", repr=False)
        >>> schema = Login.model_json_schema(schema_generator=ModelFacingSchema)
        >>> schema["properties"]["user"]["default"], schema["properties"]["key"]
        ('guest', {'title': 'Key', 'type': 'string'})
        >>> schema["properties"]["password"], "required" in schema
        ({'title': 'Password', 'type': 'string'}, False)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The core schemas of the repr=False fields, by identity: the field schemas
        # reach model_field_schema as the same objects.
        self._hidden_defaults: set[int] = set()

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        """The model's schema, its ``repr=False`` fields' defaults marked to go."""
        fields = _core_fields(schema["schema"], "model-fields")
        if isinstance(fields, dict):
            hidden = hidden_fields(schema["cls"])
            self._hidden_defaults.update(id(f) for name, f in fields.items() if name in hidden)
        return super().model_schema(schema)

    def dataclass_schema(self, schema: core_schema.DataclassSchema) -> JsonSchemaValue:
        """The dataclass's schema, its ``repr=False`` fields' defaults marked to go."""
        fields = _core_fields(schema["schema"], "dataclass-args")
        if isinstance(fields, list):
            hidden = hidden_fields(schema["cls"])
            self._hidden_defaults.update(id(f) for f in fields if f.get("name") in hidden)
        return super().dataclass_schema(schema)

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        """The default, unless it holds a model or dataclass with a hidden field."""
        default = super().get_default_value(schema)
        return NoDefault if _holds_hidden(default, _DEPTH) else default

    def model_field_schema(self, schema: core_schema.ModelField) -> JsonSchemaValue:
        """A model field's schema, without its default when that is hidden."""
        return self._without_hidden(schema, super().model_field_schema(schema))

    def dataclass_field_schema(self, schema: core_schema.DataclassField) -> JsonSchemaValue:
        """A dataclass field's schema, without its default when that is hidden."""
        return self._without_hidden(schema, super().dataclass_field_schema(schema))

    def typed_dict_field_schema(self, schema: core_schema.TypedDictField) -> JsonSchemaValue:
        """A TypedDict field's schema, without its default when that is hidden."""
        return self._without_hidden(schema, super().typed_dict_field_schema(schema))

    def _without_hidden(self, field: Any, json_schema: JsonSchemaValue) -> JsonSchemaValue:
        hidden = field.get("serialization_exclude") or id(field) in self._hidden_defaults
        if hidden and "default" in json_schema:
            json_schema = {key: value for key, value in json_schema.items() if key != "default"}
        return json_schema


def _core_fields(node: Any, kind: str) -> Any:
    """The fields of the ``kind`` core schema at or under ``node`` (validators wrap it)."""
    for _ in range(8):  # a few wrappers deep at most
        if not isinstance(node, dict):
            return None
        if node.get("type") == kind:
            return node.get("fields")
        node = node.get("schema")
    return None


def hidden_fields(cls: Any) -> frozenset[str]:
    """The fields of a pydantic model or a dataclass marked ``Field(exclude=True)`` or
    ``repr=False`` (``dataclasses.field(repr=False)`` too); none for another type.

    Example:
        >>> from pydantic import Field
        >>> class Login(BaseModel):
        ...     user: str
        ...     key: str = Field("sk-1", exclude=True)
        >>> @dataclasses.dataclass
        ... class Session:
        ...     token: str = dataclasses.field(default="sk-2", repr=False)
        ...     note: str = Field("sk-3", repr=False)
        >>> sorted(hidden_fields(Login)), sorted(hidden_fields(Session)), hidden_fields(int)
        (['key'], ['note', 'token'], frozenset())
    """
    from pydantic.fields import FieldInfo  # on first use, as in _function.function_schema

    if isinstance(cls, type) and issubclass(cls, BaseModel):
        infos = cls.model_fields.items()
        return frozenset(name for name, info in infos if info.exclude is True or info.repr is False)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return frozenset()
    names = set()
    for field in dataclasses.fields(cls):
        # A stdlib dataclass keeps a `= Field(...)` as the field's default.
        info = field.default if isinstance(field.default, FieldInfo) else None
        if not field.repr or (info is not None and (info.exclude is True or info.repr is False)):
            names.add(field.name)
    return frozenset(names)


def _holds_hidden(value: Any, depth: int) -> bool:
    """Whether ``value`` is or holds (in its fields, lists, tuples, sets or dicts) a
    pydantic secret, or a model or dataclass instance with a :func:`hidden_fields` field
    (deeper than ``depth`` or in a cycle, a model or container is taken to).

    Example:
        >>> _holds_hidden([{"a": (1, "x")}], 4), _holds_hidden([[[[]]]], 2)
        (False, True)
        >>> from pydantic import SecretStr
        >>> _holds_hidden({"key": SecretStr("sk-1")}, 4)
        True
    """
    if isinstance(value, (str, bytes, int, float, type(None))):
        return False
    # On first use, as hidden_fields' FieldInfo: `import agcore_tools` leaves them out.
    from pydantic.types import Secret, SecretBytes, SecretStr

    # pydantic writes their defaults as "**********": a model that sends the default it
    # read back would replace the secret with the stars.
    if isinstance(value, (Secret, SecretStr, SecretBytes)):
        return True
    items: Any
    if isinstance(value, BaseModel) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        if depth == 0 or hidden_fields(type(value)):
            return True
        names = (
            type(value).model_fields
            if isinstance(value, BaseModel)
            else [field.name for field in dataclasses.fields(value)]
        )
        items = [getattr(value, name, None) for name in names]
    elif isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    else:
        return False
    if depth == 0:
        return bool(items)
    return any(_holds_hidden(item, depth - 1) for item in items)
