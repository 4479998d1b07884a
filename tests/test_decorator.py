from __future__ import annotations

import asyncio
import copy
import functools
import inspect
import pickle
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import pytest
from pydantic import BaseModel, Field, field_serializer

from agcore_tools import (
    AgcoreError,
    BaseTool,
    FunctionTool,
    Image,
    InvalidArgumentsError,
    Permission,
    PermissionChecker,
    PermissionConfig,
    RateLimit,
    ToolConfigError,
    ToolContext,
    ToolDefinitionError,
    ToolDefinitionWarning,
    ToolError,
    ToolExecutionError,
    ToolPolicy,
    ToolRegistry,
    ToolTimeoutError,
    _tool_result,
    default_registry,
    tool,
)
from agcore_tools._attachments import normalise
from agcore_tools._function_tool import ToolOptions
from agcore_tools._span_content import content_json
from agcore_tools._tool_result import jsonable, to_json

if TYPE_CHECKING:  # for type checkers only, as pandas or numpy types often are
    from decimal import Decimal


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry()


def test_bare_decorator_builds_a_callable_basetool(registry: ToolRegistry) -> None:
    with registry.as_default():

        @tool
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

    assert isinstance(add, BaseTool) and isinstance(add, FunctionTool)
    assert add(2, 3) == 5 and add(a=1, b=1) == 2
    assert add.__name__ == "add" and add.__doc__ == "Add two integers."
    assert add.name == "add" and add.description == "Add two integers."
    assert registry.get("add") is add


def test_options_are_applied(registry: ToolRegistry) -> None:
    @tool(
        name="fetch_page",
        description="Fetch a web page.",
        permissions=["network", Permission.custom("http:get")],
        tags=["web"],
        category="io",
        version="2",
        timeout=3,
        registry=registry,
    )
    async def fetch(url: str) -> str:
        return url

    assert fetch.name == "fetch_page" and fetch.description == "Fetch a web page."
    assert fetch.required_permissions == (Permission.NETWORK, Permission.custom("http:get"))
    entry = registry.entry("fetch_page")
    assert entry is not None
    assert (entry.tags, entry.category, entry.version) == (("web",), "io", "2")
    assert fetch.timeout == 3


def test_one_tag_as_a_string_is_one_tag_as_one_permission_name_is(registry: ToolRegistry) -> None:
    @registry.tool(tags="math", permissions="read")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    assert add.tags == ("math",) and add.required_permissions == (Permission.READ,)
    assert [entry.name for entry in registry.find_by_tag("math")] == ["add"]
    # The same through register(), which used to split it too.
    other = ToolRegistry()
    assert other.register(add, tags="arith").tags == ("arith",)


def test_registry_tool_method_bare_and_with_options(registry: ToolRegistry) -> None:
    @registry.tool
    def one() -> int:
        return 1

    @registry.tool(name="two_alias")
    def two() -> int:
        return 2

    assert registry.list_tools() == ["one", "two_alias"]
    assert "one" not in default_registry()


def test_registry_tool_types_the_same_keywords_as_tool_and_function_tool() -> None:
    # @registry.tool(**options) is typed by ToolOptions: a keyword added to FunctionTool
    # or @tool but not there would be refused by type checkers, so the lists must match.
    def keywords(func: Any) -> dict[str, str]:
        params = inspect.signature(func).parameters.values()
        return {p.name: p.annotation for p in params if p.kind is p.KEYWORD_ONLY}

    options = {k: getattr(v, "__forward_arg__", v) for k, v in ToolOptions.__annotations__.items()}
    decorated = keywords(tool)
    del decorated["registry"]
    assert options == keywords(FunctionTool.__init__) == decorated
    assert ToolOptions.__total__ is False


def _refund(order: int) -> str:
    """Refund an order."""
    return f"refunded {order}"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"needs_approval": 0},
            "a tool's needs_approval must be True, False, None or a function of the "
            "arguments and the context, got 0",
        ),
        (
            {"needs_approval": "no"},
            "a tool's needs_approval must be True, False, None or a function of the "
            "arguments and the context, got 'no'",
        ),
        ({"tags": 5}, "a tool's tags must be a str or an iterable of them, got int"),
        (
            {"tags": ["web", 5]},
            "a tool's tags must be a str or an iterable of them, got an item of type int",
        ),
        (
            {"permissions": 5},
            "a tool's permissions must be a str or Permission or an iterable of them, got int",
        ),
        (
            {"registry": "main"},
            "a tool's registry must be a ToolRegistry (or None for the active one), got str",
        ),
    ],
)
def test_an_option_of_the_wrong_kind_is_refused_naming_it(
    options: dict[str, Any], message: str
) -> None:
    # Before: needs_approval=0 was taken as a function (every call waited for an
    # approval); the others failed with a bare TypeError or AttributeError.
    with pytest.raises(ToolConfigError) as info:
        tool(_refund, **options)
    assert str(info.value) == message


