"""A pydantic model class (or pydantic dataclass) made a tool: its fields are the tool's
parameters, read as the class reads them (by alias), with the class's own constraints
and descriptions.
Before, an aliased field made the tool fail to build ("parameter 'apiKey' has no type
annotation"), an alias that is no identifier was listed under the field's name and the
call failed, and a field's constraints reached neither the schema nor validation."""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

import pytest
from pydantic import AfterValidator, AliasChoices, AliasPath, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.dataclasses import dataclass as pydantic_dataclass

from agcore_tools import (
    FunctionTool,
    InvalidArgumentsError,
    ToolContext,
    ToolDefinitionError,
    ToolRegistry,
    tool,
)


class Aliased(BaseModel):
    """Log in with a key."""

    api_key: str = Field(alias="apiKey")


class ValidationAliased(BaseModel):
    """Log in with a key."""

    api_key: str = Field(validation_alias="apiKey")


class Chosen(BaseModel):
    """Log in with a key."""

    api_key: str = Field(validation_alias=AliasChoices("apiKey", "key"))


class Generated(BaseModel):
    """Log in with a key."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
    api_key: str


class Hyphenated(BaseModel):
    """Log in with a key."""

    api_key: str = Field(alias="api-key")


class SerializedAs(BaseModel):
    """Log in with a key."""

    api_key: str = Field(serialization_alias="apiKey")


@pytest.mark.parametrize(
    ("cls", "key"),
    [
        (Aliased, "apiKey"),
        (ValidationAliased, "apiKey"),
        (Chosen, "apiKey"),
        (Generated, "apiKey"),
        (Hyphenated, "api-key"),
        (SerializedAs, "api_key"),
    ],
)
async def test_an_aliased_field_is_the_parameter_the_class_validates(cls: Any, key: str) -> None:
    made = FunctionTool(cls)
    # The model is shown the key pydantic's own (validation mode) schema shows.
    assert list(cls.model_json_schema()["properties"]) == [key]
    assert made.parameters["properties"] == {key: {"type": "string"}}
    assert made.parameters["required"] == [key]
    # Sent under that key, it reaches the class, which is made.
    registry = ToolRegistry()
    registry.register(made)
    done = await registry.invoke(made.name, {key: "k"})
    assert done.error is None, done.error
    assert done.output == cls.model_validate({key: "k"}).model_dump(by_alias=True)
    # The field's name is refused as the class refuses it, as an error the model can fix.
    if key != "api_key" and cls is not Generated:
        with pytest.raises(InvalidArgumentsError, match=key):
            await made.execute({"api_key": "k"}, ToolContext())


async def test_a_class_that_takes_its_fields_by_name_too_makes_a_tool_that_does() -> None:
    made = FunctionTool(Generated)
    assert await made.execute({"api_key": "k"}, ToolContext()) == {"apiKey": "k"}
    assert await made.execute({"apiKey": "k"}, ToolContext()) == {"apiKey": "k"}


async def test_tool_and_register_take_an_aliased_model_class() -> None:
    registry = ToolRegistry()
    decorated = tool(Aliased)
    registry.tool(Hyphenated)
    assert list(decorated.parameters["properties"]) == ["apiKey"]
    assert (await registry.invoke("Hyphenated", {"api-key": "k"})).output == {"api-key": "k"}


class Page(BaseModel):
    """Read a page."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
    page_size: int = Field(10, ge=1, le=50, description="Rows per page.")


async def test_a_fields_constraints_and_description_reach_the_schema_and_validation() -> None:
    made = FunctionTool(Page)
    assert made.parameters["properties"]["pageSize"] == {
        "type": "integer",
        "default": 10,
        "minimum": 1,
        "maximum": 50,
        "description": "Rows per page.",
    }
    # Before, the class refused it inside the call: a failed tool, not a fixable call.
    with pytest.raises(InvalidArgumentsError, match="pageSize"):
        await made.execute({"pageSize": 0}, ToolContext())
    assert await made.execute({}, ToolContext()) == {"pageSize": 10}


class Pathed(BaseModel):
    """Log in with a key."""

    api_key: str = Field(validation_alias=AliasPath("auth", "key"))


