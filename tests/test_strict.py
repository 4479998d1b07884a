"""Strict function schemas (issue 8 §3): the transform, per tool."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from datetime import date
from typing import Annotated, Any, Literal, Optional, Union

import openai
import pytest
from pydantic import AnyUrl, BaseModel, Field

from agcore_tools import (
    FunctionTool,
    InvalidArgumentsError,
    ToolContext,
    ToolDefinitionError,
    ToolError,
)
from agcore_tools.schema import function_schema
from agcore_tools.schema._strict import FORMATS, KEPT, strict_parameters


class Address(BaseModel):
    """A postal address."""

    street: str
    unit: str = "ground floor"
    country: str | None = None


class Node(BaseModel):
    """A tree node."""

    value: int
    children: list[Node] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    indoor: bool = True


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: int


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def book(
    city: str,
    where: Annotated[Address, Field(description="Where to deliver.")],
    tree: Node,
    pet: Annotated[Union[Cat, Dog], Field(discriminator="kind")],  # noqa: UP007
    color: Color,
    when: date,
    billing: Optional[Address] = None,  # noqa: UP045
    days: int = 3,
    limit: int | None = 5,
    mode: Literal["fast", "slow"] = "fast",
    code: Annotated[str, Field(min_length=2, max_length=8, pattern="^[A-Z]+$")] = "AB",
    stars: Annotated[int, Field(ge=1, le=5)] = 3,
    tags: set[str] = set(),  # noqa: B006
    rooms: Annotated[list[int], Field(min_length=1, max_length=4)] = [1],  # noqa: B006
    site: AnyUrl | None = None,
) -> str:
    """Book a stay."""
    return city


def _schemas(node: Any) -> Iterator[dict[str, Any]]:
    # Every schema in a schema: keyword positions only, never property names.
    if not isinstance(node, dict):
        return
    yield node
    for key in ("properties", "$defs"):
        for sub in (node.get(key) or {}).values():
            yield from _schemas(sub)
    yield from _schemas(node.get("items"))
    for sub in node.get("anyOf") or ():
        yield from _schemas(sub)


def assert_strict(schema: dict[str, Any]) -> None:
    """OpenAI's strict rules, checked on every schema of a parameters schema."""
    assert schema["type"] == "object" and "anyOf" not in schema
    for node in _schemas(schema):
        assert set(node) <= KEPT, set(node) - KEPT
        if "$ref" in node:
            assert set(node) == {"$ref"}, node  # no siblings next to $ref
        if node.get("type") == "object":
            assert node["additionalProperties"] is False, node
            assert node["required"] == list(node["properties"]), node
        if "format" in node:
            assert node["format"] in FORMATS
        assert any(k in node for k in ("type", "anyOf", "$ref", "enum", "const")), node


def test_the_issue_example_is_strict() -> None:
    def forecast(city: str, days: int = 3) -> str:
        """Weather forecast."""
        return city

    function = FunctionTool(forecast, strict=True).definition()["function"]
    assert function["strict"] is True
    assert function["parameters"] == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "required": ["city", "days"],
        "additionalProperties": False,
    }
    # The tool's own schema still tells the truth about defaults.
    assert FunctionTool(forecast).parameters["properties"]["days"]["default"] == 3
    assert "strict" not in FunctionTool(forecast).definition()["function"]