def test_registry_tool_refuses_registry_and_unknown_options_as_they_are_given(
    registry: ToolRegistry,
) -> None:
    with pytest.raises(ToolConfigError, match=r"takes no registry=; use tool\(registry=") as info:
        registry.tool(registry=registry)  # type: ignore[call-overload]
    assert str(info.value).startswith("registry.tool() registers into its own registry")
    with pytest.raises(ToolConfigError, match="keyword 'permission': did you mean permissions="):
        registry.tool(permission=["read"])  # type: ignore[call-overload]
    with pytest.raises(ToolConfigError, match="keyword 'colour'; its keywords are category, "):
        registry.tool(colour="red")  # type: ignore[call-overload]
    with pytest.raises(ToolConfigError, match="registry must be a ToolRegistry"):
        tool(registry="main")  # type: ignore[call-overload]
    made = registry.tool(_refund, needs_approval=None)  # None: no approval, as False
    assert made.needs_approval is False


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda r: tool(timout=5), "tool() got an unknown keyword 'timout'"),  # type: ignore[call-overload]
        (lambda r: r.tool(timout=5), "registry.tool() got an unknown keyword 'timout'"),
        (lambda r: FunctionTool(_refund, timout=5), "FunctionTool() got an unknown"),  # type: ignore[call-arg]
        (lambda r: PermissionConfig(alowed=["read"]), "PermissionConfig() got an"),  # type: ignore[call-arg]
        (lambda r: ToolPolicy(conccurency=1), "ToolPolicy() got an unknown"),  # type: ignore[call-arg]
        (lambda r: RateLimit(5, pre=60), "RateLimit() got an unknown keyword 'pre'"),  # type: ignore[call-arg]
        (lambda r: ToolContext(sesion_id="u1"), "ToolContext() got an unknown"),  # type: ignore[call-overload]
        (
            lambda r: asyncio.run(r.run_tool_calls([], time_out=5)),
            "ToolRegistry.run_tool_calls() got an unknown keyword 'time_out'",
        ),
        (
            lambda r: r.run_tool_calls_sync([], time_out=5),
            "ToolRegistry.run_tool_calls_sync() got an unknown keyword 'time_out'",
        ),
        (lambda r: ToolRegistry(stict=True), "ToolRegistry() got an unknown keyword 'stict'"),  # type: ignore[call-arg]
        (
            lambda r: r.register(FunctionTool(_refund), tag=["billing"]),  # type: ignore[call-arg]
            "ToolRegistry.register() got an unknown keyword 'tag': did you mean tags=",
        ),
        (
            lambda r: r.register_all(tool=[FunctionTool(_refund)]),  # type: ignore[call-arg]
            "ToolRegistry.register_all() got an unknown keyword 'tool'",
        ),
        (
            lambda r: asyncio.run(r.invoke("refund", {}, context=ToolContext())),  # type: ignore[call-arg]
            "ToolRegistry.invoke() got an unknown keyword 'context': did you mean ctx=",
        ),
        (
            lambda r: r.invoke_sync("refund", {}, context=ToolContext()),  # type: ignore[call-arg]
            "ToolRegistry.invoke_sync() got an unknown keyword 'context'",
        ),
        (
            lambda r: asyncio.run(r.invoke_all([], timout=5)),  # type: ignore[call-arg]
            "ToolRegistry.invoke_all() got an unknown keyword 'timout'",
        ),
        (
            lambda r: r.invoke_as_completed([], timout=5),  # type: ignore[call-arg]
            "ToolRegistry.invoke_as_completed() got an unknown keyword 'timout'",
        ),
        (
            lambda r: r.definitions(unavailble=True),  # type: ignore[call-overload]
            "ToolRegistry.definitions() got an unknown keyword 'unavailble'",
        ),
        (
            lambda r: r.set_policy(ToolPolicy(concurrency=1), tags="db"),  # type: ignore[call-arg]
            "ToolRegistry.set_policy() got an unknown keyword 'tags': did you mean tag=",
        ),
        (
            lambda r: r.view(entires=[]),  # type: ignore[call-arg]
            "ToolRegistry.view() got an unknown keyword 'entires'",
        ),
    ],
    ids=[
        "tool",
        "registry.tool",
        "FunctionTool",
        "PermissionConfig",
        "ToolPolicy",
        "RateLimit",
        "ToolContext",
        "run_tool_calls",
        "run_tool_calls_sync",
        "ToolRegistry",
        "register",
        "register_all",
        "invoke",
        "invoke_sync",
        "invoke_all",
        "invoke_as_completed",
        "definitions",
        "set_policy",
        "view",
    ],
)
def test_a_misspelt_keyword_is_the_librarys_error_naming_the_right_one(
    registry: ToolRegistry, call: Callable[[ToolRegistry], object], message: str
) -> None:
    # Before: Python's bare TypeError, outside AgcoreError, naming no valid keyword,
    # except registry.tool()'s ToolConfigError, which was no TypeError: no one except
    # clause caught tool(timout=5) and registry.tool(timout=5) alike.
    with pytest.raises(TypeError) as info:
        call(registry)

    error = info.value
    assert isinstance(error, ToolConfigError) and isinstance(error, AgcoreError)
    assert str(error).startswith(message) and "\n" not in str(error)
    assert str(error).endswith("...?")  # did you mean <the right one>=...?
    assert len(registry) == 0


def test_a_keyword_to_a_registry_method_that_takes_none_is_the_librarys_error(
    registry: ToolRegistry,
) -> None:
    # Before: Python's bare TypeError, as for every registry method but run_tool_calls.
    with pytest.raises(TypeError) as info:
        registry.list_tools(all=True)  # type: ignore[call-arg]

    error = info.value
    assert isinstance(error, ToolConfigError) and isinstance(error, AgcoreError)
    assert (
        str(error) == "ToolRegistry.list_tools() got an unknown keyword 'all': it takes no keywords"
    )
    assert type(error.__cause__) is TypeError  # Python's, kept


def test_other_mistakes_in_a_call_keep_pythons_error() -> None:
    # Only a keyword no parameter takes is turned into the library's error: the
    # function never ran then, so the TypeError cannot be one it raised.
    with pytest.raises(TypeError, match="missing 1 required positional argument") as info:
        FunctionTool()  # type: ignore[call-arg]
    assert not isinstance(info.value, AgcoreError)


async def test_validation_errors_name_each_bad_field(registry: ToolRegistry) -> None:
    @registry.tool
    def book(city: str, nights: int, when: date) -> str:
        return f"{city} {nights} {when}"

    inv = await registry.invoke("book", {"nights": "many", "when": "2026-13-40", "extra": 1})
    assert not inv.ok
    error = inv.error
    assert isinstance(error, InvalidArgumentsError)
    fields = [name for name, _ in error.errors]
    assert fields == ["city", "nights", "when", "extra"]
    text = str(error)
    assert text.startswith("tool 'book' got invalid arguments: city: Field required")
    assert "nights: Input should be a valid integer" in text and "'many'" in text
    assert "extra: Extra inputs are not permitted" in text
    assert "\n" not in text


async def test_many_bad_items_list_the_first_problems_and_count_the_rest(
    registry: ToolRegistry,
) -> None:
    # A list of 100,000 bad items made 100,000 pairs in errors and a message of 9 MB.
    @registry.tool
    def total(items: list[int]) -> int:
        return sum(items)

    inv = await registry.invoke("total", {"items": ["x"] * 1000})
    error = inv.error
    assert isinstance(error, InvalidArgumentsError)
    assert error.errors[:2] == [
        (
            "items.0",
            "Input should be a valid integer, unable to parse string as an integer (got 'x')",
        ),
        (
            "items.1",
            "Input should be a valid integer, unable to parse string as an integer (got 'x')",
        ),
    ]
    assert len(error.errors) == 21 and error.errors[-1] == ("...", "980 more problems not listed")
    assert str(error).endswith(
        "items.19: Input should be a valid integer, unable to parse string as an integer (got 'x'); and 980 more"
    )
    assert error.redacted.endswith(
        "items.19: Input should be a valid integer, unable to parse string as an integer; and 980 more"
    )


async def test_lax_coercion_and_defaults(registry: ToolRegistry) -> None:
    @registry.tool
    async def scale(x: float, factor: int = 2) -> float:
        return x * factor

    assert (await registry.invoke("scale", {"x": "1.5"})).output == 3.0


