from __future__ import annotations

import dataclasses
import datetime
import json
import math
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, ConfigDict, Field, Json, SecretStr, Strict

from agcore_tools import FunctionTool, InvalidArgumentsError, ToolContext, ToolError
from agcore_tools.schema import function_schema, parse_docstring


def test_required_optional_and_defaults() -> None:
    def f(a: int, b: str = "x", c: float | None = None) -> None: ...

    schema = function_schema(f).parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["a"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["a"] == {"type": "integer"}
    assert schema["properties"]["b"] == {"type": "string", "default": "x"}


def test_no_title_noise_anywhere_but_a_property_named_title_survives() -> None:
    class Address(BaseModel):
        street: str
        title: str

    def f(title: str, address: Address) -> None: ...

    schema = function_schema(f).parameters
    assert "title" in schema["properties"]
    assert "title" in schema["$defs"]["Address"]["properties"]

    def walk(node: Any, inside_properties: bool = False) -> None:
        if isinstance(node, dict):
            if not inside_properties:
                assert "title" not in node, node
            for key, value in node.items():
                walk(value, inside_properties=key in ("properties", "$defs"))
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)


def test_a_title_key_inside_a_default_or_an_example_is_data_and_stays() -> None:
    class Book(BaseModel):
        title: str

    example = {"title": "Dune", "author": "Herbert"}

    def f(
        book: Annotated[Book, Field(examples=[example])],
        meta: dict[str, str] = {"title": "untitled", "lang": "en"},  # noqa: B006
        kind: Literal["title", "body"] = "title",
    ) -> None: ...

    properties = function_schema(f).parameters["properties"]
    assert properties["book"]["examples"] == [example]
    assert properties["meta"]["default"] == {"title": "untitled", "lang": "en"}
    assert properties["kind"] == {"enum": ["title", "body"], "type": "string", "default": "title"}


def test_a_parameter_named_like_a_schema_keyword_is_cleaned_as_any_other() -> None:
    # Before: a parameter named "properties" (Notion, CRM, graph tools) had its own
    # schema read as a map of names: its "title" keyword stayed and the "title" key of
    # its default was dropped ({"title": "Untitled"} shown to the model as {}).
    untitled = {"title": "Untitled"}

    def f(
        properties: dict[str, str] = untitled,
        definitions: dict[str, str] = untitled,
        other: dict[str, str] = untitled,
    ) -> None: ...

    expected = {"additionalProperties": {"type": "string"}, "default": untitled, "type": "object"}
    assert function_schema(f).parameters["properties"] == {
        "properties": expected,
        "definitions": expected,
        "other": expected,
    }


class Plugin:
    pass


def test_a_schema_allows_only_what_validation_takes() -> None:
    # Before: dict[int, str] allowed any key, though only integer-like ones validate;
    # type[Plugin] was {} (any value), though no JSON value validates.
    def set_scores(scores: dict[int, str]) -> None: ...

    built = function_schema(set_scores)
    assert built.parameters["properties"]["scores"] == {
        "additionalProperties": {"type": "string"},
        "propertyNames": {"pattern": "^-?[0-9]+$"},
        "type": "object",
    }
    built.model.model_validate({"scores": {"10": "a", "-3": "b"}})  # what the pattern allows

    def load(kind: type[Plugin]) -> None: ...

    with pytest.raises(ToolError) as info:
        function_schema(load)
    assert str(info.value).startswith(
        "cannot make tool 'load': parameter 'kind' has type type[tests.test_schema.Plugin], "
        "which cannot come from a model's JSON arguments"
    )


