"""A run's CycleConfig as workflow input: everything but what must not be stored; the
payloads as workers of the previous version read them."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest

pytest.importorskip("temporalio")

from temporalio.converter import PayloadConverter

from agcore_tools import CycleConfig, LlmConfigError, ToolRegistry, TrimOldest
from agcore_tools.error import LlmUsageError
from agcore_tools.temporal import ToolActivities, ToolLoopInput
from agcore_tools.temporal._payloads import (
    Catalogue,
    ModelRequest,
    ToolCallInput,
    ToolCallOutput,
    config_fields,
    config_from_fields,
    payload_size,
)


def test_a_config_survives_the_trip_through_json() -> None:
    config = CycleConfig(
        "m",
        max_turns=4,
        tool_timeout_secs=None,
        unknown_tool="tell_model",
        history=TrimOldest(max_messages=20),
        temperature=0.1,
        extra_body={"seed": 7},
    )
    fields = json.loads(json.dumps(config_fields(config)))
    assert config_from_fields(fields) == config


def test_the_calls_per_turn_limit_is_stored_only_when_it_is_not_the_default() -> None:
    # A worker of an earlier version refuses a setting it does not know: the default,
    # which it cannot honour anyway, is left out, so it can still run such a run.
    assert "max_tool_calls_per_turn" not in config_fields(CycleConfig("m"))
    for limit in (5, None):
        config = CycleConfig("m", max_tool_calls_per_turn=limit)
        fields = json.loads(json.dumps(config_fields(config)))
        assert fields["max_tool_calls_per_turn"] == limit
        assert config_from_fields(fields) == config


def test_an_approval_key_is_refused_rather_than_stored_in_history() -> None:
    with pytest.raises(LlmConfigError, match="approval_key") as raised:
        config_fields(CycleConfig("m", approval_key=b"secret"))
    assert "secret" not in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_a_history_policy_other_than_trim_oldest_is_refused() -> None:
    class LastTwo:
        def select(self, messages: list[dict[str, object]]) -> list[dict[str, object]]:
            return messages[-2:]

    with pytest.raises(LlmConfigError, match="TrimOldest history policy only, got LastTwo"):
        config_fields(CycleConfig("m", history=LastTwo()))


@pytest.mark.parametrize("seconds", [0, -5, float("inf"), True, "300"])
def test_a_model_timeout_that_is_no_positive_number_is_refused(seconds: object) -> None:
    # 0 or -5 was taken, and the run stayed RUNNING: its workflow task failed on every retry.
    with pytest.raises(LlmConfigError, match="model_timeout_secs must be positive") as raised:
        ToolLoopInput.of("Hi", CycleConfig("m"), model_timeout_secs=seconds)  # type: ignore[arg-type]
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    ("args", "options", "expected"),
    [
        # A str was read as a list: the run looked for its tools on queues 'g', 'p', ...
        (
            ("Hi", CycleConfig("m")),
            {"tool_task_queues": "gpu-tools"},
            "tool_task_queues=['gpu-tools']",
        ),
        (("Hi", CycleConfig("m")), {"tool_task_queues": ["mcp", ""]}, "non-empty task queue names"),
        (("Hi", CycleConfig("m")), {"messages": "previous chat"}, "messages must be a list"),
        (
            ("Hi", CycleConfig("m")),
            {"messages": ["hi"]},
            "takes messages as dicts, got str at index 0",
        ),
        # Swapped, or a model name for the config: an AttributeError ('approval_key').
        ((CycleConfig("m"), "Hi"), {}, "takes the prompt first and the CycleConfig second"),
        (("Hi", "m"), {}, "got str: use ToolLoopInput.of(prompt, CycleConfig('m'))"),
        # Taken, and the run failed inside the workflow.
        ((5, CycleConfig("m")), {}, "prompt must be a string, or None"),
        (("Hi", CycleConfig("m")), {"system_prompt": 5}, "system_prompt must be a string"),
        # A bare TypeError: 'int' object is not iterable.
        (("Hi", CycleConfig("m")), {"metadata": 5}, "metadata must be a dict or None, got int"),
        (("Hi", CycleConfig("m")), {"code_mode": {"limits": {}}}, "code_mode must be a CodeMode"),
    ],
)
def test_an_argument_of_the_wrong_kind_is_refused_by_of(
    args: tuple[object, ...], options: dict[str, object], expected: str
) -> None:
    with pytest.raises(LlmUsageError, match=re.escape(expected)) as raised:
        ToolLoopInput.of(*args, **options)  # type: ignore[arg-type]
    assert isinstance(raised.value, TypeError)


def test_of_keeps_valid_messages_and_queues_as_given() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    args = ToolLoopInput.of(
        None, CycleConfig("m"), messages=history, tool_task_queues=["mcp", "data", "mcp"]
    )
    assert args.messages == history
    assert args.tool_task_queues == ["mcp", "data"]


def test_of_replaces_a_lone_surrogate_in_the_system_prompt_as_in_the_messages() -> None:
    # Before: the messages were scrubbed but the system prompt kept a file name as
    # os.listdir decodes it, which the workflow's ModelRequest.of could not encode.
    listed = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
    args = ToolLoopInput.of(
        f"Open {listed}",
        CycleConfig("m"),
        system_prompt=f"Files: {listed}",
        messages=[{"role": "user", "content": f"Earlier: {listed}"}],
    )
    assert [m["content"] for m in args.messages] == [
        "Files: caf\ufffd.txt",
        "Earlier: caf\ufffd.txt",
    ]
    ModelRequest.of("chat", False, {"model": "m", "messages": args.messages})  # encodes


# A rolling upgrade: workers of the previous version (0.2.0, and 0653417 before the JSON
# text fields) read the payloads of this one, and the other way round. These are the
# payload classes as those versions read them.
@dataclass(frozen=True)
class OldToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    strict: bool | None
    permissions: list[str]
    approval: str
    tags: list[str]
    category: str | None
    version: str | None
    task_queue: str | None = None
    timeout_secs: float | None = None
    max_attempts: int | None = None
    heartbeat_secs: float | None = None
    output_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class OldCatalogue:
    tools: list[OldToolSpec]
    strict: bool
    permissions: dict[str, Any] | None = None


@dataclass(frozen=True)
class OldToolCallInput:
    name: str
    arguments: dict[str, Any]
    call_id: str | None
    session_id: str
    trace_id: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OldToolCallOutput:
    output: Any = None
    error: str | None = None
    recoverable: bool = True


@dataclass(frozen=True)
class OldModelRequest:
    api: str
    chain: bool
    params: dict[str, Any]


T = TypeVar("T")


def crossed(value: object, as_type: type[T]) -> T:
    """``value`` written by Temporal's default converter and read back as ``as_type``."""
    converter = PayloadConverter.default
    read: T = converter.from_payloads(converter.to_payloads([value]), [as_type])[0]
    return read