async def test_sync_functions_run_in_a_worker_thread(registry: ToolRegistry) -> None:
    loop_thread = threading.get_ident()
    ticked = threading.Event()

    @registry.tool
    def where() -> dict[str, int | bool]:
        # Blocks until the loop has ticked four times: on the loop's own thread it
        # would stop the ticker, and see the wait run out instead.
        return {"thread": threading.get_ident(), "loop_ran": ticked.wait(10)}

    async def ticker() -> None:
        for _ in range(4):
            await asyncio.sleep(0.005)
        ticked.set()

    inv, _ = await asyncio.gather(registry.invoke("where", {}), ticker())
    assert inv.output == {"thread": inv.output["thread"], "loop_ran": True}
    assert inv.output["thread"] != loop_thread


async def test_return_values_become_json_compatible(registry: ToolRegistry) -> None:
    class Weather(BaseModel):
        city: str
        day: date

    @dataclass
    class Point:
        x: int
        y: int

    @registry.tool
    def model() -> Weather:
        return Weather(city="Rome", day=date(2026, 1, 2))

    @registry.tool
    def dc() -> list[Point]:
        return [Point(1, 2)]

    @registry.tool
    def mixed() -> dict[str, Any]:
        return {"when": date(2026, 1, 2), "items": (1, 2), "set": {3}}

    assert (await registry.invoke("model", {})).output == {"city": "Rome", "day": "2026-01-02"}
    assert (await registry.invoke("dc", {})).output == [{"x": 1, "y": 2}]
    assert (await registry.invoke("mixed", {})).output == {
        "when": "2026-01-02",
        "items": [1, 2],
        "set": [3],
    }


async def test_images_are_kept_and_image_bytes_become_images(registry: ToolRegistry) -> None:
    from agcore_tools import Image

    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))

    @registry.tool
    def raw() -> bytes:
        return png

    @registry.tool
    def wrapped() -> dict[str, Any]:
        return {"caption": "logo", "image": Image(png), "when": date(2026, 1, 2)}

    @registry.tool
    def text_bytes() -> bytes:
        return "héllo".encode()

    @registry.tool
    def blob() -> bytes:
        return b"\x00\xff\xfe"

    # Before: "tool 'raw' failed: returned a bytes, which is not JSON-compatible".
    assert (await registry.invoke("raw", {})).output == Image(png, "image/png")
    assert (await registry.invoke("wrapped", {})).output == {
        "caption": "logo",
        "image": Image(png),
        "when": "2026-01-02",
    }
    assert (await registry.invoke("text_bytes", {})).output == "héllo"  # as before
    error = (await registry.invoke("blob", {})).error
    assert isinstance(error, ToolExecutionError) and error.is_recoverable()
    assert str(error) == (
        "tool 'blob' failed: returned 3 bytes that are neither a PNG, JPEG, GIF or WebP image "
        "nor UTF-8 text; wrap them in Image(...), Audio(...) or File(...) with their media type"
    )


async def test_exceptions_become_execution_errors_with_cause(registry: ToolRegistry) -> None:
    @registry.tool
    def divide(a: float, b: float) -> float:
        return a / b

    @registry.tool
    async def picky() -> None:
        raise InvalidArgumentsError("picky", "custom reason")

    inv = await registry.invoke("divide", {"a": 1, "b": 0})
    assert isinstance(inv.error, ToolExecutionError)
    assert isinstance(inv.error.__cause__, ZeroDivisionError)
    assert str(inv.error) == "tool 'divide' failed: ZeroDivisionError: float division by zero"
    passed = await registry.invoke("picky", {})
    assert type(passed.error) is InvalidArgumentsError
    assert passed.error.reason == "custom reason"


def _logged(func: Any) -> Any:
    # A plain logging decorator, with no idea its function is async.
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize("timeout", [None, 5.0], ids=["no-timeout", "timeout"])
async def test_an_async_function_under_a_sync_decorator_is_awaited(
    registry: ToolRegistry, timeout: float | None
) -> None:
    # The wrapper ran in a worker thread and its coroutine was never awaited: every
    # call failed as "returned a coroutine, which is not JSON-compatible".
    @registry.tool(timeout=timeout)
    @_logged
    async def fetch(url: str) -> list[Any]:
        """Fetch a URL."""
        await asyncio.sleep(0)
        return [url, threading.get_ident()]

    def blocking(func: Any) -> Any:
        # A decorator that runs the coroutine itself: the wrapper's value is the result.
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return asyncio.run(func(*args, **kwargs))

        return wrapper

    @registry.tool
    @blocking
    async def run_it() -> int:
        """Answer seven."""
        return await asyncio.sleep(0, result=7)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine ... was never awaited"
        inv = await registry.invoke("fetch", {"url": "https://example.com"})
        assert (await registry.invoke("run_it", {})).output == 7
    assert inv.error is None
    assert inv.output == ["https://example.com", threading.get_ident()]  # on the loop
    assert list(fetch.parameters["properties"]) == ["url"]


def _thread_noting_stamp(threads: list[int]) -> type[BaseModel]:
    """A model whose serialiser notes the thread it runs in: where a result is converted."""

    class Stamp(BaseModel):
        value: int

        @field_serializer("value")
        def _where(self, value: int) -> list[int]:
            threads.append(threading.get_ident())
            return [value]

    return Stamp


async def test_a_sync_tools_result_is_made_json_in_its_worker_thread(
    registry: ToolRegistry,
) -> None:
    # Before: a sync tool's result was converted on the loop, so a lazy iterator it
    # returned ran there (its blocking reads with it), and a large result stalled it.
    threads: list[int] = []

    def fetch(page: int) -> int:
        threads.append(threading.get_ident())
        return page

    Stamp = _thread_noting_stamp(threads)

    @registry.tool
    def pages(n: int) -> Any:
        """Fetch n pages lazily."""
        return map(fetch, range(n))

    @registry.tool
    def stamps(n: int) -> list[Stamp]:
        """Many stamps."""
        return [Stamp(value=i) for i in range(n)]

    assert (await registry.invoke("pages", {"n": 3})).output == [0, 1, 2]
    # Long lists are converted a chunk at a time: the result is the same.
    stamped = (await registry.invoke("stamps", {"n": 2500})).output
    assert stamped == [{"value": [i]} for i in range(2500)]
    assert len(threads) == 3 + 2500 and threading.get_ident() not in threads


