from __future__ import annotations

import asyncio
import functools
import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agcore_tools import (
    BaseTool,
    FunctionTool,
    InvalidArgumentsError,
    Permission,
    PermissionChecker,
    PermissionConfig,
    PermissionDeniedError,
    RunStoppedError,
    ToolCall,
    ToolConfigError,
    ToolContext,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolInvocation,
    ToolNotFoundError,
    ToolPolicy,
    ToolRegistry,
    ToolTimeoutError,
    default_registry,
    portable_schema,
    tool,
)


class Recorder(BaseTool):
    """A tool that records its runs, optionally sleeping or failing."""

    def __init__(
        self, name: str, *, delay: float = 0.0, fail: BaseException | None = None, perms: Any = ()
    ) -> None:
        self.name = name
        self.description = f"Recorder {name}."
        self.required_permissions = perms
        self.delay = delay
        self.fail = fail
        self.runs: list[dict[str, Any]] = []
        self.cancelled = False

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        self.runs.append(args)
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        if self.fail is not None:
            raise self.fail
        return {"echo": args, "call_id": ctx.call_id}


def test_register_get_list_unregister_in_order() -> None:
    registry = ToolRegistry()
    a, b, c = Recorder("a"), Recorder("b"), Recorder("c")
    registry.register_all([b, a])
    registry.register(c)
    assert registry.list_tools() == ["b", "a", "c"]
    assert registry.get("a") is a and registry.get("zzz") is None
    assert registry.unregister("a") is a and registry.unregister("a") is None
    assert registry.list_tools() == ["b", "c"] and len(registry) == 2 and "b" in registry


def test_duplicate_and_malformed_names_are_refused() -> None:
    registry = ToolRegistry()
    registry.register(Recorder("dup"))
    with pytest.raises(ToolError, match="already registered"):
        registry.register(Recorder("dup"))
    for bad in ("", "has space", "x" * 65, "dots.not.allowed", "中文"):
        with pytest.raises(ToolError, match="names must match"):
            registry.register(Recorder(bad))
    with pytest.raises(ToolError, match="not a BaseTool"):
        registry.register(object())  # type: ignore[arg-type]


def test_a_tool_registered_while_definitions_are_built_is_offered() -> None:
    # definitions() stored the list it built after the registration had cleared the
    # cache: the new tool was listed by list_tools() but never offered.
    registry: ToolRegistry
    started: list[threading.Thread] = []

    def register_meanwhile(schema: dict[str, Any], ctx: Any) -> dict[str, Any]:
        if not started:  # another thread registers a tool while this one builds
            thread = threading.Thread(target=registry.register, args=(Recorder("late"),))
            started.append(thread)
            thread.start()
            thread.join(10)
        return schema

    registry = ToolRegistry(schema_transforms=[register_meanwhile])
    registry.register(Recorder("early"))
    registry.definitions()
    assert not started[0].is_alive() and registry.list_tools() == ["early", "late"]
    assert [d["function"]["name"] for d in registry.definitions()] == ["early", "late"]


class Pausing(BaseTool):
    """A tool whose registration calls a hook as the registry plans its policy."""

    def __init__(self, name: str, hook: Any) -> None:
        self.name = name
        self.description = "Pauses its registration."
        self._hook = hook

    @property
    def policy(self) -> None:  # type: ignore[override]
        if sys._getframe(1).f_code.co_name == "plan":  # PolicyBook.plan, past the name check
            self._hook()

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return "ok"


def test_two_threads_registering_one_name_cannot_both_find_it_free() -> None:
    # Both threads checked the name, then both added their tool: the second silently
    # replaced the first.
    registry = ToolRegistry()
    outcome: list[BaseException | None] = []

    def second() -> None:
        try:
            registry.register(Pausing("report", lambda: None))
        except ToolConfigError as exc:
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=second)

    def midway() -> None:  # the first registration, past its name's check
        thread.start()
        # The other thread cannot finish while this registration holds the registry;
        # without that, it finishes at once. The bound only ends this wait.
        thread.join(0.5)

    first = Pausing("report", midway)
    registry.register(first)
    thread.join(10)
    assert registry.get("report") is first
    assert isinstance(outcome[0], ToolConfigError) and "already registered" in str(outcome[0])


def test_a_tool_whose_execute_is_not_async_is_refused_at_registration() -> None:
    # It was registered, then each call ran it on the event loop's thread and failed
    # with "object str can't be used in 'await' expression" after its effect.
    charged: list[int] = []

    class Charge(BaseTool):
        name = "charge"
        description = "Charge the card."

        def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:  # type: ignore[override]
            charged.append(args["cents"])
            return "charged"

    registry = ToolRegistry()
    with pytest.raises(ToolDefinitionError) as refused:
        registry.register(Charge())
    assert str(refused.value) == (
        "cannot register tool 'charge': its execute() must be `async def` (or use @tool for "
        "a sync function)"
    )
    assert isinstance(refused.value, TypeError) and registry.list_tools() == []

    def logged(method: Any) -> Any:  # a decorator of the app's, around an async method
        @functools.wraps(method)
        def wrapper(*args: Any) -> Any:
            return method(*args)

        return wrapper

    class Refund(BaseTool):
        name = "refund"

        @logged
        async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
            return "refunded"

    registry.register(Refund())
    assert registry.invoke_sync("refund", {}).output == "refunded" and charged == []


