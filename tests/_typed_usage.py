"""An app written the way the README and the guides write it, for mypy --strict.

tests/test_package.py type-checks this file (with examples/openai_chat_loop.py and
examples/openai_responses_loop.py). Each ``# type: ignore[...]`` marks a bug a type
checker must catch: under --strict an ignore that silences nothing is itself an error.
Nothing runs on import.
"""

# mypy: enable-error-code="deprecated"
# (deprecated APIs are marked for checkers: a use of one is a bug to catch too)

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from typing_extensions import assert_type

from agcore_tools import (
    BaseTool,
    ChatResponse,
    CycleConfig,
    EventStream,
    FunctionTool,
    LlmCycle,
    McpClient,
    PermissionChecker,
    PermissionConfig,
    StdioTransport,
    SyncEventStream,
    ToolContext,
    ToolRegistry,
    TurnComplete,
    tool,
)
from agcore_tools.temporal import ToolActivityOptions
from agcore_tools.testing import Cassette, CassetteMcpClient

registry = ToolRegistry(
    PermissionChecker(PermissionConfig(allowed=["read"], denied=["shell"], ask=["write"]))
)


@registry.tool
def get_weather(city: str) -> dict[str, Any]:
    """The current weather in a city."""
    return {"city": city, "celsius": 18}


@registry.tool(permissions=["read"], tags=["weather"])
def celsius(city: str) -> float:
    """Degrees Celsius in a city."""
    return 18.0


@tool(registry=registry, permissions=["read"])
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def decorated_functions_keep_their_types() -> None:
    weather: dict[str, Any] = get_weather("Lima")
    degrees: float = celsius("Lima")
    typed: FunctionTool[[str], float] = celsius
    print(weather, degrees, typed)
    get_weather(42)  # type: ignore[arg-type]
    wrong: str = celsius("Lima")  # type: ignore[assignment]
    print(wrong)


class Catalog:
    prices: ClassVar[dict[str, int]] = {"x": 3}

    @tool(registry=registry)
    @classmethod
    def lookup(cls, sku: str) -> int:
        """The price of an item."""
        return cls.prices[sku]

    @registry.tool
    @classmethod
    def in_stock(cls, sku: str) -> bool:
        """Whether an item is in stock."""
        return sku in cls.prices

    @registry.tool(tags=["catalog"])
    @classmethod
    def skus(cls) -> list[str]:
        """Every item's SKU."""
        return list(cls.prices)


def a_classmethod_tool_is_called_without_cls() -> None:
    # @tool above @classmethod, as the docs order them: cls is bound, not a parameter.
    lookup: FunctionTool[[str], int] = Catalog.lookup
    in_stock: FunctionTool[[str], bool] = Catalog.in_stock
    assert_type(Catalog.skus, FunctionTool[[], list[str]])
    price: int = Catalog.lookup("x")
    print(lookup, in_stock, price, Catalog.in_stock(sku="x"), Catalog.skus())
    Catalog.lookup(Catalog, "x")  # type: ignore[call-arg, arg-type]


@tool(registry=registry)
def describe(value: Any, style: str = "short") -> str:
    """Describe any JSON value."""
    return f"{style}: {value!r}"


@registry.tool
def store(key: Any, value: int) -> bool:
    """Store a value under a key."""
    return bool(key) and value > 0


def a_first_parameter_typed_any_is_kept() -> None:
    # The error for an unannotated parameter says "use typing.Any": Any also fits the
    # type[T] a classmethod's cls has, which must not drop the parameter.
    assert_type(describe({"a": 1}, style="long"), str)
    assert_type(store("k", 1), bool)
    describe()  # type: ignore[call-arg]
    wrong: str = store("k", 1)  # type: ignore[assignment]
    print(wrong)


class Notes:
    def __init__(self) -> None:
        self.lines: list[str] = []

    @tool
    def add_note(self, text: str) -> int:
        """Add a note; return how many there are."""
        self.lines.append(text)
        return len(self.lines)

    @tool
    async def search(self, query: str, limit: int = 5) -> list[str]:
        """Search the notes."""
        return [line for line in self.lines if query in line][:limit]

    @tool
    def pin(self, line: int, /) -> str:
        """Pin a note."""
        return self.lines[line]

    @tool(registry=registry)
    @staticmethod
    def shout(text: str, /) -> str:
        """Upper-case a note."""
        return text.upper()


async def a_method_tool_on_its_instance_keeps_its_parameters() -> None:
    notes = Notes()
    assert_type(notes.pin, FunctionTool[[int], str])
    assert_type(Notes.pin, FunctionTool[[Notes, int], str])
    assert_type(notes.add_note("a"), int)
    assert_type(Notes.add_note(notes, "a"), int)
    assert_type(await notes.search("a", limit=2), list[str])
    assert_type(notes.shout, FunctionTool[[str], str])
    assert_type(Notes.shout, FunctionTool[[str], str])
    assert_type(Catalog().lookup("x"), int)
    registry.register(notes.add_note)
    notes.add_note(42)  # type: ignore[arg-type]
    notes.add_note("a", "b")  # type: ignore[call-arg]
    await notes.search(limit="ten")  # type: ignore[call-arg, arg-type]
    Catalog().lookup(Catalog, "x")  # type: ignore[call-arg, arg-type]


