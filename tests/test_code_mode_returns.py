"""What code mode's listing says a tool returns: the stub's return type and its
``Returns:`` line, from an MCP tool's output schema or a function's return annotation.

A program built on a wrong idea of a result (``.splitlines()`` on a dict,
``json.loads()`` of one) costs the model another program; the listing says what comes
back, as the program receives it, and stays valid Python whatever the schema holds.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import enum
import logging
import sys
import typing
from collections.abc import AsyncIterator
from typing import Any, Literal

import pydantic
import pytest
from pydantic_core import to_jsonable_python
from typing_extensions import NotRequired, TypedDict  # pydantic: typing's from 3.12 only

from agcore_tools import Image, ToolContext
from agcore_tools._function_tool import FunctionTool
from agcore_tools._listing import RETURNS_LIMIT, python_signatures

NO_ARGS = {"type": "object", "properties": {}}


def stub(output: Any, description: str = "Do it.") -> tuple[str, str]:
    """The return annotation of a tool with ``output`` as its output schema, and its
    docstring, read back from the listing parsed as Python."""
    definition = {"function": {"name": "t", "description": description, "parameters": NO_ARGS}}
    text, _ = python_signatures([definition], {"t": output})
    [function] = ast.parse(text).body
    assert isinstance(function, ast.AsyncFunctionDef)
    assert function.returns is not None
    return ast.unparse(function.returns), ast.get_docstring(function) or ""


def returns_line(doc: str) -> str | None:
    lines = [line for line in doc.splitlines() if line.startswith("Returns: ")]
    return lines[0].removeprefix("Returns: ") if lines else None


@pytest.mark.parametrize(
    ("schema", "annotation"),
    [
        ({"type": "string"}, "str"),
        ({"type": "integer"}, "int"),
        ({"type": "array", "items": {"type": "string"}}, "list[str]"),
        ({"anyOf": [{"type": "number"}, {"type": "null"}]}, "float | None"),
        ({"type": ["boolean", "null"]}, "bool | None"),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "dict[str, int]"),
        ({"type": "object"}, "dict"),
    ],
)
def test_a_simple_return_is_a_precise_annotation_with_no_returns_line(
    schema: dict[str, Any], annotation: str
) -> None:
    shown, doc = stub(schema)
    assert shown == annotation
    assert returns_line(doc) is None
    assert doc == "Do it."


def test_a_tool_without_an_output_schema_returns_any() -> None:
    text, _ = python_signatures([{"function": {"name": "t", "parameters": NO_ARGS}}])
    assert text.startswith("async def t() -> Any:")
    assert stub(None)[0] == "Any"


def test_an_object_is_a_dict_and_its_keys_are_in_the_docstring() -> None:
    schema = {
        "type": "object",
        "required": ["city", "temperature"],
        "properties": {
            "city": {"type": "string"},
            "temperature": {"type": "number", "description": "Degrees Celsius"},
            "alerts": {"type": "array", "items": {"type": "string"}},
            "sky": {"enum": ["clear", "cloudy"]},
        },
    }
    annotation, doc = stub(schema)
    assert annotation == "dict"
    # Optional keys carry a ?, enums their values; descriptions are left out (tokens).
    assert returns_line(doc) == (
        "{city: str, temperature: float, alerts?: list[str], sky?: 'clear' | 'cloudy'}"
    )


def test_refs_are_resolved_and_objects_are_shown_two_levels_deep() -> None:
    schema = {
        "$defs": {
            "Issue": {
                "type": "object",
                "required": ["number"],
                "properties": {
                    "number": {"type": "integer"},
                    "author": {"$ref": "#/$defs/User"},
                },
            },
            "User": {
                "type": "object",
                "properties": {"login": {"type": "string"}, "org": {"$ref": "#/$defs/Org"}},
            },
            "Org": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
        "type": "object",
        "required": ["issues"],
        "properties": {"issues": {"type": "array", "items": {"$ref": "#/$defs/Issue"}}},
    }
    annotation, doc = stub(schema)
    assert annotation == "dict"
    # The result's keys and its issues' keys; an issue's author is a dict.
    assert returns_line(doc) == "{issues: list[{number: int, author?: dict}]}"


def test_a_list_of_objects_is_a_list_of_dicts_with_their_keys() -> None:
    item = {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}
    annotation, doc = stub({"type": "array", "items": item})
    assert annotation == "list[dict]"
    assert returns_line(doc) == "list[{id: int}]"


def test_a_wrapped_plain_value_shows_the_result_key_the_program_reads() -> None:
    # FastMCP and the MCP Python SDK send a plain return as structuredContent
    # {"result": ...}, and that dict is what a program receives.
    schema = {
        "type": "object",
        "title": "word_countOutput",
        "required": ["result"],
        "properties": {"result": {"title": "Result", "type": "integer"}},
        "x-fastmcp-wrap-result": True,
    }
    assert stub(schema) == ("dict", "Do it.\n\nReturns: {result: int}")


def test_a_long_shape_is_cut_with_an_ellipsis() -> None:
    properties = {f"field_number_{i}": {"type": "string"} for i in range(40)}
    _, doc = stub({"type": "object", "properties": properties})
    line = returns_line(doc)
    assert line is not None
    assert len(line) == RETURNS_LIMIT
    assert line.startswith("{field_number_0?: str, ")
    assert line.endswith("...")


def test_the_returns_line_follows_the_parameters_descriptions() -> None:
    definition = {
        "function": {
            "name": "t",
            "description": "Look up a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "Its name."}},
            },
        }
    }
    output = {"type": "object", "properties": {"zip": {"type": "string"}}}
    text, _ = python_signatures([definition], {"t": output})
    assert text == (
        "async def t(city: str = None) -> dict:\n"
        '    """Look up a city.\n'
        "\n"
        "    city: Its name.\n"
        "    Returns: {zip?: str}\n"
        '    """'
    )