def test_caller_mistakes_on_the_registry_surface_are_named() -> None:
    # Each came out as a bare AttributeError or TypeError from deep inside, or was
    # accepted silently (a description of None was sent to the model as null).
    registry = ToolRegistry()
    registry.register(Recorder("search"))

    class Odd(Recorder):
        def __init__(self, name: str, **attributes: Any) -> None:
            super().__init__(name)
            for attribute, value in attributes.items():
                setattr(self, attribute, value)

    refused: list[tuple[type[Exception], str, Any]] = [
        (ToolConfigError, "view() takes ToolEntry objects", lambda: registry.view(["search"])),
        (ToolConfigError, "got a Recorder", lambda: registry.view(list(registry))),
        (ToolConfigError, "got one; use [entry]", lambda: registry.view(registry.entry("search"))),
        (
            ToolConfigError,
            "invoke() takes a ToolContext as ctx, got dict (metadata goes in "
            "ToolContext(metadata=...))",
            lambda: asyncio.run(registry.invoke("search", {}, {"user": "ann"})),  # type: ignore[arg-type]
        ),
        (
            ToolConfigError,
            "invoke() takes a ToolContext",
            lambda: registry.invoke_sync("search", {}, {"user": "ann"}),  # type: ignore[arg-type]
        ),
        (
            ToolConfigError,
            "invoke_all() takes a ToolContext",
            lambda: asyncio.run(registry.invoke_all([("search", {})], ctx={"u": 1})),  # type: ignore[arg-type]
        ),
        (
            # A bare TypeError: 'NoneType' object is not iterable.
            ToolConfigError,
            "invoke_all() takes a list of calls ((name, args) pairs, (name, args, call_id) "
            "triples or ToolCall objects), got NoneType",
            lambda: asyncio.run(registry.invoke_all(None)),  # type: ignore[arg-type]
        ),
        (
            ToolConfigError,
            "got ToolCall (put one call in a list)",
            lambda: registry.invoke_as_completed(ToolCall("search", {})),  # type: ignore[arg-type]
        ),
        (
            ToolConfigError,
            "run_tool_calls() takes a ToolContext",
            lambda: registry.run_tool_calls_sync([], ctx={"u": 1}),  # type: ignore[arg-type]
        ),
        (
            ToolConfigError,
            "register_all() takes an iterable of tools, got one; register() adds one",
            lambda: registry.register_all(Recorder("one")),  # type: ignore[arg-type]
        ),
        (ToolConfigError, "got a str", lambda: registry.register_all(["one"])),  # type: ignore[list-item]
        (
            ToolConfigError,
            "cannot register tool 't5': its tags must be strings, got int",
            lambda: registry.register(Recorder("t5"), tags=5),  # type: ignore[arg-type]
        ),
        (
            ToolConfigError,
            "its category must be a string",
            lambda: registry.register(Recorder("c"), category=1),
        ),  # type: ignore[arg-type]
        (
            ToolConfigError,
            "takes a list of transforms, got function (wrap it: [portable_schema])",
            lambda: ToolRegistry(schema_transforms=portable_schema),  # type: ignore[arg-type]
        ),
        (
            # Before: accepted; the first request failed when it built the definitions.
            ToolConfigError,
            "ToolRegistry(schema_transforms=...) takes functions of (schema, ctx), such as "
            "portable_schema; item 1 is a str",
            lambda: ToolRegistry(schema_transforms=[portable_schema, "grammar_safe"]),  # type: ignore[list-item]
        ),
        (
            ToolConfigError,
            "ToolRegistry(strict=...) takes True or False, got 'no'",
            lambda: ToolRegistry(strict="no"),  # type: ignore[arg-type]
        ),
        (
            ToolDefinitionError,
            "cannot register tool 'p': its policy must be a ToolPolicy or None, got dict",
            lambda: registry.register(Odd("p", policy={"concurrency": 1})),
        ),
        (
            ToolDefinitionError,
            "its strict must be True, False or None, got str",
            lambda: registry.register(Odd("s", strict="no")),
        ),
        (
            ToolDefinitionError,
            "its description must be a string, got NoneType",
            lambda: registry.register(Odd("d", description=None)),
        ),
        (
            ToolDefinitionError,
            "its parameters must be a JSON Schema object (a dict), got list",
            lambda: registry.register(Odd("l", parameters=[])),
        ),
        (
            ToolConfigError,
            "set_policy(tag=...) takes one tag (a string), got list",
            lambda: registry.set_policy(ToolPolicy(concurrency=1), tag=["db"]),  # type: ignore[arg-type]
        ),
        (
            ToolConfigError,
            "set_policy(category=...) takes one category",
            lambda: registry.set_policy(ToolPolicy(concurrency=1), category=("a",)),  # type: ignore[arg-type]
        ),
        (
            ToolConfigError,
            "set_policy(names=...) takes tool names",
            lambda: registry.set_policy(ToolPolicy(concurrency=1), names=[1]),  # type: ignore[list-item]
        ),
    ]
    for kind, message, mistake in refused:
        with pytest.raises(kind) as caught:
            mistake()
        assert message in str(caught.value), message
    assert registry.list_tools() == ["search"]


def test_register_all_is_all_or_nothing() -> None:
    registry = ToolRegistry()
    registry.register(Recorder("taken"))
    with pytest.raises(ToolError, match="already registered"):
        registry.register_all([Recorder("new1"), Recorder("taken")])
    with pytest.raises(ToolError, match="twice in the batch"):
        registry.register_all([Recorder("x"), Recorder("x")])
    assert registry.list_tools() == ["taken"]


def test_definitions_are_ordered_byte_stable_and_support_responses() -> None:
    registry = ToolRegistry()
    registry.register_all([Recorder("z"), Recorder("a")])
    first = json.dumps(registry.definitions())
    assert [d["function"]["name"] for d in registry.definitions()] == ["z", "a"]
    registry.register(Recorder("m"))
    registry.unregister("m")
    assert json.dumps(registry.definitions()) == first
    flat = registry.definitions(api="responses")
    assert flat[0] == {
        "type": "function",
        "name": "z",
        "description": "Recorder z.",
        "parameters": {"type": "object", "properties": {}},
        "strict": False,
    }
    registry.definitions().clear()  # callers get a copy ...
    registry.definitions()[0]["function"]["name"] = "hacked"  # ... a deep one
    assert json.dumps(registry.definitions()) == first
    with pytest.raises(ToolError, match="unknown api"):
        registry.definitions(api="grpc")  # type: ignore[arg-type]