def test_a_field_given_as_the_default_is_the_parameters_field() -> None:
    # FastAPI's style: `limit: int = Field(10, ge=1)`. The Field is not the value.
    def search(
        query: str = Field(description="What to look for."),
        limit: int | None = Field(None, ge=1, description="At most this many."),
        tags: list[str] = Field(default_factory=list),  # noqa: B008
    ) -> str:
        return f"{query} {limit!r} {tags!r}"

    built = function_schema(search)
    properties = built.parameters["properties"]
    assert built.parameters["required"] == ["query"]
    assert properties["query"] == {"type": "string", "description": "What to look for."}
    assert properties["limit"]["description"] == "At most this many."
    assert properties["limit"]["anyOf"][0] == {"type": "integer", "minimum": 1}
    assert built.model.model_validate({"query": "q"}).model_dump() == {
        "query": "q", "limit": None, "tags": []
    }  # fmt: skip
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        built.model.model_validate({"query": "q", "limit": 0})


def test_descriptions_from_docstring_and_annotated_which_wins() -> None:
    def f(
        city: Annotated[str, Field(description="From Annotated.")],
        days: int = 1,
    ) -> None:
        """Forecast for a city.

        Longer explanation that
        wraps across lines.

        Args:
            city: From the docstring (loses).
            days (int): How many days,
                at most 7.

        Returns:
            Nothing.
        """

    schema = function_schema(f)
    assert (
        schema.description == "Forecast for a city.\n\nLonger explanation that wraps across lines."
    )
    props = schema.parameters["properties"]
    assert props["city"]["description"] == "From Annotated."
    assert props["days"]["description"] == "How many days, at most 7."


def test_context_parameter_is_injected_not_exposed() -> None:
    def f(q: str, ctx: ToolContext) -> None: ...

    def g(q: str, ctx: Optional[ToolContext] = None) -> None: ...  # noqa: UP045

    def h(q: str, ctx: ToolContext | None = None) -> None: ...

    for func in (f, g, h):
        schema = function_schema(func)
        assert schema.context_param == "ctx"
        assert list(schema.parameters["properties"]) == ["q"]