MALFORMED_OUTPUTS = {  # name: (output schema, the return annotation shown)
    "a list": ([1, 2], "Any"),
    "a string": ("object", "Any"),
    "empty": ({}, "Any"),
    "a dangling ref": ({"$ref": "#/$defs/Missing"}, "Any"),
    "a remote ref": ({"$ref": "https://example.com/schema.json"}, "Any"),
    "a ref cycle": ({"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}}, "Any"),
    "type a number": ({"type": 5}, "Any"),
    "properties a list": ({"type": "object", "properties": ["a", "b"]}, "dict"),
    "items a string": ({"type": "array", "items": "string"}, "list[Any]"),
    "anyOf a string": ({"anyOf": "string"}, "Any"),
    "property schema a word": ({"type": "object", "properties": {"a": "string"}}, "dict"),
    "required a string": ({"type": "object", "required": "ab", "properties": {"a": {}}}, "dict"),
}


@pytest.mark.parametrize("name", MALFORMED_OUTPUTS)
def test_a_malformed_output_schema_never_breaks_the_listing(name: str) -> None:
    schema, expected = MALFORMED_OUTPUTS[name]
    assert stub(schema)[0] == expected  # and the listing parsed as Python


def test_a_recursive_schema_ends() -> None:
    node = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "children": {"type": "array"}},
    }
    node["properties"]["children"]["items"] = {"$ref": "#"}  # a tree of itself
    annotation, doc = stub(node)
    assert annotation == "dict"
    assert returns_line(doc) == "{name?: str, children?: list[{name?: str, children?: list[dict]}]}"


def test_keys_and_values_that_look_like_code_stay_inside_the_docstring() -> None:
    schema = {
        "type": "object",
        "properties": {
            'a"""b': {"type": "string"},
            "c:\\Users": {"enum": ['"""', "\\", "x\ny"]},
            "api-version": {"type": "string"},
        },
    }
    annotation, doc = stub(schema, description='Ends with "quotes"')
    assert annotation == "dict"
    line = returns_line(doc)
    assert line is not None and "api-version" in line


# -- function tools: the return annotation, as the program receives the value -----------