def test_editing_one_returned_definition_changes_no_other() -> None:
    # Tools of one class share its parameters schema. definitions() deep-copied the
    # list as a whole, which kept the sharing: adding a property to one tool's copy
    # added it to every other tool's in the same list.
    registry = ToolRegistry()
    registry.register_all([Recorder("a"), Recorder("b")])
    first, second = registry.definitions()

    first["function"]["parameters"]["properties"]["limit"] = {"type": "integer"}

    assert second["function"]["parameters"] == {"type": "object", "properties": {}}
    assert Recorder.parameters == {"type": "object", "properties": {}}


def test_metadata_tags_categories_groups() -> None:
    registry = ToolRegistry()
    registry.register(Recorder("search"), tags=["web", "read"], category="data", version="1.2")
    registry.register(Recorder("store"), tags=["memory"], category="memory")
    registry.register(Recorder("loose"))

    @tool(registry=registry, tags=["math"], category="calc")
    def add(a: int, b: int) -> int:
        return a + b

    assert [e.name for e in registry.find_by_tag("web")] == ["search"]
    assert [e.name for e in registry.find_by_tag("math")] == ["add"]
    assert [e.name for e in registry.find_by_category("memory")] == ["store"]
    assert {k: [e.name for e in v] for k, v in registry.groups().items()} == {
        "data": ["search"],
        "memory": ["store"],
        None: ["loose"],
        "calc": ["add"],
    }
    entry = registry.entry("search")
    assert entry is not None and entry.version == "1.2"


async def test_invoke_runs_and_records_stats() -> None:
    registry = ToolRegistry()
    ok, bad = Recorder("ok"), Recorder("bad", fail=RuntimeError("kaput"))
    registry.register_all([ok, bad])
    inv = await registry.invoke("ok", {"x": 1}, ToolContext(call_id="c1"))
    assert isinstance(inv, ToolInvocation) and inv.ok
    assert inv.result() == {"echo": {"x": 1}, "call_id": "c1"}
    assert inv.call_id == "c1" and inv.duration >= 0
    failed = await registry.invoke("bad", {})
    assert not failed.ok and isinstance(failed.error, ToolExecutionError)
    assert isinstance(failed.error.__cause__, RuntimeError)
    with pytest.raises(ToolExecutionError, match="kaput"):
        failed.result()
    stats = {e.name: (e.stats.calls, e.stats.failures) for e in registry.entries()}
    assert stats == {"ok": (1, 0), "bad": (1, 1)}


def test_a_tool_name_that_is_no_string_is_the_callers_mistake_naming_the_fix() -> None:
    # None read as a model's call "without a name", and the tool object as the name
    # "tool '<Recorder 'search'>' is not registered": ToolNotFoundErrors, no model involved.
    registry = ToolRegistry()
    tool = Recorder("search")
    entry = registry.register(tool)
    mistakes: list[tuple[str, Any]] = [
        ("invoke() takes a tool name (a str), got NoneType", lambda: registry.invoke(None, {})),  # type: ignore[arg-type]
        (
            "invoke() takes a tool name (a str), got Recorder: use invoke('search', ...)",
            lambda: registry.invoke(tool, {}),  # type: ignore[arg-type]
        ),
        ("got ToolEntry: use invoke('search', ...)", lambda: registry.invoke(entry, {})),  # type: ignore[arg-type]
        ("invoke() takes a tool name, got an empty string", lambda: registry.invoke("", {})),
    ]
    for message, mistake in mistakes:
        with pytest.raises(ToolConfigError) as caught:
            asyncio.run(mistake())
        assert message in str(caught.value), message
        assert isinstance(caught.value, ValueError)
    with pytest.raises(ToolConfigError, match="got Recorder: use invoke"):
        registry.invoke_sync(tool, {})  # type: ignore[arg-type]
    # In a batch, that call alone fails, saying so; the others run (see the test below).
    [refused] = asyncio.run(registry.invoke_all([(tool, {})]))
    assert isinstance(refused.error, ToolConfigError) and not refused.may_have_run
    assert str(refused.error) == (
        "invoke_all() takes a tool name (a str), got Recorder: use ('search', args)"
    )
    # A model's nameless call still reaches the model as its own mistake.
    [answer] = registry.run_tool_calls_sync(
        [{"id": "c1", "type": "function", "function": {"name": "", "arguments": "{}"}}]
    )
    assert answer["content"].startswith("Error: the model sent a tool call without a name")


@pytest.mark.parametrize("method", ["invoke_all", "invoke_as_completed"])
async def test_a_batch_call_with_an_empty_or_no_str_name_fails_alone_and_the_others_run(
    method: str,
) -> None:
    # A loop passing a model's calls to invoke_all() got the whole batch raised for one
    # nameless call: the valid calls never ran, though nothing is to be raised.
    registry = ToolRegistry()
    tool = Recorder("search")
    registry.register(tool)
    calls = [
        ToolCall("search", {"q": 1}, call_id="c1"),
        ToolCall("", {}, call_id="c2"),
        ToolCall(None, {}, call_id="c3"),  # type: ignore[arg-type]
        ToolCall(tool, {}, call_id="c4"),  # type: ignore[arg-type]
        ToolCall(["search"], {}, call_id="c5"),  # type: ignore[arg-type]
    ]
    if method == "invoke_all":
        results = await registry.invoke_all(calls)
    else:
        ended = [pair async for pair in registry.invoke_as_completed(calls)]
        results = [invocation for _, invocation in sorted(ended, key=lambda pair: pair[0])]
    ran, empty, none, tool_object, listed = results
    assert ran.ok and ran.result() == {"echo": {"q": 1}, "call_id": "c1"}
    for nameless in (empty, none):
        assert isinstance(nameless.error, ToolNotFoundError)
        assert str(nameless.error).startswith("the model sent a tool call without a name")
    assert isinstance(tool_object.error, ToolConfigError) and tool_object.call_id == "c4"
    assert str(tool_object.error) == (
        f"{method}() takes a tool name (a str), got Recorder: use ('search', args)"
    )
    assert str(listed.error) == f"{method}() takes a tool name (a str), got list"
    assert [r.call_id for r in results] == ["c1", "c2", "c3", "c4", "c5"]
    assert tool.runs == [{"q": 1}]
    # With more tools than the error lists, the closest names to None were looked up.
    for number in range(40):
        registry.register(Recorder(f"tool_{number}"))
    [none] = await registry.invoke_all([ToolCall(None, {})])  # type: ignore[arg-type]
    assert str(none.error) == "the model sent a tool call without a name: 41 tools are offered"
    # An item that is no call at all is still refused, as the list that is none is.
    with pytest.raises(ToolConfigError, match=r"takes \(name, args\) pairs"):
        await registry.invoke_all([("search", {}), "search"])  # type: ignore[list-item]