def test_a_rich_signature_follows_every_strict_rule() -> None:
    strict, why = strict_parameters(function_schema(book).parameters)
    assert why is None and strict is not None
    assert_strict(strict)
    props = strict["properties"]
    # Optional parameters are required and nullable; the description stays outside.
    assert props["days"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert props["billing"] == {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]}
    assert props["where"]["description"] == "Where to deliver."  # $ref sibling inlined
    # A nested model's optional fields too, and a recursive model still refers to itself.
    address = strict["$defs"]["Address"]
    assert address["required"] == ["street", "unit", "country"]
    assert address["properties"]["unit"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    node_children = strict["$defs"]["Node"]["properties"]["children"]["anyOf"][0]
    assert node_children["items"] == {"$ref": "#/$defs/Node"}
    # A discriminated union (oneOf) becomes anyOf.
    assert props["pet"] == {"anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]}
    # Supported keywords stay; the rest go (the tool still checks them itself).
    code = props["code"]["anyOf"][0]
    assert code == {"type": "string", "pattern": "^[A-Z]+$"}
    assert props["stars"]["anyOf"][0] == {"type": "integer", "minimum": 1, "maximum": 5}
    assert props["rooms"]["anyOf"][0] == {
        "type": "array",
        "items": {"type": "integer"},
        "minItems": 1,
        "maxItems": 4,
    }
    assert props["tags"]["anyOf"][0] == {"type": "array", "items": {"type": "string"}}
    assert props["when"] == {"type": "string", "format": "date"}
    assert props["site"]["anyOf"][0] == {"type": "string"}  # format "uri" is not supported


def test_the_transform_is_the_openai_sdks_own() -> None:
    class Place(BaseModel):
        name: str
        country: str

    class Trip(BaseModel):
        traveller: str
        to: Place
        stops: list[Place]

    def trip(traveller: str, to: Place, stops: list[Place]) -> None:
        """Plan a trip."""

    ours, _ = strict_parameters(function_schema(trip).parameters)
    theirs = openai.pydantic_function_tool(Trip)["function"]["parameters"]  # type: ignore[typeddict-item]

    def untitled(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: (
                    {n: untitled(v) for n, v in node[k].items()}
                    if k in ("properties", "$defs")
                    else untitled(node[k])
                )
                for k in node
                if k != "title"
            }
        return [untitled(v) for v in node] if isinstance(node, list) else node

    assert ours == untitled(theirs)


@pytest.mark.parametrize(
    ("annotation", "problem"),
    [
        ("Any", "'x' accepts any JSON value"),
        ("dict[str, int]", "'x' is a map with free keys"),
        ("tuple[int, str]", "'x' is a tuple"),
    ],
)
def test_what_strict_mode_cannot_describe_is_refused_by_name(annotation: str, problem: str) -> None:
    namespace: dict[str, Any] = {"Any": Any}
    exec(f"def f(x: {annotation}) -> None:\n    '''F.'''\n", namespace)
    strict, why = strict_parameters(function_schema(namespace["f"]).parameters)
    assert strict is None and why is not None and why.startswith(problem)
    with pytest.raises(
        ToolDefinitionError, match=f"cannot make tool 'f' strict: {problem}"
    ) as info:
        FunctionTool(namespace["f"], strict=True)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ToolError)
    FunctionTool(namespace["f"], strict=False)  # fine when not asked


def test_raw_schemas_are_made_strict_too() -> None:
    raw = {
        "type": "object",
        "title": "Search",
        "properties": {
            "query": {"type": "string", "title": "Query", "minLength": 1},
            "limit": {"type": "integer", "default": 10},
            "filters": {
                "type": "object",
                "properties": {"lang": {"type": "string"}},
                "additionalProperties": True,
            },
        },
        "required": ["query"],
    }
    strict, why = strict_parameters(raw)
    assert why is None and strict is not None
    assert_strict(strict)
    assert strict["properties"]["query"] == {"type": "string"}
    assert strict["properties"]["limit"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    assert raw["properties"]["limit"] == {"type": "integer", "default": 10}  # not mutated
    assert strict_parameters({"type": "object", "anyOf": []})[1] == (
        "the parameters are not a plain JSON object schema"
    )


def _resolves(root: dict[str, Any], ref: str) -> bool:
    node: Any = root
    for part in ref.split("/")[1:]:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return isinstance(node, dict)


def test_references_into_properties_still_resolve_in_the_strict_form() -> None:
    # zod-to-json-schema's default $refStrategy points into properties; the strict form
    # wraps optional `a` in anyOf, so the reference is inlined first.
    item = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    raw: dict[str, Any] = {
        "type": "object",
        "$defs": {"Id": {"type": "string"}},
        "properties": {
            "a": {"type": "array", "items": item},
            "b": {"$ref": "#/properties/a/items"},
            "id": {"$ref": "#/$defs/Id"},
        },
        "required": ["b", "id"],
    }
    strict, why = strict_parameters(raw)
    assert why is None and strict is not None
    assert_strict(strict)
    refs = [node["$ref"] for node in _schemas(strict) if "$ref" in node]
    assert all(_resolves(strict, ref) for ref in refs), refs
    assert strict["properties"]["b"] == {**item, "additionalProperties": False}
    # A recursive one cannot be inlined away: strict is refused, by name.
    ref = "#/properties/a/properties/b"
    node = {"type": "object", "properties": {"c": {"$ref": ref}}}
    a = {"type": "object", "properties": {"b": node}}
    assert strict_parameters({"type": "object", "properties": {"a": a}}) == (
        None,
        f"its $ref '{ref}' points at nothing in the strict form",
    )


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}, "required": ["x"]}
    return schema