@pytest.mark.parametrize("options", [{}, {"timeout": 30.0}], ids=["direct", "with_timeout"])
async def test_an_async_tools_large_result_is_made_json_in_a_worker_thread(
    registry: ToolRegistry, options: dict[str, Any]
) -> None:
    # Before: an async tool's result was converted on the loop, so 300,000 rows held it
    # up for most of a second. Now a large one is converted in a worker thread (a chunk
    # at a time), and a small one still on the loop, with no thread hop.
    threads: list[int] = []

    Stamp = _thread_noting_stamp(threads)

    @registry.tool(**options)
    async def stamps(n: int) -> list[Stamp]:
        """Many stamps."""
        return [Stamp(value=i) for i in range(n)]

    @registry.tool(**options)
    async def report(n: int) -> dict[str, Any]:
        """Rows, and a stamp."""
        return {"rows": [{"id": i, "name": f"row {i}"} for i in range(n)], "stamp": Stamp(value=n)}

    loop_thread = threading.get_ident()
    assert (await registry.invoke("stamps", {"n": 3})).output == [{"value": [i]} for i in range(3)]
    assert threads == [loop_thread] * 3
    threads.clear()
    stamped = (await registry.invoke("stamps", {"n": 20_000})).output
    assert stamped == [{"value": [i]} for i in range(20_000)]
    assert len(threads) == 20_000 and loop_thread not in threads
    threads.clear()
    rows = (await registry.invoke("report", {"n": 10_000})).output
    assert rows["rows"][-1] == {"id": 9999, "name": "row 9999"}
    assert rows["stamp"] == {"value": [10_000]} and threads != [loop_thread]


async def test_a_large_async_result_is_converted_as_the_tool_returned_it(
    registry: ToolRegistry,
) -> None:
    # Before: the worker thread sliced the app's own list while the loop ran on, so a
    # list another task changed between two chunks came back in a state it never had
    # (an item put at its head repeated the last item of each later chunk).
    loop = asyncio.get_running_loop()
    changed = threading.Event()

    changing: list[list[Any]] = []  # the list the loop changes, mid-result

    def change_the_log() -> None:
        changing[0].insert(0, -1)
        changed.set()

    class Entry(BaseModel):
        value: int

        @field_serializer("value")
        def _first_changes_the_log(self, value: int) -> int:
            if value == 0 and not changed.is_set():  # in the worker thread, mid-result
                loop.call_soon_threadsafe(change_the_log)
                assert changed.wait(10), "the loop never changed the log"
            return value

    # Large enough to be converted in a worker thread, a chunk at a time.
    events: list[Any] = [Entry(value=i) for i in range(20_000)]
    log: dict[str, Any] = {"rows": [Entry(value=i) for i in range(20_000)]}

    @registry.tool
    async def recent_events() -> list[Any]:
        """The app's live event log."""
        return events

    @registry.tool
    async def recent_rows() -> dict[str, Any]:
        """The app's live log of rows."""
        return log

    expected = [{"value": i} for i in range(20_000)]
    changing.append(events)
    assert (await registry.invoke("recent_events", {})).output == expected
    assert len(events) == 20_001
    changed.clear()
    changing[0] = log["rows"]
    assert (await registry.invoke("recent_rows", {})).output == {"rows": expected}
    assert len(log["rows"]) == 20_001


async def test_a_long_list_a_dict_holds_is_converted_a_chunk_at_a_time(
    registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: only a long list returned as it is was converted a chunk at a time;
    # {"rows": [...], "count": n}, the usual shape, went to pydantic in one call, which
    # holds the GIL throughout (300,000 rows: ~200 ms of the loop held up).
    given: list[Any] = []

    def noting(value: Any) -> Any:
        given.append(value)
        return normalise(value)

    monkeypatch.setattr(_tool_result, "normalise", noting)
    rows = [{"id": i, "name": f"row {i}"} for i in range(2500)]

    @registry.tool
    async def report() -> dict[str, Any]:
        """Rows, and their count."""
        return {"rows": rows, "count": len(rows)}

    @registry.tool
    def export() -> dict[str, Any]:
        """Rows two dicts deep, after a small dict."""
        return {"meta": {"page": 1}, "data": {"rows": tuple(rows[:1500]), "next": None}}

    assert (await registry.invoke("report", {})).output == {"rows": rows, "count": 2500}
    assert [len(value) if isinstance(value, list) else value for value in given] == [
        1000,
        1000,
        500,
        2500,
    ]
    given.clear()
    exported = (await registry.invoke("export", {})).output
    assert exported == {"meta": {"page": 1}, "data": {"rows": rows[:1500], "next": None}}
    assert [len(value) if isinstance(value, tuple) else value for value in given] == [
        {"page": 1},
        1000,
        500,
        None,
    ]


class _Row(BaseModel):
    row_id: int = Field(serialization_alias="rowId")
    secret: str = Field(exclude=True, default="tok")


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"rows": [{"id": i, "x": i / 3} for i in range(2500)], "n": 1}, id="rows"),
        pytest.param(
            {"z": 0, "a": {"b": {"rows": [_Row(row_id=i) for i in range(2100)]}, "c": (1,)}},
            id="nested_models",
        ),
        pytest.param(
            {"rows": [*range(1500), float("nan"), {"png": Image(PNG)}], "cover": PNG},
            id="binary",
        ),
        pytest.param({"a": {"b": {"c": {"rows": list(range(1200))}}}}, id="deepest"),
        pytest.param({1: list(range(1200)), "1": "later"}, id="int_key"),
        pytest.param({"caf\udce9": list(range(1200))}, id="lone_surrogate_key"),
    ],
)
def test_a_result_converted_in_chunks_is_the_same_data(value: dict[Any, Any]) -> None:
    # Chunks change how a result is converted, never what it becomes: the same data
    # (types and key order too, so the same bytes), as converting it in one call.
    whole = normalise(value)
    chunked = to_json(value)
    assert repr(chunked) == repr(whole)
    assert content_json(chunked, None) == content_json(whole, None)


def test_a_dict_holding_itself_and_a_long_list_fails_as_before() -> None:
    beside: dict[str, Any] = {"rows": list(range(1500))}
    beside["self"] = beside
    inside: dict[str, Any] = {"rows": list(range(1500))}
    inside["rows"].append(inside)
    for looped in (beside, inside):
        with pytest.raises(ToolExecutionError, match="it holds itself, or nests deeper") as err:
            jsonable("t", looped)
        assert isinstance(err.value.__cause__, RecursionError)


async def test_unserialisable_return_is_an_execution_error(registry: ToolRegistry) -> None:
    @registry.tool
    def weird() -> object:
        return object()

    inv = await registry.invoke("weird", {})
    assert isinstance(inv.error, ToolExecutionError)
    assert "not JSON-compatible" in str(inv.error)


class _Vector:
    """A numpy-style value: its own tolist() gives Python data."""

    def __init__(self, *values: float) -> None:
        self.values = values

    def tolist(self) -> list[float]:
        return list(self.values)