async def test_invoke_raises_not_found() -> None:
    with pytest.raises(ToolNotFoundError, match="'ghost' is not registered"):
        await ToolRegistry().invoke("ghost", {})


def test_the_testing_guide_names_every_error_invoke_raises() -> None:
    # invoke's docstring is the reference; the guide once left out ToolUnavailableError.
    reference = (ToolRegistry.invoke.__doc__ or "").split("Failures during execution")[0]
    raised = set(re.findall(r":class:`~?(?:agcore_tools\.)?(\w+Error)`", reference))
    guide = (Path(__file__).parents[1] / "docs" / "guides" / "testing.md").read_text()
    summary = guide[guide.index("`invoke` raises only") :].split("\n\n")[0]
    assert raised == {"ToolNotFoundError", "PermissionDeniedError", "ToolUnavailableError"}
    assert {name for name in raised if f"`{name}`" not in summary} == set()


async def test_an_unknown_tool_in_a_large_registry_names_the_closest_not_all() -> None:
    # The model reads this text: all 200 names would cost it about 1,500 tokens.
    registry = ToolRegistry()
    registry.register_all([Recorder(f"tool_{i:03d}") for i in range(198)])
    registry.register_all([Recorder("search_issues"), Recorder("search_code")])
    [result] = await registry.invoke_all([("serch_issues", {})])
    assert str(result.error) == (
        "tool 'serch_issues' is not registered: 200 tools are offered; the closest "
        "names are: search_issues, search_code"
    )


async def test_permission_denied_raises_and_the_tool_never_runs() -> None:
    checker = PermissionChecker(PermissionConfig())
    registry = ToolRegistry().with_permission_checker(checker)
    rm = Recorder("rm", perms=["delete"])
    registry.register(rm)
    with pytest.raises(PermissionDeniedError, match="'rm' needs 'delete'"):
        await registry.invoke("rm", {"path": "/"})
    assert rm.runs == []
    assert registry.entry("rm").stats.calls == 0  # type: ignore[union-attr]


async def test_permissions_set_after_registration_hold_from_the_next_check() -> None:
    # Before: the registry kept what it parsed at registration, so a tool given
    # ("delete",) later was still offered and ran, although required_permissions is
    # documented as checked before each execution (needs_approval set later held).
    registry = ToolRegistry(PermissionChecker(PermissionConfig()))
    purge, shell = Recorder("purge"), Recorder("shell", perms=["read"])
    registry.register_all([purge, shell])
    view = registry.view(registry.entries())
    assert len(registry.definitions()) == len(view.definitions()) == 2
    before = registry.revision

    purge.required_permissions = ("delete",)  # a new value
    shell.required_permissions.append("shell")  # a list changed in place
    with pytest.raises(PermissionDeniedError, match="'purge' needs 'delete'"):
        await registry.invoke("purge", {})
    [refused] = await view.invoke_all([("shell", {})])
    assert isinstance(refused.error, PermissionDeniedError)
    messages = await registry.run_tool_calls(
        [{"id": "c1", "type": "function", "function": {"name": "purge", "arguments": "{}"}}]
    )
    assert "needs 'delete', which is denied" in messages[0]["content"]
    assert purge.runs == [] and shell.runs == []
    # What was built from the old permissions is built again, in views too.
    assert registry.revision != before
    assert registry.definitions() == view.definitions() == []
    assert registry.entry("purge").permissions == (Permission.DELETE,)  # type: ignore[union-attr]

    # Loosened, the tool is offered and runs again.
    purge.required_permissions = ["read"]
    assert [d["function"]["name"] for d in view.definitions()] == ["purge"]
    assert (await registry.invoke("purge", {})).ok and len(purge.runs) == 1


def test_reading_the_revision_parses_no_list_of_permissions_that_did_not_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: each revision read (several a request) parsed every tool's list of
    # permissions again, as a list can change in place: 16 ms a read at 10,000 tools.
    registry = ToolRegistry()
    tools = [Recorder(f"tool_{i}", perms=["read"]) for i in range(3)]
    registry.register_all(tools)
    before = registry.revision
    parsed: list[object] = []
    parse_all = Permission.parse_all

    def noting(values: Any) -> tuple[Permission, ...]:
        parsed.append(values)
        return parse_all(values)

    monkeypatch.setattr(Permission, "parse_all", noting)
    assert [registry.revision for _ in range(5)] == [before] * 5
    assert parsed == []
    tools[1].required_permissions.append("write")  # in place: still seen
    assert registry.revision != before and parsed == [["read", "write"]]
    assert registry.entry("tool_1").permissions == (  # type: ignore[union-attr]
        Permission.READ,
        Permission.WRITE,
    )


async def test_an_ask_permission_set_after_registration_asks_before_the_call() -> None:
    registry = ToolRegistry(PermissionChecker(PermissionConfig(ask=["write"])))
    save = Recorder("save")
    registry.register(save)
    save.required_permissions = ("write",)
    messages = await registry.run_tool_calls(
        [{"id": "c1", "type": "function", "function": {"name": "save", "arguments": "{}"}}]
    )
    assert list(messages) == [] and save.runs == []
    assert [request.tool_name for request in messages.pending_approvals] == ["save"]


async def test_non_mapping_arguments_are_invalid() -> None:
    registry = ToolRegistry()
    registry.register(Recorder("r"))
    inv = await registry.invoke("r", ["not", "a", "dict"])  # type: ignore[arg-type]
    assert isinstance(inv.error, InvalidArgumentsError)