class Forecast(pydantic.BaseModel):
    city: str
    high_c: float = pydantic.Field(alias="highC")
    days: list[int] = []


@dataclasses.dataclass
class Point:
    x: int
    label: str | None


class Row(TypedDict):
    name: str
    rows: int


def _tool(func: Any) -> FunctionTool[..., Any]:
    return FunctionTool(func)


def _received(tool: FunctionTool[..., Any]) -> Any:
    """What a program receives from the tool: its JSON output, as code mode passes it."""
    return to_jsonable_python(asyncio.run(tool.execute({}, ToolContext())))


def _listed(tool: FunctionTool[..., Any]) -> tuple[str, str]:
    return stub(tool.output_schema, tool.description)


def test_a_pydantic_model_is_the_dict_the_program_receives_keyed_by_alias() -> None:
    def forecast() -> Forecast:
        """Tomorrow's forecast."""
        return Forecast(city="Oslo", highC=4.5)

    tool = _tool(forecast)
    assert _received(tool) == {"city": "Oslo", "highC": 4.5, "days": []}
    annotation, doc = _listed(tool)
    assert annotation == "dict"
    # days has a default, and the program still receives it: no "?"
    assert returns_line(doc) == "{city: str, highC: float, days: list[int]}"


@dataclasses.dataclass
class Page:
    items: list[str]
    next: str | None = None


class Partial(TypedDict):
    name: str
    note: NotRequired[str]


def test_a_field_with_a_default_is_always_received_and_listed_without_a_question_mark() -> None:
    def page() -> Page:
        """A page."""
        return Page(["x"])

    def partial() -> Partial:
        """A name, and a note only sometimes."""
        return {"name": "a"}

    assert _received(_tool(page)) == {"items": ["x"], "next": None}
    assert _listed(_tool(page)) == ("dict", "A page.\n\nReturns: {items: list[str], next: str | None}")  # fmt: skip
    assert _received(_tool(partial)) == {"name": "a"}  # a NotRequired key may be absent
    assert returns_line(_listed(_tool(partial))[1]) == "{name: str, note?: str}"


class Legacy(typing.TypedDict):
    a: int


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="pydantic reads typing.TypedDict")
def test_a_return_pydantic_cannot_describe_is_logged_naming_the_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def legacy() -> Legacy:
        """typing.TypedDict before 3.12."""
        return {"a": 1}

    with caplog.at_level(logging.DEBUG, logger="agcore_tools.code_mode"):
        assert _tool(legacy).output_schema is None
    [record] = caplog.records
    assert record.getMessage().startswith("tool 'legacy': its return annotation")
    assert "typing_extensions.TypedDict" in record.getMessage()


def test_dataclasses_typed_dicts_and_lists_of_them() -> None:
    def points() -> list[Point]:
        """Points."""
        return [Point(1, None)]

    def tables() -> list[Row]:
        """Tables."""
        return [{"name": "orders", "rows": 3}]

    assert _received(_tool(points)) == [{"x": 1, "label": None}]
    assert _listed(_tool(points)) == ("list[dict]", "Points.\n\nReturns: list[{x: int, label: str | None}]")  # fmt: skip
    assert _listed(_tool(tables)) == ("list[dict]", "Tables.\n\nReturns: list[{name: str, rows: int}]")  # fmt: skip


def test_simple_returns_are_precise() -> None:
    def count() -> int:
        """Count."""
        return 3

    def tags() -> list[str]:
        """Tags."""
        return []

    def mode() -> Literal["fast", "slow"]:
        """Mode."""
        return "fast"

    assert _listed(_tool(count)) == ("int", "Count.")
    assert _listed(_tool(tags)) == ("list[str]", "Tags.")
    assert _listed(_tool(mode)) == ("str", "Mode.\n\nReturns: 'fast' | 'slow'")


class Opaque:
    """No schema pydantic can make."""


