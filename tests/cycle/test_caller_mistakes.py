"""What a new user hit (issue 24 §7): each mistake is a TypeError naming the fix, or,
for tools passed without a registry, simply works."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from openai import NOT_GIVEN, OpenAI, pydantic_function_tool
from pydantic import BaseModel

from agcore_tools import (
    AgcoreError,
    CycleConfig,
    FunctionTool,
    LlmConfigError,
    LlmCycle,
    LlmError,
    LlmUsageError,
    PermissionChecker,
    PermissionConfig,
    ToolConfigError,
    ToolRegistry,
    TrimOldest,
    tool,
)
from agcore_tools.cycle import Limits, Retries
from agcore_tools.cycle._policy import check_tool_choice
from agcore_tools.testing import ScriptedChatServer

from .conftest import S, tool_messages

Serve = Callable[..., ScriptedChatServer]


def _tools() -> tuple[FunctionTool[Any, Any], FunctionTool[Any, Any]]:
    # Decorated into a registry of their own: what @tool gives a user, kept out of the
    # process-wide default registry.
    scratch = ToolRegistry()

    @tool(registry=scratch)
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    @tool(registry=scratch)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return get_weather, add


WEATHER = S.reply_tool_calls([("get_weather", {"city": "Oslo"}, "c1")])


def _assert_caller_mistake(error: BaseException) -> None:
    assert isinstance(error, TypeError)
    assert isinstance(error, LlmError) and isinstance(error, AgcoreError)
    assert "\n" not in str(error)


# 1. and 2.: a list, a tuple or one tool instead of a ToolRegistry.


@pytest.mark.parametrize(
    "wrap", [list, tuple, lambda tools: tools[0]], ids=["list", "tuple", "one"]
)
async def test_tools_without_a_registry_run_in_a_fresh_one(
    serve: Serve, make_cycle: Callable[..., LlmCycle], wrap: Callable[[Any], Any]
) -> None:
    server = serve(WEATHER, S.reply_text("Sunny."))
    cycle = make_cycle(server)

    response = await cycle.submit_with_tools("Weather in Oslo?", wrap(_tools()))

    assert response.text == "Sunny."
    assert tool_messages(cycle.messages) == {"c1": "sunny in Oslo"}
    offered = [t["function"]["name"] for t in server.requests[0].json["tools"]]
    assert offered[0] == "get_weather"


@pytest.mark.parametrize("wrap", [list, lambda tools: tools[0]], ids=["list", "one"])
async def test_a_tool_of_a_registry_with_a_checker_is_not_run_without_it(
    serve: Serve, make_cycle: Callable[..., LlmCycle], wrap: Callable[[Any], Any]
) -> None:
    # Passed on its own, it ran in a fresh registry with no checker: a tool the
    # registry's checker denies (delete, by default) ran.
    guarded = ToolRegistry(PermissionChecker(PermissionConfig()))
    deleted: list[str] = []

    @guarded.tool(permissions=["delete"])
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return "deleted"

    server = serve(
        S.reply_tool_calls([("delete_file", {"path": "/important"}, "c1")]), S.reply_text("Done.")
    )
    cycle = make_cycle(server)
    with pytest.raises(LlmError) as caught:
        await cycle.submit_with_tools("Clean up", wrap([delete_file]))
    _assert_caller_mistake(caught.value)
    assert "tool 'delete_file' belongs to a ToolRegistry with a permission checker" in str(
        caught.value
    )
    assert deleted == [] and server.requests == []
    # Tools of registries without a checker still run on their own, as above.
    guarded.permission_checker = None
    response = await cycle.submit_with_tools("Clean up", wrap([delete_file]))
    assert response.text == "Done." and deleted == ["/important"]


class _Files:
    """Method tools of a guarded registry, each looked up anew on every access."""

    __slots__ = ("root",)

    def __init__(self, root: str) -> None:
        self.root = root

    @tool(permissions=["delete"])
    def wipe(self, folder: str) -> str:
        """Wipe a folder."""
        return self.root + folder


class _Plain:
    @tool(permissions=["delete"])
    def wipe(self, folder: str) -> str:
        """Wipe a folder."""
        return folder


@pytest.mark.parametrize("kind", ["classmethod", "slotted", "plain"])
async def test_a_method_tool_of_a_registry_with_a_checker_is_not_run_without_it(
    serve: Serve, make_cycle: Callable[..., LlmCycle], kind: str
) -> None:
    # A classmethod tool, or a method tool of a class with __slots__, is a new object on
    # each lookup: the refusal, which compared identities, let it through in a list.
    guarded = ToolRegistry(PermissionChecker(PermissionConfig()))
    deleted: list[str] = []
    if kind == "classmethod":

        class Files:
            @tool(registry=guarded, permissions=["delete"])
            @classmethod
            def wipe(cls, folder: str) -> str:
                """Wipe a folder."""
                deleted.append(folder)
                return "wiped"

        wipe: Any = Files.wipe
    else:
        files = _Files("/srv/") if kind == "slotted" else _Plain()
        guarded.register(files.wipe)
        wipe = files.wipe
    server = serve(S.reply_tool_calls([("wipe", {"folder": "data"}, "c1")]), S.reply_text("Done."))
    cycle = make_cycle(server)

    with pytest.raises(LlmError, match="tool 'wipe' belongs to a ToolRegistry") as caught:
        await cycle.submit_with_tools("Clean up", [wipe])

    _assert_caller_mistake(caught.value)
    assert deleted == [] and server.requests == []


async def test_the_streaming_variant_takes_a_list_of_tools(
    serve: Serve, make_cycle: Callable[..., LlmCycle]
) -> None:
    server = serve(WEATHER, S.reply_text("Sunny."))
    cycle = make_cycle(server)

    async with cycle.submit_stream_with_tools("Weather?", list(_tools())) as events:
        response = await events.collect()

    assert response.text == "Sunny."


def test_the_sync_variants_take_a_list_of_tools(serve: Serve) -> None:
    server = serve(WEATHER, S.reply_text("Sunny."), WEATHER, S.reply_text("Still sunny."))
    client = OpenAI(base_url=server.base_url, api_key="-", max_retries=0)
    with LlmCycle(CycleConfig("m"), client=client) as cycle:
        assert cycle.submit_with_tools_sync("Weather?", list(_tools())).text == "Sunny."
        weather, _ = _tools()
        events = cycle.submit_stream_with_tools_sync("And now?", weather)
        assert events.collect().text == "Still sunny."


@pytest.mark.parametrize(
    ("tools", "named"),
    [
        ("get_weather", "got str"),
        ({"get_weather": 1}, "got dict"),
        (42, "got int"),
        ([lambda city: city], "got a list holding function '<lambda>' (decorate it with @tool)"),
        ([object()], "got a list holding object"),
    ],
    ids=["str", "dict", "int", "plain-function", "object"],
)
async def test_anything_else_is_a_type_error_naming_what_is_accepted(
    serve: Serve, make_cycle: Callable[..., LlmCycle], tools: Any, named: str
) -> None:
    server = serve()
    cycle = make_cycle(server)

    with pytest.raises(TypeError) as info:
        await cycle.submit_with_tools("hi", tools)

    _assert_caller_mistake(info.value)
    assert str(info.value) == (
        "submit_with_tools() takes a ToolRegistry, a tool (a function decorated with @tool) "
        f"or a list of tools, {named}"
    )
    assert server.requests == []


def test_a_plain_function_passed_alone_is_told_to_use_at_tool(serve: Serve) -> None:
    def get_weather(city: str) -> str:
        return city

    client = OpenAI(base_url=serve().base_url, api_key="-", max_retries=0)
    with (
        LlmCycle(CycleConfig("m"), client=client) as cycle,
        pytest.raises(TypeError, match=r"got function '.*get_weather' \(decorate it with @tool\)"),
    ):
        cycle.submit_with_tools_sync("hi", get_weather)  # type: ignore[arg-type]


# 6.: None is no longer a plain chat.


@pytest.mark.parametrize(
    "method", ["submit_with_tools", "submit_stream_with_tools", "submit_with_tools_sync"]
)
async def test_none_instead_of_tools_names_submit_and_an_empty_registry(
    serve: Serve, make_cycle: Callable[..., LlmCycle], method: str
) -> None:
    server = serve()
    cycle = make_cycle(server)

    with pytest.raises(TypeError) as info:
        result = getattr(cycle, method)("hi", None)
        if method == "submit_with_tools":
            await result

    _assert_caller_mistake(info.value)
    message = str(info.value)
    assert message.startswith(f"{method}() got None instead of tools")
    assert "ToolRegistry() for none" in message and "call submit()" in message
    assert server.requests == []


async def test_an_empty_registry_is_still_a_chat_without_tools(
    serve: Serve, make_cycle: Callable[..., LlmCycle]
) -> None:
    server = serve(S.reply_text("Hi."))
    cycle = make_cycle(server)

    assert (await cycle.submit_with_tools("hi", ToolRegistry())).text == "Hi."
    assert "tools" not in server.requests[0].json


# 3.: a model name instead of a CycleConfig.


def test_a_string_for_the_config_is_refused_at_construction(serve: Serve) -> None:
    client = OpenAI(base_url=serve().base_url, api_key="-")

    with pytest.raises(TypeError) as info:
        LlmCycle("m", client=client)  # type: ignore[arg-type]

    _assert_caller_mistake(info.value)
    assert str(info.value) == (
        "LlmCycle takes a CycleConfig, got str: use LlmCycle(CycleConfig('m'), ...)"
    )


# 4.: a plain for over an EventStream.


@pytest.mark.parametrize("method", ["submit_stream", "submit_stream_with_tools"])
async def test_a_plain_for_over_an_event_stream_names_async_for_and_the_sync_methods(
    serve: Serve, make_cycle: Callable[..., LlmCycle], method: str
) -> None:
    server = serve()
    cycle = make_cycle(server)
    args = ("hi",) if method == "submit_stream" else ("hi", ToolRegistry())
    events = getattr(cycle, method)(*args)

    with pytest.raises(TypeError) as info:
        for _ in events:
            pass

    _assert_caller_mistake(info.value)
    message = str(info.value)
    assert "async for" in message
    assert "submit_stream_with_tools_sync()" in message and "submit_stream_sync()" in message
    await events.aclose()
    assert server.requests == []


# 5.: a misspelt CycleConfig keyword.


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("max_turn", "max_turns"),
        ("temprature", "temperature"),
        ("tool_timout", "tool_timeout"),
        ("max_token", "max_tokens"),
        ("retry_max_dealy", "retry_max_delay"),
        ("top_k", "top_p"),
    ],
)
def test_a_misspelt_keyword_names_the_nearest_valid_one(typo: str, meant: str) -> None:
    with pytest.raises(TypeError) as info:
        CycleConfig("m", **{typo: 3})

    _assert_caller_mistake(info.value)
    assert str(info.value) == (
        f"CycleConfig got an unknown keyword {typo!r}: did you mean {meant}=...? "
        f"(an option only your server knows goes in extra_body={{{typo!r}: ...}})"
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: Limits(max_turn=3),  # type: ignore[call-arg]
            "Limits() got an unknown keyword 'max_turn': did you mean max_turns=...?",
        ),
        (
            lambda: Retries(max_retry=0),  # type: ignore[call-arg]
            "Retries() got an unknown keyword 'max_retry': did you mean max_retries=...?",
        ),
        (
            lambda: replace(Limits(), tool_timout=5),
            "Limits() got an unknown keyword 'tool_timout': did you mean tool_timeout=...?",
        ),
    ],
    ids=["Limits", "Retries", "replace"],
)
def test_a_misspelt_keyword_of_limits_or_retries_names_the_right_one(
    make: Callable[[], object], message: str
) -> None:
    # Before: Python's bare TypeError (they are dataclasses), outside AgcoreError and
    # naming no field, though CycleConfig(max_turn=3) beside them named max_turns.
    with pytest.raises(TypeError) as info:
        make()

    _assert_caller_mistake(info.value)
    assert str(info.value) == message
    assert type(info.value.__cause__) is TypeError  # Python's, kept


@pytest.mark.parametrize(
    ("method", "options", "message"),
    [
        ("LlmCycle", {"sytem_prompt": "Be brief."}, "LlmCycle() got an unknown keyword "),
        ("submit", {"output": int}, "LlmCycle.submit() got an unknown keyword 'output'"),
        ("submit_with_tools", {"selct": ["add"]}, "LlmCycle.submit_with_tools() got an "),
        ("submit_with_tools_sync", {"selct": ["add"]}, "LlmCycle.submit_with_tools_sync() "),
        ("submit_stream_with_tools", {"selct": ["add"]}, "LlmCycle.submit_stream_with_tools"),
    ],
)
async def test_a_misspelt_keyword_of_llmcycle_names_the_right_one(
    serve: Serve,
    make_cycle: Callable[..., LlmCycle],
    method: str,
    options: dict[str, Any],
    message: str,
) -> None:
    # Before: Python's bare TypeError, outside AgcoreError, though LlmUsageError's
    # docstring promised one for a misspelt keyword.
    server = serve(S.reply_text("Hi."))
    cycle = make_cycle(server)

    with pytest.raises(TypeError) as info:
        if method == "LlmCycle":
            LlmCycle(cycle.config, client=cycle.client, **options)
        elif method == "submit_with_tools_sync":
            cycle.submit_with_tools_sync("hi", list(_tools()), **options)
        elif method == "submit":
            await cycle.submit("hi", **options)
        else:
            run = getattr(cycle, method)("hi", list(_tools()), **options)
            if method == "submit_with_tools":
                await run

    _assert_caller_mistake(info.value)
    assert isinstance(info.value, LlmUsageError) and isinstance(info.value, ToolConfigError)
    assert str(info.value).startswith(message) and "did you mean " in str(info.value)
    assert type(info.value.__cause__) is TypeError  # Python's, kept
    assert cycle.messages == [] and server.requests == []


def test_request_options_the_sdk_knows_and_unlike_any_name_still_pass() -> None:
    config = CycleConfig(
        "m",
        max_tokens=5,
        seed=6,
        reasoning_effort="low",
        extra_body={"top_k": 3},
        request_options={"max_turn": 1},  # the mapping is passed on unchecked
    )

    assert dict(config.request_options) == {
        "max_turn": 1,
        "max_tokens": 5,
        "seed": 6,
        "reasoning_effort": "low",
        "extra_body": {"top_k": 3},
    }


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_keyword_the_installed_sdk_does_not_take_is_refused(api: str) -> None:
    # history_policy= (for history=) used to pass the typo check and reach create(),
    # whose bare TypeError came at the first request, the user's message already in
    # the history.
    create = "chat.completions.create" if api == "chat" else "responses.create"
    with pytest.raises(TypeError) as info:
        CycleConfig("m", api=api, history_policy=TrimOldest(max_messages=4))

    _assert_caller_mistake(info.value)
    assert str(info.value) == (
        "CycleConfig got an unknown keyword 'history_policy': neither a CycleConfig "
        f"keyword nor an option of the installed openai package's {create}(); did you "
        "mean history=...? (an option only your server knows goes in "
        "extra_body={'history_policy': ...})"
    )
    with pytest.raises(TypeError, match=r"'some_future_sdk_option'.*extra_body"):
        CycleConfig("m", api=api, some_future_sdk_option=True)


def test_reserved_options_keep_their_own_error() -> None:
    with pytest.raises(ValueError, match="the loop sets them"):
        CycleConfig("m", stream=True)


@pytest.mark.parametrize(
    ("options", "fix"),
    [
        # Each was told "(register tools in a ToolRegistry)", which fits tools only.
        ({"stream": True}, "(stream: call submit_stream() or submit_stream_with_tools() for"),
        ({"messages": []}, "(messages: give them to submit_messages(), or set cycle.messages)"),
        ({"input": "hi"}, "(input: the prompt goes to submit*(), the history in cycle."),
        ({"previous_response_id": "r"}, "(previous_response_id: set chain_responses=True with"),
        ({"request_options": {"model": "x"}}, "(model: pass it as CycleConfig's first argument"),
        ({"tools": []}, "(tools: register tools in a ToolRegistry and pass it to submit_with"),
    ],
)
def test_each_reserved_option_is_told_its_own_fix(options: dict[str, Any], fix: str) -> None:
    with pytest.raises(LlmConfigError) as info:
        CycleConfig("m", **options)
    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)
    assert fix in str(info.value)


# ctx= and select= of the wrong type, refused before the prompt joins the history.


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"ctx": "session-1"}, "ctx must be a ToolContext or None, got str"),
        ({"select": 5}, "select takes tool names (a list), a ToolSelection"),
        ({"select": ["add", 5]}, "select takes tool names (strings), got int 5"),
    ],
    ids=["ctx-str", "select-int", "select-list-of-int"],
)
@pytest.mark.parametrize("method", ["submit_with_tools", "submit_stream_with_tools"])
async def test_a_wrong_ctx_or_select_is_refused_before_the_history_changes(
    serve: Serve,
    make_cycle: Callable[..., LlmCycle],
    method: str,
    options: dict[str, Any],
    named: str,
) -> None:
    server = serve(S.reply_text("Hi."))
    cycle = make_cycle(server)

    with pytest.raises(TypeError) as info:
        run = getattr(cycle, method)("hi", list(_tools()), **options)
        if method == "submit_with_tools":
            await run

    _assert_caller_mistake(info.value)
    assert str(info.value).startswith(named)
    assert cycle.messages == [] and server.requests == []
    # The next submit sends one user message, not two in a row.
    await cycle.submit("hello")
    assert server.requests[0].json["messages"] == [{"role": "user", "content": "hello"}]


@pytest.mark.parametrize(
    ("messages", "named"),
    [
        ("hello", "submit_messages() takes a list of messages (dicts with a role), got str"),
        ({"role": "user", "content": "x"}, "got dict (put one message in a list)"),
        (["hello"], "submit_messages() takes messages as dicts, got str at index 0"),
        ([{"content": "x"}], "got a message with no role at index 0"),
        ([{"role": "user", "content": "a"}, {"role": "usr"}], "role 'usr' at index 1"),
        (5, "got int"),
        (
            [{"role": "user", "content": "2 + 3?"}, [{"role": "tool"}]],
            "got list at index 1 (a list inside the list: extend the history with it, "
            "history += response.output, rather than append it)",
        ),
        (
            [{"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"}],
            "no role at index 0: a message's role is one of system, developer, user, "
            "assistant, tool, function (a Responses API item of type 'function_call', such "
            "as response.output holds: use CycleConfig(api='responses') for such a history)",
        ),
    ],
    ids=[
        "str",
        "dict",
        "list-of-str",
        "no-role",
        "unknown-role",
        "int",
        "appended-list",
        "responses-item",
    ],
)
async def test_submit_messages_takes_a_list_of_messages_with_known_roles(
    serve: Serve, make_cycle: Callable[..., LlmCycle], messages: Any, named: str
) -> None:
    server = serve()
    cycle = make_cycle(server)

    with pytest.raises(TypeError) as info:
        await cycle.submit_messages(messages)

    _assert_caller_mistake(info.value)
    assert named in str(info.value)
    assert cycle.messages == [] and server.requests == []


async def test_a_content_part_given_as_a_message_is_not_called_a_responses_item(
    serve: Serve, make_cycle: Callable[..., LlmCycle]
) -> None:
    # {"type": "text"} is a content part put one level too high, not a Responses item:
    # the hint to use api='responses' would send the user the wrong way.
    cycle = make_cycle(serve())

    with pytest.raises(TypeError) as info:
        await cycle.submit_messages([{"type": "text", "text": "hi"}])

    assert str(info.value).endswith(
        "a message's role is one of system, developer, user, assistant, tool, function"
    )


async def app_history(client: Any, calc: ToolRegistry) -> list[Any]:
    # The cookbook's loop: it appends the SDK's own message objects to its history.
    messages: list[Any] = [{"role": "user", "content": "2 + 3?"}]
    while True:
        completion = await client.chat.completions.create(
            model="m", messages=messages, tools=calc.definitions()
        )
        message = completion.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            return messages
        messages += await calc.run_tool_calls(message.tool_calls)


async def test_submit_messages_reads_the_sdks_message_objects_as_dicts(
    serve: Serve, make_cycle: Callable[..., LlmCycle], calc: ToolRegistry
) -> None:
    server = serve(S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]), S.reply_text("5"))
    cycle = make_cycle(server)
    history = await app_history(cycle.client, calc)
    assert [type(m).__name__ for m in history] == [
        "dict",
        "ChatCompletionMessage",
        "dict",
        "ChatCompletionMessage",
    ]
    server.add(S.reply_text("Tomorrow too."))

    await cycle.submit_messages([*history, {"role": "user", "content": "Tomorrow?"}])

    assert all(type(m) is dict for m in cycle.messages)
    sent = server.requests[-1].json["messages"]
    assert sent[1]["content"] == "" and sent[1]["tool_calls"][0]["id"] == "c1"
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[3]["content"] == "5"


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_dict_built_around_the_sdks_tool_call_objects_is_read_as_dicts(
    serve: Serve, make_cycle: Callable[..., LlmCycle], calc: ToolRegistry, api: str
) -> None:
    # The cookbook's other loop: {"role": "assistant", "tool_calls": message.tool_calls},
    # the SDK's call objects inside a dict (the SDK's create() takes them).
    server = serve(
        S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]), S.reply_text("5"), S.reply_text("5")
    )
    cycle = make_cycle(server, api=api)
    assert cycle.client is not None
    asked = [{"role": "user", "content": "2 + 3?"}]
    completion = await cycle.client.chat.completions.create(
        model="m", messages=asked, tools=calc.definitions()
    )
    message = completion.choices[0].message
    built = {"role": "assistant", "content": message.content, "tool_calls": message.tool_calls}
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
    }

    # Left open in cycle.messages: the resume runs the call (it went unseen, unanswered).
    cycle.messages[:] = [*asked, built]
    await cycle.submit_with_tools(None, calc)
    assert calc.runs == [("add", {"a": 2, "b": 3})]
    assert cycle.messages[1]["tool_calls"] == [call]

    # Answered, through submit_messages: the history stays plain JSON (Responses: no
    # AttributeError converting it).
    other = make_cycle(server, api=api)
    await other.submit_messages([*asked, built, *await calc.run_tool_calls(message.tool_calls)])
    assert other.messages[1]["tool_calls"] == [call]
    json.dumps(other.messages)


async def test_submit_messages_leaves_out_what_the_sdks_parse_helper_added(
    serve: Serve, make_cycle: Callable[..., LlmCycle]
) -> None:
    # chat.completions.parse() answers a ParsedChatCompletionMessage: its parsed answer,
    # tool_calls=None and each call's parsed_arguments are the SDK's, not the API's.
    class Sum(BaseModel):
        a: int
        b: int

    server = serve(S.reply_tool_calls([("Sum", {"a": 2, "b": 3}, "c1")]), S.reply_text("5"))
    cycle = make_cycle(server)
    assert cycle.client is not None
    asked = [{"role": "user", "content": "2 + 3?"}]
    completion = await cycle.client.chat.completions.parse(
        model="m", messages=asked, tools=[pydantic_function_tool(Sum)]
    )
    message = completion.choices[0].message
    assert message.tool_calls and message.tool_calls[0].function.parsed_arguments is not None

    await cycle.submit_messages(
        [*asked, message, {"role": "tool", "tool_call_id": "c1", "content": "5"}]
    )

    sent = server.requests[-1].json["messages"][1]
    assert "parsed" not in sent
    assert sent["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "Sum", "arguments": '{"a": 2, "b": 3}'},
        }
    ]


@pytest.mark.parametrize("kind", ["response_format", "tools"])
async def test_a_parse_helper_answer_put_in_a_chat_history_goes_without_what_the_sdk_added(
    serve: Serve, make_cycle: Callable[..., LlmCycle], kind: str
) -> None:
    # Its to_dict() in cycle.messages went out with "parsed" (and each call's
    # parsed_arguments), keys Chat Completions refuses; the history keeps them.
    class Sum(BaseModel):
        a: int
        b: int

    first = (
        S.reply_text('{"a": 2, "b": 3}')
        if kind == "response_format"
        else S.reply_tool_calls([("Sum", {"a": 2, "b": 3}, "c1")])
    )
    server = serve(first, S.reply_text("5"))
    cycle = make_cycle(server)
    assert cycle.client is not None
    asked = [{"role": "user", "content": "2 + 3?"}]
    options: dict[str, Any] = (
        {"response_format": Sum}
        if kind == "response_format"
        else {"tools": [pydantic_function_tool(Sum)]}
    )
    completion = await cycle.client.chat.completions.parse(model="m", messages=asked, **options)
    message = completion.choices[0].message.to_dict()
    answers = [{"role": "tool", "tool_call_id": "c1", "content": "5"}] if kind == "tools" else []
    cycle.messages[:] = [*asked, message, *answers]
    kept = copy.deepcopy(message)

    await cycle.submit("And 3 + 4?")

    sent = server.requests[-1].json["messages"][1]
    expected = {k: v for k, v in message.items() if k not in ("parsed", "tool_calls")}
    if kind == "tools":
        function = {"name": "Sum", "arguments": '{"a": 2, "b": 3}'}
        expected["tool_calls"] = [{"id": "c1", "type": "function", "function": function}]
    assert sent == expected
    assert cycle.messages[1] == kept  # the history as the app put it


@pytest.mark.parametrize(
    ("api", "named"),
    [("chat", "response_format"), ("responses", "response_format"), ("responses", "text")],
)
def test_a_pydantic_model_as_response_format_is_refused_when_the_config_is_made(
    api: str, named: str
) -> None:
    # What an app moving from chat.completions.parse(response_format=Model) writes: it
    # was taken, and each submit*() put the prompt in the history, then failed unsent
    # with the SDK's bare TypeError (Chat) or an AttributeError of the Responses wire.
    class Answer(BaseModel):
        x: int

    given: dict[str, Any] = (
        {"text": {"format": Answer}} if named == "text" else {"response_format": Answer}
    )
    with pytest.raises(LlmConfigError) as caught:
        CycleConfig("m", api=api, **given)  # type: ignore[arg-type]
    shown = "text['format']" if named == "text" else named
    assert str(caught.value) == (
        f"CycleConfig.{shown} must be a mapping, such as {{'type': 'json_object'}}, got the "
        "class Answer: for an answer validated into a type (what the SDK's parse() does), "
        "pass output_type= to submit*() instead"
    )
    # A mapping, and the SDK's "not given" marker, are taken as before.
    assert CycleConfig("m", api=api, response_format={"type": "json_object"}).api == api  # type: ignore[arg-type]
    assert CycleConfig("m", api=api, response_format=NOT_GIVEN).api == api  # type: ignore[arg-type]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_submit_messages_ending_with_unanswered_calls_is_refused_unsent(
    serve: Serve, make_cycle: Callable[..., LlmCycle], calc: ToolRegistry, api: str
) -> None:
    # An app's own loop handed over before it ran the last message's calls: sent, the
    # request has a call without its answer, which every API refuses (a 400).
    server = serve(S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]))
    cycle = make_cycle(server, api=api)
    assert cycle.client is not None
    asked = [{"role": "user", "content": "2 + 3?"}]
    if api == "chat":
        completion = await cycle.client.chat.completions.create(
            model="m", messages=asked, tools=calc.definitions()
        )
        history = [*asked, completion.choices[0].message]
    else:
        response = await cycle.client.responses.create(
            model="m", input=asked, tools=calc.definitions(api="responses")
        )
        history = [*asked, *response.output]
    cycle.messages[:] = [{"role": "system", "content": "Be brief."}]

    with pytest.raises(TypeError) as info:
        await cycle.submit_messages(history)

    _assert_caller_mistake(info.value)
    assert "(c1 to add)" in str(info.value) and "submit_with_tools(None" in str(info.value)
    assert len(server.requests) == 1 and calc.runs == []
    assert cycle.messages == [{"role": "system", "content": "Be brief."}]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_submit_messages_of_nothing_on_a_history_ending_with_open_calls_is_refused(
    serve: Serve, make_cycle: Callable[..., LlmCycle], calc: ToolRegistry, api: str
) -> None:
    # A call without tools ends with the model's calls for the app to run; resending
    # the history before they are answered sends a request every API refuses (a 400).
    server = serve(S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]), S.reply_text("5"))
    cycle = make_cycle(server, api=api)
    await cycle.submit("2 + 3?")
    history = json.loads(json.dumps(cycle.messages))

    with pytest.raises(TypeError) as info:
        await cycle.submit_messages([])

    _assert_caller_mistake(info.value)
    assert "history ends with tool calls" in str(info.value)
    assert "(c1 to add)" in str(info.value) and "submit_with_tools(None" in str(info.value)
    assert len(server.requests) == 1 and calc.runs == []
    assert cycle.messages == history
    # Answered, the history goes out as it is.
    cycle.messages.extend(await calc.run_tool_calls(cycle.messages[-1]["tool_calls"]))
    assert (await cycle.submit_messages([])).text == "5"
    assert len(server.requests) == 2


async def test_a_history_holding_something_else_than_dicts_is_refused_naming_it(
    serve: Serve, make_cycle: Callable[..., LlmCycle], calc: ToolRegistry
) -> None:
    server = serve(S.reply_tool_calls([("add", {"a": 2, "b": 3}, "c1")]), S.reply_text("5"))
    cycle = make_cycle(server)
    history = await app_history(cycle.client, calc)
    sent = len(server.requests)
    cycle.messages[:] = history

    for call in (
        lambda: cycle.submit_with_tools("Tomorrow?", calc),
        lambda: cycle.submit_stream("Tomorrow?").collect(),
        lambda: cycle.submit_messages([]),
    ):
        with pytest.raises(
            TypeError, match=r"cycle\.messages\[1\] is a ChatCompletionMessage"
        ) as info:
            await call()
        _assert_caller_mistake(info.value)
        assert "message.to_dict()" in str(info.value)
    assert cycle.messages == history and len(server.requests) == sent
    cycle.messages[1:2] = ["Adding."]
    with pytest.raises(TypeError, match=r"cycle\.messages\[1\] is a str, not a dict"):
        await cycle.submit("Tomorrow?")
    # cycle.messages.append(more) where extend was meant: a list in the list.
    cycle.messages[1:2] = [[{"role": "assistant", "content": "Adding."}]]
    with pytest.raises(TypeError, match=r"\[1\] is a list, not a dict: .* extend the history"):
        await cycle.submit("Tomorrow?")


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (
            lambda client: LlmCycle(CycleConfig("m"), client=client, system_prompt=5),
            "system_prompt is a string or None, got int",
        ),
        (
            lambda client: CycleConfig("m", request_options=["temperature"]),
            "request_options must be a mapping",
        ),
        (
            lambda client: CycleConfig("m", api="responses", chain_responses="yes"),
            "chain_responses must be True or False, got 'yes'",
        ),
        (
            lambda client: CycleConfig("m", api="responses", chain_responses=1),
            "chain_responses must be True or False, got 1",
        ),
        (
            lambda client: CycleConfig("m", chain_responses=None),
            "chain_responses must be True or False, got None",
        ),
        (
            lambda client: TrimOldest(max_messages="20"),
            "max_messages must be an integer at least 1 or None, got '20'",
        ),
        (
            lambda client: TrimOldest(max_chars=2.5),
            "max_chars must be an integer at least 1 or None, got 2.5",
        ),
    ],
    ids=[
        "system_prompt",
        "request_options",
        "chain_responses-str",
        "chain_responses-int",
        "chain_responses-none",
        "trim-str",
        "trim-float",
    ],
)
def test_a_setting_of_the_wrong_type_is_refused_at_construction(
    serve: Serve, make: Callable[[OpenAI], Any], named: str
) -> None:
    client = OpenAI(base_url=serve().base_url, api_key="-")

    with pytest.raises((TypeError, ValueError)) as info:
        make(client)

    assert isinstance(info.value, LlmError) and isinstance(info.value, AgcoreError)
    assert "\n" not in str(info.value)
    assert named in str(info.value)
    client.close()


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    ("name", "select", "hint", "offered"),
    [
        ("get_wether", None, " (did you mean 'get_weather'?)", "get_weather, add"),
        ("get_weather", ["add"], "", "add"),
    ],
    ids=["typo", "left-out-by-select"],
)
async def test_a_tool_choice_naming_a_tool_not_offered_is_refused_before_sending(
    serve: Serve,
    make_cycle: Callable[..., LlmCycle],
    api: str,
    name: str,
    select: list[str] | None,
    hint: str,
    offered: str,
) -> None:
    # It was sent: llama-cpp-python answered 500 "Tool with name ... not found in tools",
    # retried 3 times.
    server = serve(S.reply_text("never sent"))
    choice = (
        {"type": "function", "function": {"name": name}}
        if api == "chat"
        else {"type": "function", "name": name}
    )
    cycle = make_cycle(server, api=api, tool_choice=choice)

    with pytest.raises(LlmConfigError) as info:
        await cycle.submit_with_tools("Weather in Oslo?", list(_tools()), select=select)

    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)
    assert str(info.value) == (
        f"tool_choice names '{name}', which this request does not offer{hint}: the tools "
        f"offered are {offered}; name one of them, or offer it (submit_with_tools' "
        "registry, its select=)"
    )
    assert server.requests == [] and cycle.messages == []


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize(
    "choice",
    [{"type": "custom", "name": "add"}, {"type": "custom", "custom": {"name": "add"}}],
    ids=["responses-shape", "chat-shape"],
)
async def test_a_tool_choice_forcing_a_custom_tool_is_refused_before_sending(
    serve: Serve, make_cycle: Callable[..., LlmCycle], api: str, choice: dict[str, Any]
) -> None:
    # The loop offers function tools only: sent, the request forced a tool it does not
    # offer as a custom one (and Chat Completions read the Responses shape as missing
    # its "custom" field), which the API refuses.
    server = serve(S.reply_text("never sent"))
    cycle = make_cycle(server, api=api, tool_choice=choice)

    with pytest.raises(LlmConfigError) as info:
        await cycle.submit_with_tools("2 + 3?", list(_tools()))

    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)
    assert str(info.value).startswith("tool_choice forces the custom tool 'add', but the loop")
    assert "{'type': 'function', 'name': 'add'}" in str(info.value)
    assert server.requests == [] and cycle.messages == []


@pytest.mark.parametrize(
    "choice",
    [{"type": "custom"}, {"type": "custom", "custom": "grep"}, {"type": "custom", "name": None}],
    ids=["no-name", "custom-not-a-dict", "name-none"],
)
def test_a_custom_tool_choice_without_a_name_is_refused_without_inventing_one(
    choice: dict[str, Any],
) -> None:
    # The refusal read a missing name as the tool 'None' and told the caller to force
    # the function tool 'None' instead.
    tools = [{"type": "function", "function": {"name": "add"}}]

    with pytest.raises(LlmConfigError) as info:
        check_tool_choice({"tools": tools, "tool_choice": choice})

    assert "None" not in str(info.value)
    assert str(info.value).startswith("tool_choice forces a custom tool, but the loop")
    assert "force a function tool instead, {'type': 'function', 'name': ...}" in str(info.value)


def test_a_tool_choice_naming_a_tool_not_offered_lists_a_bounded_number() -> None:
    tools = [{"type": "function", "function": {"name": f"tool_{n}"}} for n in range(40)]
    choice = {"type": "function", "function": {"name": "tool_x"}}

    with pytest.raises(
        LlmConfigError,
        match=r"does not offer \(did you mean .tool_9.\?\): 40 tools are offered; name one",
    ):
        check_tool_choice({"tools": tools, "tool_choice": choice})