def the_original_function_keeps_its_signature() -> None:
    assert_type(Notes.shout.func, Callable[[str], str])
    assert_type(get_weather.func("Lima"), dict[str, Any])
    get_weather.func(42)  # type: ignore[arg-type]


def settings_change_as_the_docs_replace_them(config: CycleConfig) -> None:
    more = replace(config, limits=replace(config.limits, max_turns=5))
    hotter = replace(config, request_options={**config.request_options, "temperature": 1})
    assert_type(more.max_turns, int | None)
    # Runs, but max_turns is an __init__ keyword, not a field: the docs avoid it.
    flat = replace(config, max_turns=5)  # type: ignore[call-arg]
    print(hotter, flat)


def approval_from_settings() -> bool | None:
    return None


@tool(registry=registry, needs_approval=approval_from_settings())
def delete(path: str) -> str:
    """Delete a file."""
    return path


@registry.tool(needs_approval=None)
def rename(path: str, new: str) -> str:
    """Rename a file."""
    return new


def needs_approval_none_is_false_and_keeps_the_types() -> None:
    assert_type(delete("a"), str)
    assert_type(rename("a", "b"), str)
    delete(42)  # type: ignore[arg-type]


class AuditedClient(McpClient):
    def audit_log(self) -> list[str]:
        return []


class MyCycle(LlmCycle):
    def transcript(self) -> str:
        return ""


async def a_subclass_keeps_its_type_in_with(config: CycleConfig) -> None:
    async with AuditedClient("fs", StdioTransport("server")) as client:
        assert_type(client, AuditedClient)
    async with MyCycle(config) as cycle:
        assert_type(cycle, MyCycle)
        async with cycle.submit_stream("hi") as events:
            assert_type(events, EventStream)
    with MyCycle(config) as sync_cycle:
        assert_type(sync_cycle, MyCycle)
        with sync_cycle.submit_stream_sync("hi") as sync_events:
            assert_type(sync_events, SyncEventStream)
    print(client.audit_log(), cycle.transcript(), sync_cycle.transcript())


def adapters_of(client: McpClient) -> list[BaseTool]:
    return client.into_tools(prefix=True)


async def a_cassette_client_goes_where_an_mcp_client_does(cassette: Cassette) -> None:
    # A test hands the cassette's client to the app's code, typed against McpClient.
    async with cassette.mcp(McpClient("fs", StdioTransport("server"))) as fs:
        assert_type(fs, CassetteMcpClient)
        registry.register_all(adapters_of(fs))
        print(fs.call_tool_sync("read", {"path": "a"}))
        adapters_of(cassette)  # type: ignore[arg-type]


async def deprecated_names_are_flagged(
    cycle: LlmCycle, client: McpClient, response: ChatResponse, turn: TurnComplete
) -> None:
    await cycle.aclose()  # type: ignore[deprecated]
    await client.list_tools()  # type: ignore[deprecated]
    client.list_tools_sync()  # type: ignore[deprecated]
    client.with_timeout(5)  # type: ignore[deprecated]
    registry.with_permission_checker(None)  # type: ignore[deprecated]
    print(response.stop_reason)  # type: ignore[deprecated]
    print(turn.reason)  # type: ignore[deprecated]
    print(turn.raw_reason)  # type: ignore[deprecated]
    print(CycleConfig("m").tool_timeout_secs)  # type: ignore[deprecated]
    print(CycleConfig("m").max_tool_result_bytes)  # type: ignore[deprecated]
    CycleConfig("m", tool_timeout_secs=5)  # type: ignore[deprecated]
    CycleConfig("m", max_tool_result_bytes=4096, temperature=0)  # type: ignore[deprecated]
    print(ToolActivityOptions(timeout=5).timeout_secs)  # type: ignore[deprecated]
    ToolActivityOptions(timeout_secs=5)  # type: ignore[deprecated]
    ToolContext("session-1")  # type: ignore[deprecated]
    print(ToolContext(session_id="session-1"), ToolActivityOptions(5))


def a_misspelt_option_is_caught() -> None:
    @registry.tool(permisions=["read"])  # type: ignore[call-overload, untyped-decorator]
    def typo(a: int) -> int:
        """Typo."""
        return a


async def chat_completions_drop_in(client: AsyncOpenAI) -> None:
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Weather?"}]
    while True:
        completion = await client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, tools=registry.definitions()
        )
        message = completion.choices[0].message
        if not message.tool_calls:
            break
        messages += await registry.run_tool_calls(message.tool_calls)


async def responses_drop_in(client: AsyncOpenAI) -> None:
    tools = registry.definitions(api="responses")
    response = await client.responses.create(model="gpt-4o-mini", input="Weather?", tools=tools)
    while outputs := await registry.run_tool_calls(response.output):
        print([output["call_id"] for output in outputs])
        response = await client.responses.create(
            model="gpt-4o-mini", input=outputs, previous_response_id=response.id, tools=tools
        )