async def test_invoke_all_runs_concurrently_in_input_order() -> None:
    started: list[str] = []
    everyone = asyncio.Event()

    class Gathered(Recorder):
        async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
            started.append(self.name)
            if len(started) == 10:
                everyone.set()
            # Run one after another, the first would wait here alone until its timeout
            # (no wall-clock bound, which a loaded machine breaks).
            await asyncio.wait_for(everyone.wait(), 10)
            return await super().execute(args, ctx)

    registry = ToolRegistry()
    for i in range(10):  # the later ones end first
        registry.register(Gathered(f"t{i}", delay=0.1 - i * 0.01))
    results = await registry.invoke_all(
        [ToolCall(f"t{i}", {"i": i}, f"id{i}") for i in range(10)], timeout=15
    )
    assert all(r.ok for r in results), [r.error for r in results]
    assert [r.call_id for r in results] == [f"id{i}" for i in range(10)]
    assert [r.output["echo"]["i"] for r in results] == list(range(10))


async def test_invoke_all_records_every_error_kind_and_raises_none() -> None:
    registry = ToolRegistry(PermissionChecker())
    registry.register_all(
        [
            Recorder("fine"),
            Recorder("shell", perms=["shell"]),
            Recorder("slow", delay=5),
            Recorder("boom", fail=ValueError("nope")),
        ]
    )
    results = await registry.invoke_all(
        [("fine", {}), ("missing", {}), ("shell", {}), ("slow", {}), ("boom", {}), ("fine", 3)],
        timeout=0.1,
    )
    kinds = [type(r.error).__name__ if r.error else "ok" for r in results]
    assert kinds == [
        "ok",
        "ToolNotFoundError",
        "PermissionDeniedError",
        "ToolTimeoutError",
        "ToolExecutionError",
        "InvalidArgumentsError",
    ]
    slow = registry.get("slow")
    assert isinstance(slow, Recorder) and slow.cancelled
    assert isinstance(results[3].error, ToolTimeoutError) and results[3].error.timeout == 0.1
    assert await registry.invoke_all([]) == []


async def test_a_tool_that_calls_sys_exit_fails_its_call_not_the_app() -> None:
    # argparse calls sys.exit(2) on a bad argument: a CLI helper made a tool does that.
    registry = ToolRegistry()

    @registry.tool
    def cli(flag: str) -> str:
        raise SystemExit(f"unknown flag {flag}")

    @registry.tool
    async def quits() -> None:
        raise SystemExit(2)

    registry.register(Recorder("fine"))
    results = await registry.invoke_all([("cli", {"flag": "-x"}), ("quits", {}), ("fine", {})])
    assert [str(r.error) if r.error else "ok" for r in results] == [
        "tool 'cli' failed: SystemExit: unknown flag -x",
        "tool 'quits' failed: SystemExit: 2",
        "ok",
    ]
    assert isinstance(results[0].error, ToolExecutionError)
    assert isinstance(results[0].error.__cause__, SystemExit)
    assert registry.entry("cli").stats.failures == 1  # type: ignore[union-attr]


@pytest.mark.skipif(
    sys.version_info < (3, 11), reason="3.10 has no Task.cancelling() to tell whose it is"
)
async def test_a_cancellation_only_the_tool_saw_fails_its_call_and_spares_the_rest() -> None:
    registry = ToolRegistry()

    @registry.tool
    async def fetch() -> str:
        inner = asyncio.get_running_loop().create_future()
        inner.cancel()  # someone else's: the call itself was never cancelled
        return str(await inner)

    registry.register(Recorder("fine"))
    results = await registry.invoke_all([("fetch", {}), ("fine", {})])
    assert str(results[0].error) == (
        "tool 'fetch' failed: CancelledError: something it awaited was cancelled"
    )
    assert results[1].error is None
    assert registry.entry("fetch").stats.failures == 1  # type: ignore[union-attr]
    # Alone, in the caller's own task, the same: the caller was not cancelled.
    alone = await registry.invoke("fetch", {})
    assert isinstance(alone.error, ToolExecutionError)


async def test_invoke_all_gives_each_call_its_own_context() -> None:
    registry = ToolRegistry()
    seen: list[tuple[str, str | None]] = []

    @registry.tool
    async def probe(ctx: ToolContext) -> None:
        seen.append((ctx.session_id, ctx.call_id))

    ctx = ToolContext(session_id="sess")
    await registry.invoke_all([("probe", {}, "a"), ("probe", {}, "b")], ctx=ctx)
    assert sorted(seen) == [("sess", "a"), ("sess", "b")]


async def test_one_call_batches_without_a_context_share_nothing() -> None:
    # A one-call batch ran in a copy of a process-wide blank context: every such batch
    # (any registry, any request) shared its session, shared state and idempotency keys.
    first, second = ToolRegistry(), ToolRegistry()

    @first.tool
    def add_to_cart(item: str, ctx: ToolContext) -> list[str]:
        """Add an item to this run's cart."""
        cart = ctx.shared_state.setdefault("cart", [])
        cart.append(item)
        return list(cart)

    @second.tool
    def charge(cents: int, ctx: ToolContext) -> list[Any]:
        """Charge a card."""
        return [ctx.session_id, ctx.idempotency_key, sorted(ctx.shared_state)]

    alice = await first.invoke_all([("add_to_cart", {"item": "book"})])
    bob = await first.invoke_all([("add_to_cart", {"item": "pen"})])
    assert (alice[0].output, bob[0].output) == (["book"], ["pen"])
    [one] = await second.invoke_all([ToolCall("charge", {"cents": 100}, "call_0")])
    other = [
        inv async for _, inv in second.invoke_as_completed([("charge", {"cents": 9}, "call_0")])
    ]
    assert one.call_id == other[0].call_id == "call_0"
    assert one.output[2] == other[0].output[2] == []  # no other caller's cart
    assert one.output[0] != other[0].output[0]  # two sessions
    assert one.output[1] != other[0].output[1]  # so two idempotency keys
    assert one.output[1].endswith(":call_0")


