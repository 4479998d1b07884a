"""The argument plan: nulls that mean "the default", and unknown keys of nested models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from agcore_tools import FunctionTool, InvalidArgumentsError, ToolContext
from agcore_tools.schema import build_plan, function_schema


class Address(BaseModel):
    """Pydantic's default: extra="ignore"."""

    street: str
    unit: str = "1"


class Open(BaseModel):
    """Extra keys allowed, on purpose."""

    model_config = ConfigDict(extra="allow")
    name: str


class Tree(BaseModel):
    label: str
    kids: list[Tree] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    indoor: bool = True


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: int = 1


def ship(to: Address, extra: Open, tree: Tree, pet: Cat | Dog, copies: list[Address]) -> str:
    """Ship something."""
    return to.street


@pytest.mark.parametrize("strict", [False, True])
async def test_unknown_keys_of_nested_models_are_reported_strict_or_not(strict: bool) -> None:
    tool = FunctionTool(ship, strict=strict)
    address_schema = tool.parameters["$defs"]["Address"]
    assert address_schema["additionalProperties"] is False  # the schema says so, too
    assert tool.parameters["$defs"]["Open"]["additionalProperties"] is True  # kept as asked
    args = {
        "to": {"street": "Main", "zip": "0150"},
        "extra": {"name": "n", "anything": 1},
        "tree": {"label": "a", "kids": [{"label": "b", "colour": "red"}]},
        "pet": {"kind": "cat", "purrs": True},
        "copies": [{"street": "x"}, {"street": "y", "floor": 2}],
    }
    with pytest.raises(InvalidArgumentsError) as info:
        await tool.execute(args, ToolContext())
    assert info.value.errors == [
        ("to.zip", "Extra inputs are not permitted"),
        ("tree.kids.0.colour", "Extra inputs are not permitted"),
        ("pet.purrs", "Extra inputs are not permitted"),
        ("copies.1.floor", "Extra inputs are not permitted"),
    ]
    good = {**args, "to": {"street": "Main"}, "tree": {"label": "a"}, "pet": {"kind": "dog"}}
    good["copies"] = [{"street": "x"}]
    assert await tool.execute(good, ToolContext()) == "Main"


def stock(by_name: dict[str, Address], pair: tuple[Address, int]) -> str:
    """Keep stock."""
    return ",".join(f"{k}:{a.unit}" for k, a in by_name.items()) + f";{pair[0].unit}"


async def test_models_inside_a_dict_or_a_tuple_are_planned_as_in_a_list() -> None:
    # The plan read `items` only: in dict[str, Address] and tuple[Address, int] an
    # unknown key was dropped without a word, and a null was not read as "absent".
    # (Strict mode refuses a dict with free keys, so this is the plain mode's.)
    tool = FunctionTool(stock)
    args = {"by_name": {"a": {"street": "x", "floor": 2}}, "pair": [{"street": "y", "z": 0}, 1]}
    with pytest.raises(InvalidArgumentsError) as info:
        await tool.execute(args, ToolContext())
    assert info.value.errors == [
        ("by_name.a.floor", "Extra inputs are not permitted"),
        ("pair.0.z", "Extra inputs are not permitted"),
    ]
    nulls = {"by_name": {"a": {"street": "x", "unit": None}}, "pair": [{"street": "y", "unit": None}, 1]}  # fmt: skip
    assert await tool.execute(nulls, ToolContext()) == "a:1;1"


def adopt(pet: Cat | Dog, tagged: Annotated[Cat | Dog, Field(discriminator="kind")]) -> str:
    """Adopt a pet."""
    return f"{pet!r} {tagged!r}"


async def test_a_key_only_another_shape_of_a_union_knows_is_reported() -> None:
    # The plan merged the shapes: a Dog's `barks` sent with a Cat passed the check, and
    # pydantic then dropped it without a word.
    tool = FunctionTool(adopt)
    with pytest.raises(InvalidArgumentsError) as info:
        await tool.execute(
            {"pet": {"kind": "cat", "barks": 2}, "tagged": {"kind": "dog", "indoor": False}},
            ToolContext(),
        )
    assert info.value.errors == [
        ("pet.barks", "Extra inputs are not permitted"),
        ("tagged.indoor", "Extra inputs are not permitted"),
    ]
    fine = {"pet": {"kind": "dog", "barks": 2}, "tagged": {"kind": "cat", "indoor": False}}
    assert await tool.execute(fine, ToolContext()) == (
        "Dog(kind='dog', barks=2) Cat(kind='cat', indoor=False)"
    )


def gather(
    one_or_many: Address | list[Address],
    either_list: list[Cat] | list[Address],
    list_or_map: list[Address] | dict[str, Address],
    one_or_map: Address | dict[str, Address],
) -> str:
    """Gather addresses."""
    return f"{one_or_many!r} {either_list!r} {list_or_map!r} {one_or_map!r}"


async def test_a_union_of_an_object_and_an_array_plans_each_kind() -> None:
    # Only the object shapes of a union were planned: in `Address | list[Address]` a
    # list's unknown keys were dropped without a word.
    tool = FunctionTool(gather)
    args = {
        "one_or_many": [{"street": "a", "floor": 1}],
        "either_list": [{"street": "b", "zip": 2}],
        "list_or_map": {"k": {"street": "c", "door": 3}},
        "one_or_map": {"street": "d"},
    }
    with pytest.raises(InvalidArgumentsError) as info:
        await tool.execute(args, ToolContext())
    assert info.value.errors == [
        ("one_or_many.0.floor", "Extra inputs are not permitted"),
        ("either_list.0.zip", "Extra inputs are not permitted"),
        ("list_or_map.k.door", "Extra inputs are not permitted"),
    ]
    # An object or a map of objects: a map's keys are not an object's unknown keys.
    fine = {
        "one_or_many": {"street": "a"},
        "either_list": [{"kind": "cat"}],
        "list_or_map": [{"street": "c"}],
        "one_or_map": {"k": {"street": "d"}},
    }
    assert await tool.execute(fine, ToolContext()) == (
        "Address(street='a', unit='1') [Cat(kind='cat', indoor=True)] "
        "[Address(street='c', unit='1')] {'k': Address(street='d', unit='1')}"
    )