class _Scalar:
    """A numpy-style scalar with item() only."""

    def item(self) -> int:
        return 7


async def test_dict_views_ranges_and_numpy_style_values_become_lists_and_numbers(
    registry: ToolRegistry,
) -> None:
    # Before: each failed the call after the tool had run, as "returned a dict_values,
    # which is not JSON-compatible".
    counts = {"a": 1, "b": 2}

    @registry.tool
    def views() -> dict[str, Any]:
        """Views of a dict."""
        return {"keys": counts.keys(), "values": counts.values(), "items": counts.items()}

    @registry.tool
    def steps() -> range:
        """A range."""
        return range(3)

    @registry.tool
    def stats() -> dict[str, Any]:
        """numpy-style values, nested."""
        return {"vector": _Vector(0.5, 1.5), "n": _Scalar(), "in_view": {"v": _Scalar()}.values()}

    assert (await registry.invoke("views", {})).output == {
        "keys": ["a", "b"],
        "values": [1, 2],
        "items": [["a", 1], ["b", 2]],
    }
    assert (await registry.invoke("steps", {})).output == [0, 1, 2]
    assert (await registry.invoke("stats", {})).output == {
        "vector": [0.5, 1.5],
        "n": 7,
        "in_view": [7],
    }


async def test_numpy_results_become_json(registry: ToolRegistry) -> None:
    np = pytest.importorskip("numpy")
    orders = np.array([12, 25, 7])

    @registry.tool
    def order_stats() -> dict[str, Any]:
        """Totals of the orders."""
        return {"total": orders.sum(), "any_large": orders.max() > 20, "all": orders}

    inv = await registry.invoke("order_stats", {})
    assert inv.output == {"total": 44, "any_large": True, "all": [12, 25, 7]}
    assert type(inv.output["any_large"]) is bool


async def test_a_value_of_no_json_type_is_named_with_where_it_is(registry: ToolRegistry) -> None:
    # Before: "returned a dict, which is not JSON-compatible", whatever and wherever the
    # value was (a numpy.bool read "returned a bool").
    class Money:
        pass

    class Report(BaseModel):
        rows: list[Any]

    @registry.tool
    def nested() -> dict[str, Any]:
        """A value of no JSON type, deep in the result."""
        return {"stats": [1.5, {"cost": Money()}]}

    @registry.tool
    def in_model() -> Report:
        """One in a model's field."""
        return Report(rows=[0, Money()])

    @registry.tool
    def many() -> list[Any]:
        """One far down a long list (converted a chunk at a time)."""
        return [*range(2300), Money()]

    @registry.tool
    def alone() -> object:
        """One alone."""
        return Money()

    @registry.tool
    def circular() -> dict[str, Any]:
        """A value that holds itself."""
        looped: list[Any] = []
        looped.append(looped)
        return {"x": looped}

    money = f"{__name__}.test_a_value_of_no_json_type_is_named_with_where_it_is.<locals>.Money"
    fix = "which is not JSON-compatible; convert it to a str, int, float, bool or None"
    for name, where in [
        ("nested", f"a {money} at result['stats'][1]['cost']"),
        ("in_model", f"a {money} at result.rows[1]"),
        ("many", f"a {money} at result[2300]"),
        ("alone", f"a {money}"),
    ]:
        inv = await registry.invoke(name, {})
        assert isinstance(inv.error, ToolExecutionError)
        assert isinstance(inv.error.__cause__, TypeError)
        assert str(inv.error).startswith(f"tool '{name}' failed: returned {where}, {fix}"), name
    inv = await registry.invoke("circular", {})
    assert isinstance(inv.error, ToolExecutionError)
    assert str(inv.error) == (
        "tool 'circular' failed: returned a dict that is not JSON-compatible: it holds "
        "itself, or nests deeper than Python's recursion limit"
    )


async def test_context_is_injected(registry: ToolRegistry) -> None:
    @registry.tool
    async def whoami(greeting: str, ctx: ToolContext) -> str:
        return f"{greeting} {ctx.session_id} {ctx.call_id}"

    assert "ctx" not in whoami.parameters["properties"]
    ctx = ToolContext(session_id="S", call_id="C")
    assert (await registry.invoke("whoami", {"greeting": "hi"}, ctx)).output == "hi S C"


async def test_tool_timeout_cancels_and_signals(registry: ToolRegistry) -> None:
    cancelled = asyncio.Event()
    seen: list[bool] = []

    @registry.tool(timeout=0.05)
    async def slow() -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    @registry.tool(timeout=0.05)
    def slow_sync(ctx: ToolContext) -> None:
        deadline = time.monotonic() + 2
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.005)
        seen.append(ctx.cancelled)

    started = time.perf_counter()
    inv = await registry.invoke("slow", {})
    assert time.perf_counter() - started < 1
    assert isinstance(inv.error, ToolTimeoutError) and inv.error.is_recoverable()
    assert cancelled.is_set()

    caller_ctx = ToolContext()
    inv = await registry.invoke("slow_sync", {}, caller_ctx)
    assert isinstance(inv.error, ToolTimeoutError)
    for _ in range(200):
        if seen:
            break
        await asyncio.sleep(0.01)
    assert seen == [True]  # the thread saw the timeout ...
    assert not caller_ctx.cancelled  # ... without cancelling the caller's own token


def test_function_timeout_error_is_not_a_tool_timeout() -> None:
    @FunctionTool
    async def raises_timeout() -> None:
        raise TimeoutError("socket timed out")

    inv = asyncio.run(_run_alone(raises_timeout))
    assert type(inv.error) is ToolExecutionError


async def _run_alone(t: BaseTool) -> Any:
    registry = ToolRegistry()
    registry.register(t)
    return await registry.invoke(t.name, {})


def test_refuses_bad_timeouts() -> None:
    # (Generator functions are tools now: see tests/test_generators.py.)
    with pytest.raises(ToolError, match="timeout must be positive"):
        FunctionTool(lambda: None, timeout=0)


@pytest.mark.parametrize("timeout", ["5", True, float("nan"), -1])
def test_a_timeout_that_is_no_positive_number_is_refused_naming_it(timeout: object) -> None:
    async def wait() -> None:
        """Wait."""

    with pytest.raises(ToolConfigError) as info:
        FunctionTool(wait, timeout=timeout)  # type: ignore[arg-type]
    assert str(info.value) == (
        f"tool timeout must be positive seconds (an int or a float) or None, got {timeout!r}"
    )

    made = FunctionTool(wait, timeout=5)
    with pytest.raises(ToolConfigError, match="tool timeout must be positive"):
        made.timeout = timeout  # type: ignore[assignment]
    assert made.timeout == 5