def ranking() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool
    def rank(query: str, limit: int = 3) -> dict[str, int]:
        """Rank documents."""
        return {"zebra": 1, "apple": 2}

    return tools


async def test_a_workflow_of_the_previous_version_reads_this_versions_tools() -> None:
    # A tools queue's workers upgraded first: the old workflow offered every tool with
    # {} as its parameters.
    tools = ranking()
    catalogue = await ToolActivities(tools).describe_tools()
    [old] = crossed(catalogue, OldCatalogue).tools
    assert old.parameters == tools.get("rank").parameters
    assert old.output_schema == tools.get("rank").output_schema
    # This version reads the text, in the tool's order.
    [new] = crossed(catalogue, Catalogue).tools
    assert list(new.parameters_schema()["properties"]) == ["query", "limit"]


async def test_a_workflow_of_the_previous_version_reads_this_versions_results() -> None:
    # Its call asks for no text: the result reached the old workflow as null.
    activities = ToolActivities(ranking())
    asked = OldToolCallInput("rank", {"query": "q"}, "c1", "run-1", "trace-1")
    done = await activities.call_tool(crossed(asked, ToolCallInput))
    assert crossed(done, OldToolCallOutput).output == {"zebra": 1, "apple": 2}
    assert done.output_json is None  # a result is written once: it can be large
    # A workflow of this version asks for the text, and reads the tool's key order.
    as_text = ToolCallInput("rank", {"query": "q"}, "c1", "run-1", "trace-1", {}, True)
    done = crossed(await activities.call_tool(as_text), ToolCallOutput)
    assert (done.output, list(done.value())) == (None, ["zebra", "apple"])
    # A worker of the previous version reads that call as it did.
    assert crossed(as_text, OldToolCallInput).arguments == {"query": "q"}


def test_a_worker_of_the_previous_version_sends_this_versions_requests() -> None:
    # It sent the request with no model and no tools: params held only the history.
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"thoughts": {}, "again": {}}},
            },
        }
    ]
    params = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}
    request = ModelRequest.of("chat", False, params)
    assert crossed(request, OldModelRequest).params == params
    read = crossed(request, ModelRequest).parameters()
    assert read == params
    assert list(read["tools"][0]["function"]["parameters"]["properties"]) == [
        "thoughts",
        "again",
    ]
    # The history is written once, as values: not in the text.
    assert request.params_json is not None and "hi" not in request.params_json


def test_a_request_recorded_with_only_its_history_as_values_reads_as_it_did() -> None:
    recorded = ModelRequest("chat", False, {"messages": []}, '{"model":"m","tools":[]}')
    assert recorded.parameters() == {"model": "m", "tools": [], "messages": []}


@pytest.mark.parametrize(("api", "key"), [("chat", "messages"), ("responses", "input")])
def test_a_requests_history_is_written_once_and_not_escaped(api: str, key: str) -> None:
    # On api="responses" the history ("input") went into params_json too, JSON inside
    # JSON: about a fifth larger, nearer the payload limit and the history's cap.
    history = [
        {"role": "user", "content": "x" * 50},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": "b"}'},
    ] * 200
    request = ModelRequest.of(api, False, {"model": "m", key: history})
    assert request.params_json is not None and key not in json.loads(request.params_json)
    assert crossed(request, ModelRequest).parameters() == {"model": "m", key: history}
    as_values = ModelRequest(api, False, {"model": "m", key: history})
    converter = PayloadConverter.default
    assert payload_size(converter, request) < payload_size(converter, as_values) + 100