def _props(count: int, sub: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{i}": sub for i in range(count)}}


LONG_ENUM = {"type": "string", "enum": [f"{i:060}" for i in range(251)]}


@pytest.mark.parametrize(
    ("within", "over", "problem"),
    [
        (
            _nested(10),
            _nested(11),
            "its schema has 11 levels of nested objects; strict mode allows 10",
        ),
        (
            _props(5_000, {"type": "string"}),
            _props(5_001, {"type": "string"}),
            "its schema has 5001 object properties; strict mode allows 5000",
        ),
        (
            _props(2, {"enum": list(range(500))}),
            _props(2, {"enum": list(range(501))}),
            "its schema has 1002 enum values; strict mode allows 1000",
        ),
        (
            _props(1, {**LONG_ENUM, "enum": LONG_ENUM["enum"][:250]}),
            {"type": "object", "properties": {"c": {"type": "array", "items": LONG_ENUM}}},
            "'c[]' has 251 values of 15060 characters in all; strict mode allows 15000 for an "
            "enum of over 250",
        ),
        (
            _props(1, {"enum": ["x" * 119_000]}),
            _props(1, {"enum": ["x" * 120_000]}),
            "its schema has 120002 characters of names, enum and const values; strict mode "
            "allows 120000",
        ),
    ],
)
def test_a_schema_over_openais_size_limits_is_refused_by_name(
    within: dict[str, Any], over: dict[str, Any], problem: str
) -> None:
    # OpenAI refuses the whole request over any one of them: the tool goes non-strict.
    assert strict_parameters(within)[1] is None
    assert strict_parameters(over) == (None, problem)


@pytest.mark.parametrize(
    "free",
    [
        {"type": "object", "description": "Any keys."},
        {"type": "object", "properties": {}, "additionalProperties": True},
        {"anyOf": [{"type": "object"}, {"type": "string"}]},
        {"type": ["object", "null"]},
    ],
)
def test_an_object_declaring_no_property_is_a_map_strict_mode_cannot_describe(
    free: dict[str, Any],
) -> None:
    # Closed, it would take {} only: azure's `parameters` and notion's page `properties`
    # lost every key that way.
    raw = {"type": "object", "properties": {"q": {"type": "string"}, "params": free}}
    assert strict_parameters(raw) == (
        None,
        "'params' is a map with free keys (dict[str, ...]), which strict mode cannot describe",
    )
    closed = {"type": "object", "properties": {}, "additionalProperties": False}
    strict, why = strict_parameters({"type": "object", "properties": {"params": closed}})
    assert why is None and strict is not None  # a server's own {} only stays as it is
    assert strict["properties"]["params"]["anyOf"][0]["additionalProperties"] is False
    empty_root, why = strict_parameters({"type": "object"})  # a tool of no arguments
    assert why is None and empty_root == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
        "required": [],
    }