async def test_cancelling_invoke_all_cancels_running_tools() -> None:
    registry = ToolRegistry()
    tools = [Recorder(f"s{i}", delay=10) for i in range(3)]
    registry.register_all(tools)
    task = asyncio.create_task(registry.invoke_all([(t.name, {}) for t in tools]))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 2)
    assert all(t.cancelled for t in tools)
    leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert leftovers == []


async def test_sync_tools_block_in_parallel_threads() -> None:
    registry = ToolRegistry()

    pairs = threading.Barrier(2, timeout=10)

    @registry.tool
    def block(i: int) -> int:
        # Each waits in a blocking call for a partner: run one at a time, the first
        # would wait alone until the barrier's timeout and fail.
        pairs.wait()
        return i

    results = await registry.invoke_all([("block", {"i": i}) for i in range(20)], timeout=15)
    assert [r.output for r in results] == list(range(20)), [r.error for r in results]


async def test_as_default_is_context_local_across_tasks() -> None:
    left, right = ToolRegistry(), ToolRegistry()

    async def define(registry: ToolRegistry, name: str) -> None:
        with registry.as_default():
            await asyncio.sleep(0.01)  # let the other task interleave

            @tool(name=name)
            def f() -> str:
                return name

            await asyncio.sleep(0.01)

    await asyncio.gather(define(left, "left_tool"), define(right, "right_tool"))
    assert left.list_tools() == ["left_tool"]
    assert right.list_tools() == ["right_tool"]
    assert "left_tool" not in default_registry() and "right_tool" not in default_registry()


def test_malformed_call_shape_is_a_clear_error() -> None:
    with pytest.raises(ToolError, match=r"\(name, args\) pairs"):
        asyncio.run(ToolRegistry().invoke_all(["just-a-name"]))  # type: ignore[list-item]


async def test_cancelling_invoke_all_reaches_sync_tools_through_their_token() -> None:
    registry = ToolRegistry()
    saw_cancel: list[bool] = []

    @registry.tool
    def spin(ctx: ToolContext) -> None:
        deadline = time.monotonic() + 3
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.005)
        saw_cancel.append(ctx.cancelled)

    caller = ToolContext()
    task = asyncio.create_task(registry.invoke_all([("spin", {}), ("spin", {})], ctx=caller))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 2)
    for _ in range(100):
        if len(saw_cancel) == 2:
            break
        await asyncio.sleep(0.01)
    assert saw_cancel == [True, True]
    assert not caller.cancelled  # the caller's own token is untouched