def test_a_field_read_from_an_alias_path_is_refused_naming_it() -> None:
    with pytest.raises(ToolDefinitionError, match="field 'api_key' is read from an AliasPath"):
        FunctionTool(Pathed)


seen: list[int] = []


def _noted(value: int) -> int:
    seen.append(value)
    return value


class Noted(BaseModel):
    """Keep a count."""

    count: Annotated[int, AfterValidator(_noted), Field(ge=0)]


def test_a_validator_in_a_fields_annotated_type_runs_once_when_the_arguments_are_read() -> None:
    # The field's FieldInfo holds its Annotated metadata: the tool's reading of the
    # arguments takes it once, not once from the type hint and again from the FieldInfo.
    seen.clear()
    FunctionTool(Noted).check_arguments({"count": 3})
    assert seen == [3]
    with pytest.raises(InvalidArgumentsError, match="count"):
        FunctionTool(Noted).check_arguments({"count": -1})


T = TypeVar("T")


class Box(BaseModel, Generic[T]):
    """Pack a box."""

    size: T = Field(gt=0)


async def test_a_generic_model_class_made_a_tool_takes_its_fields_types_as_filled_in() -> None:
    # The type hint is the TypeVar; the class's field has the type filled in. From the
    # hint, the schema was the constraint alone ({"gt": 0}, no JSON Schema keyword).
    made = FunctionTool(Box[int])
    assert made.parameters["properties"]["size"] == {"type": "integer", "exclusiveMinimum": 0}
    with pytest.raises(InvalidArgumentsError, match="size"):
        await made.execute({"size": "big"}, ToolContext())
    assert await made.execute({"size": 2}, ToolContext()) == {"size": 2}


@pydantic_dataclass
class Login:
    """Log in with a key."""

    api_key: str = Field("sk-default", alias="apiKey", exclude=True)
    page_size: int = Field(10, ge=1, le=50, repr=False)


@pydantic_dataclass(config=ConfigDict(alias_generator=to_camel, validate_by_name=True))
class CamelLogin:
    """Log in with a key."""

    api_key: str = Field("sk-default", repr=False)


@pytest.mark.parametrize("strict", [False, True])
async def test_a_pydantic_dataclass_takes_its_fields_as_a_model_class_does(strict: bool) -> None:
    # Before: "parameter 'apiKey' has no type annotation", as for a model class.
    made = FunctionTool(Login, strict=strict)
    properties = made.parameters["properties"]
    assert list(properties) == ["apiKey", "page_size"]
    # Its constraints reach the schema, and no hidden default is shown.
    assert "sk-default" not in str(made.parameters)
    assert "default" not in str(made.parameters)
    assert "minimum" in str(properties["page_size"])
    registry = ToolRegistry()
    registry.register(made)
    done = await registry.invoke(made.name, {"apiKey": "mine", "page_size": 5})
    assert done.error is None, done.error
    assert done.output == {"page_size": 5}  # api_key is exclude=True: not in the dump
    # A value out of range is an argument error the model can fix, not a failed call.
    with pytest.raises(InvalidArgumentsError, match="page_size"):
        await made.execute({"page_size": 0}, ToolContext())


async def test_a_pydantic_dataclass_taking_fields_by_name_too_makes_a_tool_that_does() -> None:
    made = FunctionTool(CamelLogin)
    assert made.parameters["properties"] == {"apiKey": {"type": "string"}}
    assert await made.execute({"api_key": "k"}, ToolContext()) == {"apiKey": "k"}
    assert await made.execute({"apiKey": "k"}, ToolContext()) == {"apiKey": "k"}
    assert await made.execute({}, ToolContext()) == {"apiKey": "sk-default"}


@pydantic_dataclass
class Basket:
    """Fill a basket."""

    item: LaterItem  # defined below: its FieldInfo holds a ForwardRef


@pydantic_dataclass
class LaterItem:
    name: str


async def test_a_pydantic_dataclass_naming_a_class_defined_after_it_still_makes_a_tool() -> None:
    made = FunctionTool(Basket)
    assert made.parameters["required"] == ["item"]
    assert await made.execute({"item": {"name": "x"}}, ToolContext()) == {"item": {"name": "x"}}