def test_rich_types_enum_literal_dataclass_list() -> None:
    class Color(Enum):
        RED = "red"

    @dataclass
    class Point:
        x: int
        y: int

    def f(color: Color, mode: Literal["a", "b"], pts: list[Point]) -> None: ...

    props = function_schema(f).parameters["properties"]
    assert props["mode"]["enum"] == ["a", "b"]
    assert props["pts"]["type"] == "array"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(*args: int) -> None: ...", r"'\*args' is not supported"),
        ("def f(**kw: int) -> None: ...", r"'\*\*kw' is not supported"),
        ("def f(x) -> None: ...", "'x' has no type annotation"),
        (
            "def f(x: 'Missing') -> None: ...",
            r"parameter 'x' has annotation .*'Missing'.*, which does not resolve \(name 'Missing'",
        ),
        (
            "import typing\ndef f(q: str, fn: typing.Callable[[str], str] = str) -> None: ...",
            r"parameter 'fn' has type Callable\[\[str\], str\], which cannot come from",
        ),
    ],
)
def test_unsupported_signatures_fail_early_and_clearly(source: str, message: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(ToolError, match=message) as info:
        function_schema(namespace["f"])
    assert "cannot make tool 'f'" in str(info.value)


def test_parameter_names_pydantic_reserves_still_work() -> None:
    def f(schema: str, model_config: int, json: bool = False) -> None: ...

    result = function_schema(f)
    assert list(result.parameters["properties"]) == ["schema", "model_config", "json"]
    assert result.parameters["required"] == ["schema", "model_config"]


def _numpy_style(city: str, days: int = 3) -> str:
    """Forecast for a city.

    Parameters
    ----------
    city : str
        The city name.
    days : int, optional
        Number of days,
        at most 7.

    Returns
    -------
    str
        The forecast.
    """
    return city


def _sphinx_style(city: str, days: int = 3) -> str:
    """Forecast for a city.

    :param city: The city name.
    :type city: str
    :param int days: Number of days,
        at most 7.
    :returns: The forecast.
    :rtype: str
    """
    return city


def _epydoc_style(city: str, days: int = 3) -> str:
    """Forecast for a city.

    @param city: The city name.
    @param days: Number of days, at most 7.
    @return: The forecast.
    """
    return city


@pytest.mark.parametrize("func", [_numpy_style, _sphinx_style, _epydoc_style])
def test_numpy_and_sphinx_docstrings_are_read_as_google_ones_are(func: Any) -> None:
    # Read as Google's, the model got "Parameters ---------- city : str The city name..."
    # as the description and no parameter text.
    built = function_schema(func)
    assert built.description == "Forecast for a city."
    assert built.parameters["properties"]["city"]["description"] == "The city name."
    assert built.parameters["properties"]["days"]["description"] == "Number of days, at most 7."


def _numpy_shared(scale: float, x: float, y: float) -> str:
    """Move the cursor.

    Parameters
    ----------
    scale : float
        Zoom factor.
    x, y : float
        Target coordinates
        in pixels.
    """
    return "ok"


def _google_shared(scale: float, x: float, y: float) -> str:
    """Move the cursor.

    Args:
        scale (float): Zoom factor.
        x, y (float): Target coordinates
            in pixels.
    """
    return "ok"


@pytest.mark.parametrize("func", [_numpy_shared, _google_shared], ids=["numpy", "google"])
def test_parameters_documented_on_one_line_each_get_the_description(func: Any) -> None:
    # "x, y : float" was not read as an entry: its text was glued onto the previous
    # parameter's description, and x and y got none.
    props = function_schema(func).parameters["properties"]
    assert props["scale"]["description"] == "Zoom factor."
    assert (
        props["x"]["description"] == props["y"]["description"] == ("Target coordinates in pixels.")
    )


def _google_paragraphs(city: str, days: int = 3) -> str:
    """Forecast for a city.

    Args:
        city: The city name.

            Any spelling the geocoder knows.
        days: Number of days.

        Not indented under an entry: no entry's text.
    """
    return city


def test_a_google_entry_continued_after_a_blank_line_keeps_its_second_paragraph() -> None:
    # Before: a blank line ended the entry, and its second paragraph was dropped.
    props = function_schema(_google_paragraphs).parameters["properties"]
    assert props["city"]["description"] == "The city name. Any spelling the geocoder knows."
    assert props["days"]["description"] == "Number of days."


def test_a_rule_under_plain_text_is_not_a_section() -> None:
    doc = parse_docstring("Summary.\n\nA heading of mine\n---\nMore text.")
    assert doc.description == "Summary.\n\nA heading of mine --- More text."
    assert doc.params == {}


def test_lists_tables_and_examples_keep_their_lines_and_wrapped_text_is_joined() -> None:
    doc = parse_docstring(
        """Search the index.

        Use it for:
        - finding documents that
          mention a term
        * listing tags
        1. first
        2) second

        | field | meaning |
        | q | the query |

        >>> search("cats")
        ['a.txt']

        Wrapped prose
        goes on one line.
        """
    )
    # Before, each paragraph became one line: "Use it for: - finding documents ...".
    assert doc.description == (
        "Search the index.\n\n"
        "Use it for:\n- finding documents that mention a term\n* listing tags\n"
        "1. first\n2) second\n\n"
        "| field | meaning |\n| q | the query |\n\n"
        ">>> search(\"cats\")\n['a.txt']\n\nWrapped prose goes on one line."
    )


@pytest.mark.parametrize(
    ("doc", "description"),
    [
        # Prose wrapped before a "+" or a "1." is prose, not a list.
        (
            "Sum a and b, where the\n+ operator is elementwise.",
            "Sum a and b, where the + operator is elementwise.",
        ),
        (
            "Pages are numbered from\n1. Larger values wrap.",
            "Pages are numbered from 1. Larger values wrap.",
        ),
        ("Reads a|b where a\n| b means or.", "Reads a|b where a | b means or."),
        # An example keeps its continuation and output lines.
        (
            "Count.\n\n>>> for i in range(2):\n...     print(i)\n0\n1",
            "Count.\n\n>>> for i in range(2):\n... print(i)\n0\n1",
        ),
        # Two or more items or rows in a row are a list or a table, whatever comes before.
        ("Modes\n- fast: quick\n- slow: careful", "Modes\n- fast: quick\n- slow: careful"),
        ("Steps\n1. fetch\n2. parse", "Steps\n1. fetch\n2. parse"),
        ("Rates\n| a | b |\n| 1 | 2 |", "Rates\n| a | b |\n| 1 | 2 |"),
    ],
)
def test_wrapped_prose_is_not_read_as_structure(doc: str, description: str) -> None:
    assert parse_docstring(doc).description == description


def test_docstring_parser_tolerates_no_sections_and_none() -> None:
    assert parse_docstring(None).description == ""
    doc = parse_docstring("Just a line.")
    assert (doc.description, doc.params) == ("Just a line.", {})


def test_nested_models_are_closed_unless_they_allow_extra_keys() -> None:
    from pydantic import ConfigDict

    class Address(BaseModel):
        street: str

    class Labels(BaseModel):
        model_config = ConfigDict(extra="allow")

    def f(home: Address, work: Address | None = None, labels: Labels | None = None) -> None: ...

    result = function_schema(f)
    assert result.parameters["$defs"]["Address"]["additionalProperties"] is False
    assert result.parameters["$defs"]["Labels"]["additionalProperties"] is True
    assert result.plan is not None  # unknown keys of an Address are reported per call


def test_methods_partials_and_callable_objects_are_read_through() -> None:
    import functools

    class Shop:
        def buy(self, item: str, count: int = 1) -> None:
            """Buy something.

            Args:
                item: What to buy.
            """

    in_body = function_schema(Shop.buy)  # a function defined in a class body
    assert in_body.method and list(in_body.parameters["properties"]) == ["item", "count"]
    bound = function_schema(Shop().buy)
    assert not bound.method and list(bound.parameters["properties"]) == ["item", "count"]
    partial = function_schema(functools.partial(Shop().buy, count=2))
    assert partial.name == "buy" and list(partial.parameters["properties"]) == ["item"]
    assert partial.parameters["properties"]["item"]["description"] == "What to buy."

    def outer_self(self: int) -> None:  # not in a class body: an ordinary parameter
        """Self is just a name here."""

    assert list(function_schema(outer_self).parameters["properties"]) == ["self"]


class _Colour(Enum):
    RED = "red"
    BLUE = "blue"


class _StrictMeeting(BaseModel):
    model_config = ConfigDict(strict=True)
    title: str
    start: datetime.datetime
    colour: _Colour
    ref: uuid.UUID
    size: tuple[int, int]


def _book(
    meeting: _StrictMeeting,
    day: Annotated[datetime.date, Strict()],
    copies: int = Field(1, strict=True),
) -> str:
    """Book a meeting."""
    return f"{meeting.start:%H:%M} {meeting.colour.value} {meeting.size} {day:%d} {copies}"


async def test_strict_models_and_fields_take_arguments_as_json_writes_them() -> None:
    # A strict model validated in Python mode wants a datetime, an Enum member, a UUID
    # and a tuple: no model could send one, so every call failed.
    tool = FunctionTool(_book)
    args = {
        "meeting": {
            "title": "sync",
            "start": "2025-03-01T10:00:00",
            "colour": "red",
            "ref": "12345678-1234-5678-1234-567812345678",
            "size": [2, 3],
        },
        "day": "2025-03-04",
        "copies": 2,
    }
    assert await tool.execute(args, ToolContext()) == "10:00 red (2, 3) 04 2"
    with pytest.raises(InvalidArgumentsError) as info:
        await tool.execute({**args, "day": "soon", "copies": "2"}, ToolContext())
    assert [field for field, _ in info.value.errors] == ["day", "copies"]


def _keep(items: list[Any], copies: int = Field(1, strict=True)) -> str:
    """Keep some items."""
    return f"kept {copies}"


@pytest.mark.parametrize("depth", [220, 5_000])
async def test_arguments_too_deep_for_json_mode_get_python_modes_verdict(depth: int) -> None:
    # Read again as JSON for the strict field, the arguments were walked by recursion
    # (and written and read by pydantic's JSON, which has depth limits of its own): a
    # RecursionError, a failed tool, where the model could have fixed its call.
    items: list[Any] = []
    for _ in range(depth):
        items = [items]
    tool = FunctionTool(_keep)
    with pytest.raises(InvalidArgumentsError) as info:
        await tool.execute({"items": items, "copies": "2"}, ToolContext())
    assert [field for field, _ in info.value.errors] == ["copies"]
    assert await tool.execute({"items": items, "copies": 2}, ToolContext()) == "kept 2"


async def test_arguments_holding_themselves_get_python_modes_verdict() -> None:
    # A Python caller's list inside itself: the walk must end, and JSON cannot hold it.
    items: list[Any] = [1]
    items.append(items)
    tool = FunctionTool(_keep)
    with pytest.raises(InvalidArgumentsError) as info:
        await tool.execute({"items": items, "copies": "2"}, ToolContext())
    assert [field for field, _ in info.value.errors] == ["copies"]


def _unpack(payload: Json[dict[str, int]], day: Annotated[datetime.date, Strict()]) -> str:
    """Unpack a payload."""
    return f"unpacked {day}"


async def test_a_json_fields_bad_text_is_json_modes_verdict_not_taken_for_too_deep() -> None:
    # Read again as JSON for the strict field, a Json[...] field's bad text is refused
    # at that field: JSON mode's verdict (the day as JSON writes it is fine there), not
    # Python mode's, as if the arguments were too deep for JSON.
    tool = FunctionTool(_unpack)
    with pytest.raises(InvalidArgumentsError) as info:
        await tool.execute({"payload": "{bad", "day": "2024-01-02"}, ToolContext())
    assert [field for field, _ in info.value.errors] == ["payload"]
    assert await tool.execute({"payload": '{"a": 1}', "day": "2024-01-02"}, ToolContext()) == (
        "unpacked 2024-01-02"
    )


def _search(query: str, max_price: float = math.inf) -> str:
    """Search, under a price."""
    return f"{query} {max_price}"


async def test_a_default_json_cannot_write_is_left_out_of_the_schema() -> None:
    # "default": Infinity in the schema made every request offering the tool fail to
    # encode ("Out of range float values are not JSON compliant"), naming no tool.
    tool = FunctionTool(_search)
    properties = tool.parameters["properties"]
    assert properties["max_price"] == {"type": "number"}
    json.dumps(tool.definition(), allow_nan=False)
    assert await tool.execute({"query": "tea"}, ToolContext()) == "tea inf"


def _days_until(day: datetime.date) -> int:
    """Days until a day."""
    return (day - datetime.date(2026, 12, 1)).days


def test_a_module_level_function_made_a_tool_in_a_function_ignores_its_locals() -> None:
    # Its string annotation resolved in the caller's locals first: a local `datetime`
    # (a string here) made "datetime.date" fail to resolve, or resolve to another type.
    datetime = "2026-12-07"  # noqa: F841
    tool = FunctionTool(_days_until)
    assert tool.parameters["properties"]["day"] == {"type": "string", "format": "date"}


def test_a_google_type_with_parentheses_keeps_its_description() -> None:
    doc = parse_docstring(
        "Place a marker.\n\nArgs:\n    point (tuple(int, int)): Where it goes.\n    label (str): Its text.\n"
    )
    assert doc.params == {"point": "Where it goes.", "label": "Its text."}


class _Vault(BaseModel):
    model_config = ConfigDict(strict=True)
    token: SecretStr


def _unlock(vault: _Vault, ref: str | uuid.UUID) -> str:
    """Unlock a vault."""
    return f"{vault.token.get_secret_value()} {type(ref).__name__}"


async def test_arguments_python_mode_takes_are_never_read_as_json() -> None:
    # Read as JSON text, a caller's SecretStr came out masked ("**********"), and the
    # model's UUID string took the union's other branch.
    tool = FunctionTool(_unlock)
    args = {"vault": _Vault(token=SecretStr("hunter2")), "ref": str(uuid.UUID(int=1))}
    assert await tool.execute(args, ToolContext()) == "hunter2 str"


def test_both_kinds_of_tool_join_their_argument_problems_as_before() -> None:
    # One function in the schema layer joins them for both (it was written twice, in
    # _invalid_args and in _validate). An MCP tool's problem with no field is its
    # message alone, and its search that stopped counts "at least"; a function tool's
    # problems are all found, and one with no field is named "(arguments)".
    from agcore_tools.schema._problems import join_problems
    from agcore_tools.schema._validate import check_with, schema_check

    assert join_problems([(None, "too many keys"), ("b", "bad")]) == "too many keys; b: bad"
    assert join_problems([("a", "bad")], at_least=True) == "a: bad; and at least 1 more"
    many = [(f"n.{i}", "bad") for i in range(InvalidArgumentsError.LISTED + 3)]
    assert join_problems(many).endswith("n.19: bad; and 3 more")
    assert join_problems(many, at_least=True).endswith("n.19: bad; and at least 3 more")

    check = schema_check(
        {"type": "object", "required": ["a"], "properties": {"b": {"type": "integer"}}}
    )
    with pytest.raises(InvalidArgumentsError) as mcp:
        check_with("t", check, {"b": "x"})
    assert mcp.value.reason == "'a' is a required property; b: 'x' is not of type 'integer'"

    def count(n: int) -> int:
        """Count."""
        return n

    with pytest.raises(InvalidArgumentsError) as function:
        FunctionTool(count).check_arguments({"n": "x", "": 1})
    assert function.value.reason == (
        "n: Input should be a valid integer, unable to parse string as an integer"
        " (got 'x'); (arguments): Extra inputs are not permitted"
    )


class _Account(BaseModel):
    user: str
    key: str = Field("sk-nested-excluded", exclude=True)
    password: str = Field("sk-nested-hidden", repr=False)


@dataclass
class _Endpoint:
    url: str
    token: str = dataclasses.field(default="sk-dataclass-hidden", repr=False)


def _call(
    account: _Account,
    endpoint: _Endpoint,
    api_key: Annotated[str, Field("sk-top-excluded", exclude=True)],
    secret: str = Field("sk-top-hidden", repr=False),
    limit: int = 3,
) -> str:
    """Call an endpoint."""
    return " ".join([account.key, account.password, endpoint.token, api_key, secret])


async def test_a_default_kept_out_of_dumps_or_reprs_is_not_in_the_definition() -> None:
    # Field(exclude=True) and repr=False mark a value not for every eye, often a key;
    # the definition the model reads (and code mode lists, and search ranks) carried
    # their defaults, strict or not. The fields stay, and the model may still send them.
    tool = FunctionTool(_call)
    for strict in (False, True):
        sent = json.dumps(FunctionTool(_call, strict=strict).definition())
        assert "sk-" not in sent, sent
    parameters = tool.parameters
    assert sorted(parameters["properties"]) == ["account", "api_key", "endpoint", "limit", "secret"]
    assert parameters["properties"]["api_key"] == {"type": "string"}
    assert parameters["properties"]["limit"] == {"type": "integer", "default": 3}
    assert parameters["$defs"]["_Account"]["properties"]["key"] == {"type": "string"}
    assert parameters["required"] == ["account", "endpoint"]
    # The defaults still apply, and what the model sends still counts.
    args = {"account": {"user": "a"}, "endpoint": {"url": "u"}}
    assert await tool.execute(args, ToolContext()) == (
        "sk-nested-excluded sk-nested-hidden sk-dataclass-hidden sk-top-excluded sk-top-hidden"
    )
    args = {"account": {"user": "a", "key": "k"}, "endpoint": {"url": "u"}, "api_key": "x"}
    assert (await tool.execute(args, ToolContext())).split()[::3] == ["k", "x"]


class _Login(BaseModel):
    """Log in."""

    user: str
    key: str = Field("sk-model-excluded", exclude=True)
    password: str = Field("sk-model-hidden", repr=False)


@dataclass
class _Session:
    """Open a session."""

    user: str
    token: str = dataclasses.field(default="sk-dataclass-hidden", repr=False)


async def test_a_record_class_made_a_tool_keeps_its_hidden_defaults_out_too() -> None:
    # The class's signature gives plain defaults, without the field's mark.
    login, session = FunctionTool(_Login), FunctionTool(_Session)
    for tool in (login, session):
        assert "sk-" not in json.dumps(tool.definition()), tool.definition()
    assert login.parameters["properties"]["key"] == {"type": "string"}
    assert session.parameters["properties"]["token"] == {"type": "string"}
    # The defaults still apply (the result is the instance dumped: no excluded key).
    made = await login.execute({"user": "a"}, ToolContext())
    assert made == {"user": "a", "password": "sk-model-hidden"}
    made = await session.execute({"user": "a", "token": "t"}, ToolContext())
    assert made == {"user": "a", "token": "t"}


class _Settings(BaseModel):
    region: str = "eu"
    api_key: str = Field("sk-in-a-default", repr=False)


@dataclass
class _Proxy:
    url: str = "http://proxy"
    password: str = Field("sk-stdlib-dataclass-field", repr=False)  # pydantic reads it


_SETTINGS = _Settings()
_FALLBACKS = (_Settings(region="us"),)


def _connect(
    proxy: _Proxy,
    settings: _Settings = _SETTINGS,
    fallbacks: tuple[_Settings, ...] = _FALLBACKS,
    plain: _Proxy | None = None,
    region: str = "eu",
) -> str:
    """Connect."""
    return " ".join([proxy.password, settings.api_key, fallbacks[0].api_key])


async def test_a_default_holding_a_hidden_value_is_not_in_the_definition() -> None:
    # pydantic writes a model default as its dump, repr=False fields included; and a
    # stdlib dataclass's `= Field(repr=False)` is no dataclasses.field(repr=False).
    tool = FunctionTool(_connect)
    for strict in (False, True):
        sent = json.dumps(FunctionTool(_connect, strict=strict).definition())
        assert "sk-" not in sent, sent
    properties = tool.parameters["properties"]
    assert "default" not in properties["settings"] and "default" not in properties["fallbacks"]
    assert properties["region"]["default"] == "eu"  # an ordinary default stays
    assert tool.parameters["$defs"]["_Settings"]["properties"]["region"]["default"] == "eu"
    assert tool.parameters["required"] == ["proxy"]
    assert await tool.execute({"proxy": {}}, ToolContext()) == (
        "sk-stdlib-dataclass-field sk-in-a-default sk-in-a-default"
    )


_PASSWORD = SecretStr("sk-secret-str")
_KEYS = (SecretStr("sk-in-a-list"),)


def _sign_in(
    user: str,
    password: SecretStr = _PASSWORD,
    keys: tuple[SecretStr, ...] = _KEYS,
    retries: int = 2,
) -> str:
    """Sign in."""
    return " ".join([password.get_secret_value(), *(k.get_secret_value() for k in keys)])


async def test_a_secret_default_is_not_shown_as_stars_for_the_model_to_send_back() -> None:
    # pydantic writes a SecretStr default as "**********": a model that sent back the
    # default it read replaced the secret with the stars.
    tool = FunctionTool(_sign_in)
    properties = tool.parameters["properties"]
    assert "default" not in properties["password"] and "default" not in properties["keys"]
    assert properties["retries"]["default"] == 2
    assert "*****" not in json.dumps(tool.definition())
    assert await tool.execute({"user": "ann"}, ToolContext()) == "sk-secret-str sk-in-a-list"