@pytest.mark.parametrize("given", [False, True])
async def test_cancelling_invoke_reaches_sync_tools_and_generators_through_their_token(
    given: bool,
) -> None:
    registry = ToolRegistry()
    started, stopped = threading.Event(), threading.Event()
    saw_cancel: list[bool] = []
    go = threading.Event()

    @registry.tool
    def spin(ctx: ToolContext) -> None:
        """Poll until cancelled."""
        started.set()
        deadline = time.monotonic() + 10
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.005)
        saw_cancel.append(ctx.cancelled)
        stopped.set()

    @registry.tool
    def ticks() -> Iterator[int]:
        """Yield until closed."""
        try:
            for value in range(1000):
                started.set()
                yield value
                go.wait(0.01)
        finally:
            stopped.set()

    caller = ToolContext() if given else None
    for name in ("spin", "ticks"):
        started.clear()
        stopped.clear()
        task = asyncio.ensure_future(registry.invoke(name, {}, ctx=caller))
        assert await asyncio.to_thread(started.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        # The tool's thread stops at once, not at the end of its work (10 s).
        assert await asyncio.to_thread(stopped.wait, 5), name
    assert saw_cancel == [True]
    # A context the caller gave is its own, maybe shared: the call's token was a child.
    assert caller is None or not caller.cancelled


async def test_invoke_as_completed_yields_each_call_when_it_ends() -> None:
    registry = ToolRegistry()
    registry.register_all([Recorder("slow", delay=0.3), Recorder("fast", delay=0.01)])
    order: list[tuple[int, str]] = []
    started = time.perf_counter()
    fast_seen_at = 0.0
    async for position, invocation in registry.invoke_as_completed([("slow", {}), ("fast", {})]):
        order.append((position, invocation.tool_name))
        if invocation.tool_name == "fast":
            fast_seen_at = time.perf_counter() - started
    assert order == [(1, "fast"), (0, "slow")]
    assert fast_seen_at < 0.2  # reported before the slow call finished


async def test_closing_invoke_as_completed_early_cancels_the_rest() -> None:
    registry = ToolRegistry()
    slow = Recorder("slow", delay=10)
    registry.register_all([slow, Recorder("fast")])
    stream = registry.invoke_as_completed([("slow", {}), ("fast", {})])
    position, _ = await stream.__anext__()
    assert position == 1
    await asyncio.wait_for(stream.aclose(), 2)
    assert slow.cancelled


# -- a Stop: the caller's ToolContext cancelled ------------------------------------------


class Held(BaseTool):
    """An async tool that waits (for at most 30 s) until released, noting its start and
    whether it was cancelled; it never reads its context."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.description = f"Held {name}."
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        self.started.set()
        try:
            await asyncio.wait_for(self.release.wait(), 30)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return "done"


async def _run_entry(registry: ToolRegistry, entry: str, ctx: ToolContext) -> Any:
    call = {"id": "c1", "type": "function", "function": {"name": "held", "arguments": "{}"}}
    if entry == "invoke":
        return await registry.invoke("held", {}, ctx)
    if entry == "invoke_all":
        return await registry.invoke_all([("held", {}), ("held", {})], ctx=ctx)
    if entry == "invoke_all one call":
        return await registry.invoke_all([("held", {})], ctx=ctx)
    if entry == "invoke_as_completed":
        return [pair async for pair in registry.invoke_as_completed([("held", {})], ctx=ctx)]
    return await registry.run_tool_calls([call], ctx=ctx)


ENTRIES = ["invoke", "invoke_all", "invoke_all one call", "invoke_as_completed", "run_tool_calls"]


@pytest.mark.parametrize("entry", ENTRIES)
async def test_a_stop_cancels_the_running_call_and_raises_run_stopped(entry: str) -> None:
    # The ToolContext's cancel (the sync guide's Stop button) stopped an LlmCycle run
    # only: a direct call ran its async tool to the end and returned it as a success.
    registry = ToolRegistry()
    held = Held("held")
    registry.register(held)
    ctx = ToolContext()
    call = asyncio.ensure_future(_run_entry(registry, entry, ctx))
    await asyncio.wait_for(held.started.wait(), 5)
    ctx.cancellation.cancel()  # as a Stop button's handler on the loop would
    with pytest.raises(RunStoppedError, match=r"was stopped by its ToolContext") as info:
        await asyncio.wait_for(call, 5)  # never the tool's 30 s
    assert held.cancelled
    assert info.value.call == ("invoke_all()" if entry.startswith("invoke_all") else f"{entry}()")
    stats = registry.entry("held").stats  # type: ignore[union-attr]
    assert stats.failures == stats.calls >= 1  # no success
    assert not [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]


@pytest.mark.parametrize("entry", ENTRIES)
async def test_a_stop_from_another_thread_cancels_the_running_call(entry: str) -> None:
    registry = ToolRegistry()
    held = Held("held")
    registry.register(held)
    ctx = ToolContext()
    call = asyncio.ensure_future(_run_entry(registry, entry, ctx))
    await asyncio.wait_for(held.started.wait(), 5)
    stop = threading.Thread(target=ctx.cancellation.cancel)  # a sync app's Stop button
    stop.start()
    with pytest.raises(RunStoppedError):
        await asyncio.wait_for(call, 5)
    stop.join(5)
    assert held.cancelled


@pytest.mark.parametrize("entry", ENTRIES)
async def test_a_call_given_a_cancelled_context_runs_nothing(entry: str) -> None:
    registry = ToolRegistry()
    held = Held("held")
    registry.register(held)
    ctx = ToolContext()
    ctx.cancellation.cancel()
    with pytest.raises(RunStoppedError):
        await asyncio.wait_for(_run_entry(registry, entry, ctx), 5)
    assert not held.started.is_set()


async def test_a_stop_after_the_call_ended_leaves_the_caller_alone() -> None:
    # Each call watches its context only while it runs: a Stop afterwards cancels no
    # task, and nothing watching stays behind on a context the app keeps.
    registry = ToolRegistry()
    registry.register(Recorder("quick"))
    ctx = ToolContext()
    for _ in range(3):
        assert (await registry.invoke("quick", {}, ctx)).ok
        assert [r.ok for r in await registry.invoke_all([("quick", {})] * 2, ctx=ctx)] == [
            True,
            True,
        ]
        calls = [{"id": "c", "type": "function", "function": {"name": "quick", "arguments": "{}"}}]
        assert "echo" in (await registry.run_tool_calls(calls, ctx=ctx))[0]["content"]
    assert not ctx.cancellation._hooks  # every call's watch has ended
    ctx.cancellation.cancel()
    for _ in range(3):
        await asyncio.sleep(0)  # a stale watch's stop would cancel this task here
    if sys.version_info >= (3, 11):
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_stop_leaves_no_cancel_request_on_the_callers_task() -> None:
    registry = ToolRegistry()
    held = Held("held")
    registry.register(held)
    ctx = ToolContext()
    asyncio.get_running_loop().call_soon(ctx.cancellation.cancel)
    with pytest.raises(RunStoppedError):
        await registry.invoke("held", {}, ctx)
    if sys.version_info >= (3, 11):
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    held.release.set()
    # The task goes on (no cancel is left to land), and a new context runs the tool.
    assert (await registry.invoke("held", {}, ToolContext())).output == "done"


async def test_a_cancel_of_the_callers_task_stays_a_cancel_beside_a_stop() -> None:
    registry = ToolRegistry()
    held = Held("held")
    registry.register(held)
    ctx = ToolContext()
    call = asyncio.ensure_future(registry.invoke("held", {}, ctx))
    await asyncio.wait_for(held.started.wait(), 5)
    call.cancel()  # the caller gives up ...
    ctx.cancellation.cancel()  # ... and a Stop comes too, before the call has seen either
    # Python 3.10 cannot tell a second cancel of a task apart from the first.
    expected: tuple[type[BaseException], ...] = (asyncio.CancelledError,)
    if sys.version_info < (3, 11):
        expected = (asyncio.CancelledError, RunStoppedError)
    with pytest.raises(expected):
        await asyncio.wait_for(call, 5)


def test_definitions_leave_out_tools_the_checker_refuses() -> None:
    registry = ToolRegistry()
    registry.register_all([Recorder("ls", perms=["read"]), Recorder("rm", perms=["delete"])])
    assert [d["function"]["name"] for d in registry.definitions()] == ["ls", "rm"]
    registry.with_permission_checker(PermissionChecker())
    assert [d["function"]["name"] for d in registry.definitions()] == ["ls"]
    assert [d["name"] for d in registry.definitions(api="responses")] == ["ls"]
    assert registry.list_tools() == ["ls", "rm"]


# -- strict mode (issue 8 §3) ------------------------------------------------------------


class Search(BaseTool):
    """A raw-schema tool with an optional parameter."""

    name = "search"
    description = "Search the index."
    parameters = {  # noqa: RUF012
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
        "required": ["query"],
    }

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        self.seen.append(args)
        return len(self.seen)


def test_strict_per_registry_and_per_tool_in_both_apis() -> None:
    registry = ToolRegistry(strict=True)
    assert registry.strict and not ToolRegistry().strict

    @registry.tool
    def forecast(city: str, days: int = 3) -> str:
        """Weather forecast."""
        return city

    @registry.tool(strict=False)
    def loose(city: str, days: int = 3) -> str:
        """Not strict."""
        return city

    chat = {d["function"]["name"]: d["function"] for d in registry.definitions()}
    assert chat["forecast"]["strict"] is True
    assert chat["forecast"]["parameters"]["required"] == ["city", "days"]
    assert "strict" not in chat["loose"] and chat["loose"]["parameters"]["required"] == ["city"]
    flat = {d["name"]: d for d in registry.definitions(api="responses")}
    assert flat["forecast"]["strict"] is True and flat["loose"]["strict"] is False
    assert flat["forecast"]["parameters"] == chat["forecast"]["parameters"]
    assert registry.entry("forecast").strict and not registry.entry("loose").strict  # type: ignore[union-attr]

    plain = ToolRegistry()
    plain.register(FunctionTool(forecast.func, strict=True))
    plain.register(Search())
    flat = {d["name"]: d for d in plain.definitions(api="responses")}
    assert flat["forecast"]["strict"] is True and flat["search"]["strict"] is False


async def test_a_raw_tool_is_made_strict_and_its_nulls_mean_absent() -> None:
    registry = ToolRegistry(strict=True)
    search = Search()
    registry.register(search)
    (definition,) = registry.definitions()
    assert definition["function"]["strict"] is True
    assert definition["function"]["parameters"]["properties"]["limit"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}]
    }
    await registry.invoke("search", {"query": "q", "limit": None})
    await registry.invoke("search", {"query": "q", "limit": 3})
    assert search.seen == [{"query": "q"}, {"query": "q", "limit": 3}]


def test_a_schema_strict_mode_cannot_describe_is_offered_non_strict_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Tagger(Search):
        name = "tagger"
        parameters = {  # noqa: RUF012
            "type": "object",
            "properties": {
                "counts": {"type": "object", "additionalProperties": {"type": "integer"}}
            },
            "required": ["counts"],
        }

    registry = ToolRegistry(strict=True)
    registry.register(Tagger())

    @registry.tool
    def anything(value: Any) -> Any:
        """Echo anything."""
        return value

    with caplog.at_level("WARNING", logger="agcore_tools.registry"):
        definitions = registry.definitions()
        registry.definitions(api="responses")  # worked out once, logged once
    assert all("strict" not in d["function"] for d in definitions)
    assert definitions[0]["function"]["parameters"] == Tagger.parameters
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "tool 'tagger' is offered without strict mode: 'counts' is a map with free keys "
        "(dict[str, ...]), which strict mode cannot describe",
        "tool 'anything' is offered without strict mode: 'value' accepts any JSON value "
        "(typing.Any), which strict mode cannot describe",
    ]


async def test_an_mcp_servers_tools_are_strict_in_a_strict_registry() -> None:
    from agcore_tools import McpClient

    from .mcp.conftest import fixture_stdio

    registry = ToolRegistry(strict=True)
    async with McpClient("fixture", fixture_stdio(), timeout=15) as client:
        registry.register_all(client.into_tools())
        slow = next(d for d in registry.definitions() if d["function"]["name"] == "slow")
        assert slow["function"]["strict"] is True
        marker = slow["function"]["parameters"]["properties"]["marker"]
        assert marker == {"anyOf": [{"type": "string"}, {"type": "null"}]}
        # The model's null for the optional marker never reaches the server, which
        # would refuse it.
        done = await registry.invoke("slow", {"seconds": 0, "marker": None})
        assert done.ok, done.error
        assert done.output == "slept 0.0"


def test_permission_checker_is_a_settable_property() -> None:
    registry = ToolRegistry()

    @registry.tool(permissions=["shell"])
    def run(command: str) -> str:
        """Run a command."""
        return command

    assert len(registry.definitions()) == 1
    registry.permission_checker = PermissionChecker(PermissionConfig())
    assert registry.definitions() == []  # the cached definitions were dropped
    registry.permission_checker = None
    assert len(registry.definitions()) == 1


async def test_a_view_reads_its_registrys_checker_live_until_it_gets_its_own() -> None:
    # A view copied the checker when built: one set on the registry later (consent
    # revoked mid-run) was ignored by every call through a run's view.
    registry = ToolRegistry()

    @registry.tool(permissions=["shell"])
    def run(command: str) -> str:
        """Run a command."""
        return command

    view = registry.view(registry.entries())
    assert len(view.definitions()) == 1
    registry.permission_checker = PermissionChecker(PermissionConfig())
    assert view.permission_checker is registry.permission_checker
    assert view.definitions() == []
    with pytest.raises(PermissionDeniedError):
        await view.invoke("run", {"command": "ls"})

    view.permission_checker = None  # its own now: the registry's no longer applies
    assert (await view.invoke("run", {"command": "ls"})).output == "ls"
    assert registry.permission_checker is not None


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        (PermissionConfig(), "PermissionConfig (wrap it: PermissionChecker(config))"),
        ("x", "str"),
    ],
)
def test_a_permission_checker_of_the_wrong_kind_is_refused_up_front(
    given: object, shown: str
) -> None:
    message = f"ToolRegistry's permission checker must be a PermissionChecker or None, got {shown}"
    with pytest.raises(ToolConfigError) as info:
        ToolRegistry(given)  # type: ignore[arg-type]
    assert str(info.value) == message

    registry = ToolRegistry()
    with pytest.raises(ToolConfigError) as info:
        registry.permission_checker = given  # type: ignore[assignment]
    assert str(info.value) == message
    assert registry.permission_checker is None


def test_with_permission_checker_is_deprecated() -> None:
    registry = ToolRegistry()
    checker = PermissionChecker()
    with pytest.warns(DeprecationWarning, match="registry.permission_checker = checker"):
        assert registry.with_permission_checker(checker) is registry
    assert registry.permission_checker is checker


def test_one_strict_cache_per_entry() -> None:
    registry = ToolRegistry(strict=True)

    @registry.tool
    def find(query: str, limit: int = 3) -> list[str]:
        """Find things."""
        return [query] * limit

    entry = registry.entry("find")
    assert entry is not None
    first = entry.strict_parameters()
    assert first is not None and first["required"] == ["query", "limit"]
    assert entry.strict_parameters() is first
    assert registry.definitions()[0]["function"]["parameters"] == first