def loose(rows: list[Address] | list[dict[str, Any]], counts: Address | dict[str, int]) -> str:
    """Take rows and counts."""
    return f"{rows!r} {counts!r}"


async def test_a_union_kind_a_shape_without_a_plan_takes_is_left_to_the_validator() -> None:
    # `list[dict]` and `dict[str, int]` take any keys: planning the list or the object
    # as Address alone reported their keys as unknown, refusing valid values.
    tool = FunctionTool(loose)
    args = {"rows": [{"z": 1}], "counts": {"a": 1}}
    assert await tool.execute(args, ToolContext()) == "[{'z': 1}] {'a': 1}"


async def test_unknown_keys_are_reported_with_the_other_problems() -> None:
    tool = FunctionTool(ship)
    with pytest.raises(InvalidArgumentsError) as info:
        await tool.execute({"to": {"street": 5, "zip": 1}}, ToolContext())
    fields = [field for field, _ in info.value.errors]
    assert fields == ["to.street", "extra", "tree", "pet", "copies", "to.zip"]


def test_nulls_are_dropped_only_where_they_mean_absent() -> None:
    def f(a: int, b: int = 2, c: int | None = 3, to: Address | None = None) -> None:
        """F."""

    plan = build_plan(function_schema(f).parameters, check_extras=True)
    assert plan is not None
    args = {"a": None, "b": None, "c": None, "to": {"street": "s", "unit": None}}
    out, problems = plan.apply(args)
    assert out == {"a": None, "c": None, "to": {"street": "s"}} and problems == []
    assert args["to"] == {"street": "s", "unit": None}  # copied, never changed in place
    same = {"a": 1, "b": 2}
    assert plan.apply(same)[0] is same  # nothing to do: no copy


def test_a_union_drops_a_null_only_where_every_shape_would() -> None:
    def f(pet: Cat | Dog) -> None:
        """F."""

    plan = build_plan(function_schema(f).parameters, check_extras=True)
    assert plan is not None
    assert plan.apply({"pet": {"kind": "cat", "indoor": None}})[0] == {"pet": {"kind": "cat"}}
    assert plan.apply({"pet": {"kind": "dog", "barks": None}})[0] == {"pet": {"kind": "dog"}}


def test_nulls_are_dropped_through_allof_as_strict_mode_flattens_it() -> None:
    # A described reference as pydantic v1 and other generators write it: strict mode
    # offers the referenced model's optional `q` nullable, so its null means "absent".
    inner = {"type": "object", "properties": {"p": {"type": "string"}, "q": {"type": "integer"}}}
    schema: dict[str, Any] = {
        "type": "object",
        "definitions": {"In": {**inner, "required": ["p"]}},
        "properties": {
            "inner": {"allOf": [{"$ref": "#/definitions/In"}], "description": "inner"},
            "both": {"allOf": [inner, {"properties": {"r": {"type": "string"}}}]},
        },
        "required": ["inner", "both"],
    }
    plan = build_plan(schema, check_extras=False)
    assert plan is not None
    args = {"inner": {"p": "x", "q": None}, "both": {"q": None, "r": None, "s": None}}
    assert plan.apply(args) == ({"inner": {"p": "x"}, "both": {"s": None}}, [])


def test_flat_tools_have_no_plan_and_raw_schemas_check_no_keys() -> None:
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    assert build_plan(function_schema(add).parameters, check_extras=True) is None
    raw: dict[str, Any] = {
        "type": "object",
        "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["q"],
    }
    plan = build_plan(raw, check_extras=False)
    assert plan is not None
    assert plan.apply({"q": "x", "n": None, "other": 1}) == ({"q": "x", "other": 1}, [])
    raw["required"] = ["q", "n"]
    assert build_plan(raw, check_extras=False) is None


def test_a_definition_that_only_names_another_gets_that_ones_plan() -> None:
    # {"Query": {"$ref": "#/definitions/QueryBody"}}: the alias got no plan, so the null
    # strict mode sends for the optional "limit" reached the check and was refused.
    schema = {
        "type": "object",
        "definitions": {
            "Query": {"$ref": "#/definitions/QueryBody"},
            "QueryBody": {
                "type": "object",
                "properties": {"text": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["text"],
            },
        },
        "properties": {"query": {"$ref": "#/definitions/Query"}},
        "required": ["query"],
    }
    plan = build_plan(schema, check_extras=False)
    assert plan is not None
    assert plan.apply({"query": {"text": "cats", "limit": None}})[0] == {"query": {"text": "cats"}}


def test_a_union_that_names_itself_is_planned_without_recursing_forever() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/A"}},
        "$defs": {
            "A": {
                "anyOf": [
                    {"$ref": "#/$defs/A"},
                    {"type": "object", "properties": {"x": {"type": "integer"}}},
                ]
            }
        },
    }
    plan = build_plan(schema, check_extras=True)  # RecursionError before
    assert plan is not None and plan.apply({"a": {"x": 1}}) == ({"a": {"x": 1}}, [])