@pytest.mark.parametrize("name", ["", "   ", 5])
def test_an_empty_or_non_string_name_is_refused_not_replaced(name: object) -> None:
    def lookup(q: str) -> str:
        return q

    with pytest.raises(ValueError, match="a tool's name must be a non-empty string"):
        FunctionTool(lookup, name=name)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"description": 5}, "a tool's description must be a string or None, got int"),
        ({"description": ["Look up."]}, "a tool's description must be a string or None, got list"),
        ({"strict": "yes"}, "a tool's strict must be True, False or None, got 'yes'"),
        ({"strict": 1}, "a tool's strict must be True, False or None, got 1"),
    ],
)
def test_a_description_or_strict_of_the_wrong_type_is_refused(
    options: dict[str, Any], named: str
) -> None:
    def lookup(q: str) -> str:
        """Look up."""
        return q

    with pytest.raises(ToolConfigError) as info:
        tool(**options)(lookup)
    assert str(info.value) == named
    assert isinstance(info.value, ValueError)


async def test_async_callable_object_and_annotated(registry: ToolRegistry) -> None:
    class Greeter:
        async def __call__(self, name: Annotated[str, Field(min_length=2)]) -> str:
            return f"hello {name}"

    greet = FunctionTool(Greeter(), name="greet")
    registry.register(greet)
    assert (await registry.invoke("greet", {"name": "Al"})).output == "hello Al"
    bad = await registry.invoke("greet", {"name": "A"})
    assert isinstance(bad.error, InvalidArgumentsError)
    assert bad.error.errors[0][0] == "name"


async def test_positional_only_and_reserved_names(registry: ToolRegistry) -> None:
    @registry.tool
    def f(a: int, /, schema: str, copy: bool = False) -> list[Any]:
        return [a, schema, copy]

    assert (await registry.invoke("f", {"a": 1, "schema": "s"})).output == [1, "s", False]


def test_notebook_redefinition_replaces_but_collisions_fail(registry: ToolRegistry) -> None:
    source = "def lookup(q: str) -> str:\n    return 'v{}'\n"
    for version in (1, 2):
        namespace: dict[str, Any] = {"__name__": "__main__"}
        exec(source.format(version), namespace)
        registry.tool(namespace["lookup"])
    assert registry.list_tools() == ["lookup"]
    assert registry.get("lookup")("x") == "v2"  # type: ignore[operator]

    def lookup(q: str) -> str:  # same name, different function: a real collision
        return q

    with pytest.raises(ToolError, match="already registered"):
        registry.tool(lookup)


async def test_positional_only_context_parameter(registry: ToolRegistry) -> None:
    @registry.tool
    def f(ctx: ToolContext, /, x: int) -> list[Any]:
        return [ctx.call_id, x]

    assert (await registry.invoke("f", {"x": 1}, ToolContext(call_id="k"))).output == ["k", 1]


# -- issue 8 §6: the decorator's rough edges ---------------------------------------------


async def test_a_method_is_bound_through_its_instance(registry: ToolRegistry) -> None:
    with registry.as_default():

        class Counter:
            def __init__(self, start: int) -> None:
                self.total = start

            @tool
            def add(self, amount: int) -> int:
                """Add to the running total."""
                self.total += amount
                return self.total

    assert len(registry) == 0  # no instance yet, so nothing to register
    assert list(Counter.add.parameters["properties"]) == ["amount"]
    assert Counter.add.parameters["required"] == ["amount"]
    counter = Counter(10)
    bound = counter.add
    assert bound == counter.add  # each lookup is a new tool, equal to the others
    registry.register(bound)
    assert (await registry.invoke("add", {"amount": 5})).output == 15
    assert counter.add(1) == 16 and counter.total == 16  # still an ordinary method
    other = Counter(0)
    with pytest.raises(ToolError, match="already registered"):
        registry.register(other.add)  # two instances need two names
    registry.register(counter.add)  # the same bound tool again replaces itself
    assert registry.get("add") == bound and registry.get("add") != other.add


class _Counter:
    def __init__(self, name: str) -> None:
        self.name = name

    @tool
    def whoami(self) -> str:
        """Say which counter this is."""
        return self.name


async def test_a_method_tool_is_not_cached_on_its_instance(registry: ToolRegistry) -> None:
    # Looked up once, it was kept in the instance's __dict__: a copy of the instance
    # then ran its tool on the original, and the instance could no longer be pickled.
    original = _Counter("a")
    registry.register(original.whoami)
    duplicate = copy.copy(original)
    duplicate.name = "b"

    assert duplicate.whoami() == "b" and duplicate.whoami != original.whoami
    assert (await registry.invoke("whoami", {})).output == "a"
    assert vars(original) == {"name": "a"}
    assert pickle.loads(pickle.dumps(original)).whoami() == "a"


def test_an_unbound_method_tool_is_refused_with_advice(registry: ToolRegistry) -> None:
    class Store:
        @tool
        def get(self, key: str) -> str:
            """Read a key."""
            return key

    with pytest.raises(TypeError, match=r"registry.register\(obj.get\)"):
        registry.register(Store.get)
    with pytest.raises(TypeError, match="is a method") as info:

        class Other:
            @registry.tool
            def put(self, key: str) -> None:
                """Write a key."""

    assert isinstance(info.value, ToolError)


async def test_classmethods_and_staticmethods(registry: ToolRegistry) -> None:
    with registry.as_default():

        class Units:
            factor = 1000

            @tool
            @classmethod
            def to_grams(cls, kilos: float) -> float:
                """Kilograms to grams."""
                return kilos * cls.factor

            @tool
            @staticmethod
            def to_kilos(grams: float) -> float:
                """Grams to kilograms."""
                return grams / 1000

    assert registry.list_tools() == ["to_grams", "to_kilos"]
    assert list(registry.get("to_grams").parameters["properties"]) == ["kilos"]  # type: ignore[union-attr]
    assert (await registry.invoke("to_grams", {"kilos": 2})).output == 2000
    assert (await registry.invoke("to_kilos", {"grams": 500})).output == 0.5
    assert Units.to_grams(1) == 1000 and Units().to_kilos(1000) == 1


@pytest.mark.parametrize("through", ["tool", "registry.tool"])
def test_classmethod_above_tool_is_refused_naming_the_order(
    registry: ToolRegistry, through: str
) -> None:
    # classmethod(tool(f)) made a tool nothing ever registered, silently (or, through
    # registry.tool, an error advising to register "each instance's tool").
    decorator: Any = tool if through == "tool" else registry.tool
    with registry.as_default(), pytest.raises(ToolDefinitionError) as info:

        class Units:
            @classmethod
            @decorator
            def convert(cls, metres: float) -> float:
                """Metres to feet."""
                return metres * 3.28084

    assert "put @tool above @classmethod" in str(info.value)
    assert "Units.convert takes cls" in str(info.value)
    assert isinstance(info.value, TypeError) and "\n" not in str(info.value)
    assert len(registry) == 0