async def test_null_for_an_optional_parameter_means_its_default() -> None:
    calls: list[tuple[Any, ...]] = []

    def stay(city: str, days: int = 3, limit: int | None = 5, where: Address | None = None) -> str:
        """Book a stay."""
        calls.append((city, days, limit, where))
        return city

    tool = FunctionTool(stay, strict=True)
    args = {"city": "Oslo", "days": None, "limit": None, "where": {"street": "Main", "unit": None}}
    await tool.execute(args, ToolContext())
    # days: null is its default; limit accepts None, so None it is; the nested unit too.
    assert calls == [("Oslo", 3, None, Address(street="Main"))]
    assert args["days"] is None  # the caller's arguments are not changed
    refused = pytest.raises(InvalidArgumentsError, match="city: Input should be a valid string")
    with refused:
        await tool.execute({"city": None}, ToolContext())  # a required one stays required


def test_a_recursive_reference_with_a_sibling_keyword_is_refused_not_a_crash() -> None:
    # pydantic and zod write a described reference as {"$ref", "description"}: OpenAI's
    # transform inlined it forever, and definitions() raised RecursionError for every tool.
    node = {"$ref": "#/$defs/Node", "description": "A child node."}
    raw = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "required": ["root"],
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": node},
                },
                "required": ["name"],
            }
        },
    }
    assert strict_parameters(raw) == (
        None,
        "it has a recursive $ref with sibling keywords, which strict mode cannot inline",
    )


def test_a_nullable_object_written_as_a_type_list_is_closed() -> None:
    # Go and TypeScript servers write ["object", "null"]; the transform closed only
    # "object", so the definition said strict and OpenAI would refuse the open object.
    status = {"type": ["object", "null"], "properties": {"state": {"type": "string"}}}
    strict, why = strict_parameters({"type": "object", "properties": {"status": status}})
    assert why is None and strict is not None
    closed = strict["properties"]["status"]  # nullable already: no anyOf added
    assert closed["type"] == ["object", "null"]
    assert closed["additionalProperties"] is False and closed["required"] == ["state"]


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        ({"type": "object", "properties": {"path": {"type": "string"}}}, "the arguments object"),
        ({"type": "object"}, "the arguments object"),
        (
            {
                "type": "object",
                "properties": {"opts": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "required": ["opts"],
            },
            "'opts'",
        ),
        (
            {
                "type": "object",
                "properties": {"opts": {"type": "object", "additionalProperties": False}},
                "required": ["opts"],
            },
            "'opts'",
        ),
    ],
)
def test_a_required_key_the_object_does_not_declare_keeps_the_tool_non_strict(
    schema: dict[str, Any], where: str
) -> None:
    # Closed to its declared keys, the object could never hold "mode", and every call
    # the model made in strict mode was refused for missing it.
    node = schema["properties"]["opts"] if "opts" in schema.get("properties", {}) else schema
    node["required"] = [*node.get("required", ()), "mode"]
    assert strict_parameters(schema) == (
        None,
        f"{where} requires 'mode', which it does not declare, so strict mode could never send it",
    )


def test_draft_4_exclusive_bounds_take_the_form_strict_mode_knows() -> None:
    # OpenAPI 3.0 bridges write {"minimum": 0, "exclusiveMinimum": true}; the boolean
    # went into the strict definition, where a number is expected.
    count = {"type": "integer", "minimum": 0, "exclusiveMinimum": True, "maximum": 9}
    ratio = {"type": "number", "maximum": 1, "exclusiveMaximum": False}
    schema = {
        "type": "object",
        "properties": {"count": count, "ratio": ratio},
        "required": ["count", "ratio"],
    }
    strict, why = strict_parameters(schema)
    assert why is None and strict is not None
    assert strict["properties"]["count"] == {"type": "integer", "exclusiveMinimum": 0, "maximum": 9}
    assert strict["properties"]["ratio"] == {"type": "number", "maximum": 1}
