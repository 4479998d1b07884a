"""pydantic's JSON Schema as a model reads it: no default the type's author kept out of
sight.

A tool's parameters and a structured output's type are described to the model with
their defaults. Two pydantic markers say a field's value is not for every eye, and its
default may well be a secret (an API key, a token) or an internal value:
``Field(exclude=True)``, kept out of ``model_dump()``, and ``Field(repr=False)`` (or
``dataclasses.field(repr=False)``), kept out of ``repr()``. Such a field stays in the
schema, as optional as before (the model may still send it: an excluded field is often
a scratchpad the model fills), without its default. ``SecretStr`` and ``SecretBytes``
defaults are masked by pydantic itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

__all__ = ["ModelFacingSchema"]


class ModelFacingSchema(GenerateJsonSchema):
    """A ``schema_generator`` that leaves out the default of a ``Field(exclude=True)``
    or ``repr=False`` field.

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
        cls = schema["cls"]
        fields = _core_fields(schema["schema"], "model-fields")
        if isinstance(fields, dict) and isinstance(cls, type) and issubclass(cls, BaseModel):
            for name, info in cls.model_fields.items():
                if info.repr is False and name in fields:
                    self._hidden_defaults.add(id(fields[name]))
        return super().model_schema(schema)

    def dataclass_schema(self, schema: core_schema.DataclassSchema) -> JsonSchemaValue:
        """The dataclass's schema, its ``repr=False`` fields' defaults marked to go."""
        cls = schema["cls"]
        fields = _core_fields(schema["schema"], "dataclass-args")
        if isinstance(fields, list) and dataclasses.is_dataclass(cls):
            hidden = {field.name for field in dataclasses.fields(cls) if not field.repr}
            self._hidden_defaults.update(id(f) for f in fields if f.get("name") in hidden)
        return super().dataclass_schema(schema)

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