def test_returns_that_say_nothing_true_show_no_type() -> None:
    def bare():  # type: ignore[no-untyped-def]
        """No annotation."""

    def anything() -> Any:
        """Any."""

    def nothing() -> None:
        """None."""

    def picture() -> Image:
        """A program receives a text naming the image, not the Image's fields."""
        return Image(b"GIF89a" + bytes(10))

    def pictures() -> dict[str, list[Image]]:
        """Images deep inside."""
        return {}

    def opaque() -> Opaque:
        """pydantic cannot describe it."""
        return Opaque()

    async def stream() -> AsyncIterator[str]:
        """A generator's result is its last value, not what it is annotated to return."""
        yield "a"

    for func in (bare, anything, nothing, picture, pictures, opaque, stream):
        tool = _tool(func)
        assert tool.output_schema is None, func.__name__
        assert _listed(tool)[0] == "Any"


def test_an_output_schema_can_be_set_by_hand() -> None:
    def raw() -> dict[str, Any]:
        """Raw."""
        return {}

    tool = _tool(raw)
    assert tool.output_schema == {"additionalProperties": True, "type": "object"}
    tool.output_schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    assert _listed(tool) == ("dict", "Raw.\n\nReturns: {ok?: bool}")


# -- parameters: the same reading of a schema, $ref and all --------------------------


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Box(pydantic.BaseModel):
    w: int
    h: int = 1


def test_enum_and_model_parameters_are_read_through_their_refs() -> None:
    def paint(color: Color, box: Box, boxes: list[Box], tint: Color | None = None) -> str:
        """Paint boxes.

        Args:
            box: The box to paint.
        """
        return "ok"

    tool = _tool(paint)
    assert "$defs" in tool.parameters  # pydantic describes Color and Box by $ref
    text, _ = python_signatures([tool.definition()])
    [function] = ast.parse(text).body
    assert isinstance(function, ast.AsyncFunctionDef)
    params = {a.arg: ast.unparse(a.annotation) for a in function.args.args if a.annotation}
    assert params == {
        "color": "Literal['red', 'blue']",
        "box": "dict",
        "boxes": "list[dict]",
        "tint": "Literal['red', 'blue'] | None",
    }
    doc = (ast.get_docstring(function) or "").splitlines()
    assert "box ({w: int, h?: int}): The box to paint." in doc
    assert "boxes (list[{w: int, h?: int}])" in doc


def test_the_listing_parses_whatever_the_parameter_names_and_descriptions_hold() -> None:

    odd = {
        "C:\\Users": {"type": "string", "description": "a path"},
        'a"""b': {"type": "object", "properties": {"k": {"type": "string"}}},
    }
    text, _ = python_signatures(
        [
            {
                "function": {
                    "name": "t",
                    "description": "Do it.\x00",
                    "parameters": {"type": "object", "properties": odd},
                }
            }
        ]
    )
    # Before: "truncated \\UXXXXXXXX escape", an early end of the docstring, and
    # "source code string cannot contain null bytes".
    ast.parse(text)
    assert "C:\\\\Users: a path" in text


class Login(pydantic.BaseModel):
    user: str = "guest"
    key: str = pydantic.Field("sk-excluded", exclude=True)
    password: str = pydantic.Field("sk-hidden", repr=False)


@dataclasses.dataclass
class Session:
    token: str = dataclasses.field(default="sk-dataclass", repr=False)


class Account(pydantic.BaseModel):
    login: Login = Login()
    sessions: list[Session] = dataclasses.field(default_factory=lambda: [Session()])


def test_a_default_kept_out_of_dumps_or_reprs_is_not_in_the_output_schema() -> None:
    # The output schema (code mode's Returns: line) showed the defaults the parameters
    # already hid: a repr=False field's, and a default holding a model with one.
    def account() -> Account:
        """The account."""
        return Account()

    made = _tool(account)
    assert "sk-" not in repr(made.output_schema), made.output_schema
    login = made.output_schema["$defs"]["Login"]
    assert login["properties"]["user"]["default"] == "guest"  # an ordinary default stays
    assert login["required"] == ["user", "password"]  # the result still holds each key
    assert "sk-" not in python_signatures([made.definition()], {"account": made.output_schema})[0]
    assert _received(made)["login"] == {"user": "guest", "password": "sk-hidden"}