@pytest.mark.parametrize("kind", [classmethod, staticmethod], ids=["classmethod", "staticmethod"])
def test_a_class_tool_whose_name_is_taken_raises_a_tool_error(
    registry: ToolRegistry, kind: Any
) -> None:
    # Registered from __set_name__, the collision came out of the class statement as
    # a bare RuntimeError on Python 3.10 and 3.11, the ToolConfigError only its cause.
    @registry.tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    def by_class(cls: type, key: str) -> str:
        """Look a key up in the catalog."""
        return key.upper()

    def alone(key: str) -> str:
        """Look a key up in the catalog."""
        return key.upper()

    with pytest.raises(ToolConfigError, match=r"'lookup' .*already registered") as info:

        class Catalog:
            lookup = registry.tool(name="lookup")(kind(by_class if kind is classmethod else alone))

    assert isinstance(info.value, ValueError) and info.value.tool_name == "lookup"
    assert registry.get("lookup") is lookup


async def test_partials_leave_bound_arguments_out(registry: ToolRegistry) -> None:
    def scale(x: float, factor: float, offset: float = 0.0) -> float:
        """Scale a number.

        Args:
            x: The number.
            factor: The multiplier.
            offset: Added at the end.
        """
        return x * factor + offset

    double = FunctionTool(functools.partial(scale, factor=2.0))
    assert double.name == "scale" and double.description == "Scale a number."
    assert list(double.parameters["properties"]) == ["x", "offset"]
    assert double.parameters["properties"]["x"]["description"] == "The number."
    registry.register(double)
    assert (await registry.invoke("scale", {"x": 3})).output == 6.0
    refused = await registry.invoke("scale", {"x": 3, "factor": 5})
    assert isinstance(refused.error, InvalidArgumentsError)  # a bound argument stays bound
    ten_times = tool(functools.partial(scale, 10.0), name="ten_times", registry=registry)
    assert list(ten_times.parameters["properties"]) == ["factor", "offset"]
    assert (await registry.invoke("ten_times", {"factor": 3})).output == 30.0


async def test_callable_objects_use_the_call_docstring_and_a_given_name(
    registry: ToolRegistry,
) -> None:
    class WordCounter:
        """Counts words (the class docstring)."""

        def __call__(self, text: str) -> int:
            """Count the words of a text."""
            return len(text.split())

    counter = FunctionTool(WordCounter())
    assert counter.name == "word_counter"
    assert counter.description == "Count the words of a text."
    named = tool(WordCounter(), name="count_words", registry=registry)
    assert named.name == "count_words"
    assert (await registry.invoke("count_words", {"text": "a b c"})).output == 3


class Query(BaseModel):
    """A module-level model that a factory's own Query shadows."""

    text: str


async def test_string_annotations_resolve_in_the_innermost_scope_first(
    registry: ToolRegistry,
) -> None:
    # This module's annotations are strings (from __future__ import annotations). The
    # module-level Query won over the function's own, silently; and a method's class
    # body hid the function's Note ("its annotations do not resolve").
    def make_sql_tool() -> FunctionTool[..., str]:
        class Query(BaseModel):
            sql: str
            limit: int = 10

        @registry.tool
        def run_query(q: Query) -> str:
            """Run a SQL query."""
            return f"{q.sql} limit {q.limit}"

        return run_query

    def make_notebook() -> Any:
        class Note(BaseModel):
            text: str

        class Notebook:
            @tool
            def add(self, note: Note) -> str:
                """Add a note."""
                return note.text

        return Notebook()

    run_query = make_sql_tool()
    assert list(run_query.parameters["$defs"]["Query"]["properties"]) == ["sql", "limit"]
    assert (await registry.invoke("run_query", {"q": {"sql": "select 1"}})).output == (
        "select 1 limit 10"
    )
    registry.register(make_notebook().add)
    assert (await registry.invoke("add", {"note": {"text": "hi"}})).output == "hi"


def test_a_return_type_imported_for_type_checkers_only_leaves_the_tool_without_output_schema(
    registry: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: "cannot make tool 'total': its annotations do not resolve (name 'Decimal'
    # is not defined)", for a type only code mode's output schema reads.
    with caplog.at_level("DEBUG", logger="agcore_tools.code_mode"):

        @registry.tool
        def total(prices: list[float]) -> Decimal:
            """Sum the prices."""
            return sum(prices)  # type: ignore[return-value]

    assert total.parameters["required"] == ["prices"] and total.output_schema is None
    assert "tool 'total': its return annotation 'Decimal' does not resolve" in caplog.text
    with pytest.raises(ToolDefinitionError) as info:

        @registry.tool
        def add(base: int, price: Decimal) -> int:
            """Add a price."""
            return base

    assert str(info.value) == (
        "cannot make tool 'add': parameter 'price' has annotation 'Decimal', which does "
        "not resolve (name 'Decimal' is not defined)"
    )
    assert isinstance(info.value.__cause__, NameError)


class Adder:
    """Add a fixed number to x."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self, x: int) -> int:
        return x + self.n


class Undocumented:
    def __call__(self, x: int) -> int:
        return x


def test_a_callable_object_or_class_is_described_by_its_own_docstring_only() -> None:
    # Before: "Call self as a function." (object's __call__ docstring, which getdoc
    # finds for a module-level class's) for the first two, pydantic's BaseModel
    # docstring for the third, and no warning for either.
    class Order(BaseModel):
        item: str

    # And a dataclass's or NamedTuple's stand-in docstring, its signature ("Point(x:
    # int, y: int = 0)"), was the description.
    @dataclass
    class Point:
        x: int
        y: int = 0

    class Pair(NamedTuple):
        a: int
        b: int

    @dataclass
    class Resize:
        """Resize(w, h)"""

        w: int
        h: int

    assert FunctionTool(Resize).description == "Resize(w, h)"  # written, not generated
    assert FunctionTool(Adder(3)).description == "Add a fixed number to x."
    for made in (Undocumented(), Order, Point, Pair):
        with pytest.warns(ToolDefinitionWarning, match="has no docstring"):
            assert FunctionTool(made).description == ""

    class Base:
        def run(self, x: int) -> int:
            """Run it."""
            return x

    class Child(Base):
        def run(self, x: int) -> int:
            return x + 1

    assert FunctionTool(Child().run).description == "Run it."  # the app's own base's


class Ticket:
    """Open a support ticket."""

    def __init__(self, title: str, priority: int = 3) -> None:
        self.title, self.priority = title, priority


async def test_a_class_is_a_tool_only_when_its_constructor_takes_its_fields(
    registry: ToolRegistry,
) -> None:
    # Before: "parameter 'title' has no type annotation" for a plain class whose
    # __init__ is annotated (the class annotations were read), which was false.
    with pytest.raises(ToolDefinitionError) as info:
        registry.tool(Ticket)
    assert str(info.value) == (
        "cannot make tool 'Ticket': Ticket is a class, and a class is a tool only when its "
        "constructor takes its annotated fields (a dataclass, a pydantic model, a NamedTuple "
        "or a TypedDict); make the tool a function that builds it instead"
    )

    @dataclass
    class Point:
        """A point."""

        x: int
        y: int = 0

    class Order(BaseModel):
        """An order."""

        item: str

    registry.tool(Point)
    registry.tool(Order)
    assert (await registry.invoke("Point", {"x": 1})).output == {"x": 1, "y": 0}
    assert (await registry.invoke("Order", {"item": "tea"})).output == {"item": "tea"}


def test_lambdas_are_told_what_to_do_instead() -> None:
    with pytest.raises(TypeError, match="lambda") as info:
        FunctionTool(lambda city: city)
    message = str(info.value)
    assert "define the tool with def" in message and "annotate it" not in message
    assert isinstance(info.value, ToolError)
    with pytest.raises(ValueError, match="name="):
        FunctionTool(lambda: 42)
    assert FunctionTool(lambda: 42, name="answer", description="The answer.")() == 42


def test_a_factory_second_tool_of_the_same_name_is_a_collision(registry: ToolRegistry) -> None:
    def make_lookup(table: dict[str, str]) -> FunctionTool[..., str]:
        @registry.tool(name="lookup")
        def lookup(key: str) -> str:
            """Look a key up."""
            return table[key]

        return lookup

    first = make_lookup({"k": "first"})
    with pytest.raises(ToolError, match="already registered") as info:
        make_lookup({"k": "second"})
    assert isinstance(info.value, ValueError)
    assert registry.get("lookup") is first


def test_a_function_without_a_docstring_warns_once_naming_it() -> None:
    with pytest.warns(ToolDefinitionWarning) as record:

        def undocumented(x: int) -> int:
            return x

        FunctionTool(undocumented)
    assert len(record) == 1
    assert "undocumented" in str(record[0].message)
    assert record[0].filename == __file__  # points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        FunctionTool(undocumented, description="Echo x.")  # a description is enough


# A type pydantic cannot describe (issue 24 §7): name the parameter and the fix, not
# pydantic's arbitrary_types_allowed, which a tool author cannot set.
@pytest.mark.parametrize(
    ("make", "where"),
    [
        (lambda r: _sock_tool(r), "parameter 'sock' has type socket.socket"),
        (lambda r: _sockets_tool(r), "parameter '_socks' has type list[socket.socket]"),
    ],
    ids=["plain", "nested-and-renamed"],
)
def test_a_parameter_type_without_a_json_schema_names_the_parameter_and_the_fix(
    registry: ToolRegistry, make: Any, where: str
) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        make(registry)

    message = str(info.value)
    assert isinstance(info.value, TypeError)
    assert message.startswith(f"cannot make tool 'send': {where}, which cannot come from")
    assert "JSON-compatible type" in message and "ToolContext or a closure" in message
    assert "arbitrary_types_allowed" not in message and "\n" not in message
    assert type(info.value.__cause__).__name__ == "PydanticSchemaGenerationError"
    assert "send" not in registry


def _sock_tool(registry: ToolRegistry) -> Any:
    @tool(registry=registry)
    def send(text: str, sock: socket.socket) -> str:
        """Send text."""
        return text

    return send


def _sockets_tool(registry: ToolRegistry) -> Any:
    @tool(registry=registry)
    def send(count: int, _socks: list[socket.socket]) -> str:
        """Send to sockets."""
        return str(count)

    return send


def _delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def _wrapped(inner: Any) -> Any:
    @functools.wraps(inner)
    def logged(*args: Any, **kwargs: Any) -> Any:
        return inner(*args, **kwargs)

    return logged


@pytest.mark.parametrize(
    ("remake", "what"),
    [
        (lambda reg, t: reg.tool(name="remove_file")(t), "tool 'delete_file'"),
        (lambda reg, t: reg.tool(t), "tool 'delete_file'"),
        (
            lambda reg, t: tool(t, registry=reg, name="rm", permissions=["write"]),
            "tool 'delete_file'",
        ),
        (lambda reg, t: FunctionTool(t, name="rm"), "tool 'delete_file'"),
        (lambda reg, t: reg.tool(name="rm")(_wrapped(t)), "a wrapper of tool 'delete_file'"),
        (
            lambda reg, t: reg.tool(name="rm")(functools.partial(t)),
            "a wrapper of tool 'delete_file'",
        ),
    ],
)
def test_a_tool_made_from_a_tool_is_refused_rather_than_left_unguarded(
    remake: Any, what: str
) -> None:
    # Before: the new tool took only the options given now, so an alias (or the tool
    # passed to another registry's .tool(), or stacked decorators) had no permissions and
    # no needs_approval: offered to the model and run where the original was denied.
    original = FunctionTool(
        _delete_file, name="delete_file", permissions=["delete"], needs_approval=True
    )
    guarded = ToolRegistry(PermissionChecker(PermissionConfig()))
    with pytest.raises(ToolDefinitionError) as info:
        remake(guarded, original)

    assert isinstance(info.value, TypeError) and info.value.tool_name == "delete_file"
    assert str(info.value) == (
        f"@tool got {what}, not a function: a tool made from it would not keep its "
        "permissions and needs_approval; add the tool as it is with "
        "registry.register(tool), or decorate tool.func, giving every option again"
    )
    assert guarded.list_tools() == [] and guarded.definitions() == []
    # What the message points to keeps every protection of the original.
    entry = guarded.register(original)
    assert entry.permissions == (Permission.DELETE,) and entry.tool.needs_approval is True
    assert guarded.definitions() == []


def test_stacked_tool_decorators_are_refused_at_the_definition() -> None:
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))
    with pytest.raises(ToolDefinitionError, match="@tool got tool 'unlink', not a function"):

        @registry.tool(name="rm")
        @registry.tool(name="unlink", permissions=["delete"])
        def unlink(path: str) -> str:
            """Remove a file."""
            return path

    # The inner decorator registered its tool before the outer one refused the copy.
    assert registry.list_tools() == ["unlink"]
    assert registry.entry("unlink").permissions == (Permission.DELETE,)  # type: ignore[union-attr]
