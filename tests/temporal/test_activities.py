"""ToolActivities called directly, as a worker calls them (no server needed)."""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadConverter
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agcore_tools import (
    BaseTool,
    McpClient,
    Permission,
    PermissionChecker,
    PermissionConfig,
    StdioTransport,
    ToolConfigError,
    ToolContext,
    ToolRegistry,
)
from agcore_tools.error import ClientTypeError
from agcore_tools.temporal import ToolActivities, ToolActivityOptions
from agcore_tools.temporal._payloads import (
    ModelRequest,
    ProgramStepInput,
    ToolCallInput,
    permission_config,
    permissions_of,
)
from agcore_tools.testing import ScriptedChatServer
from tests.mcp.conftest import SERVERS

S = ScriptedChatServer


def registry() -> ToolRegistry:
    tools = ToolRegistry(PermissionChecker(PermissionConfig(ask=["write"])), strict=True)

    @tools.tool(permissions=["read"], tags=["math"], category="calc")
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @tools.tool(needs_approval=True)
    def wipe() -> str:
        """Wipe."""
        return "wiped"

    @tools.tool(needs_approval=lambda args, ctx: args["n"] > 2)
    def spend(n: int) -> int:
        """Spend."""
        return n

    @tools.tool
    def fail() -> None:
        """Fail."""
        raise LookupError("nothing here")

    @tools.tool
    def big(size: int) -> str:
        """Big."""
        return "x" * size

    return tools


def call(name: str, **arguments: object) -> ToolCallInput:
    # As a workflow of this version sends it: asking for the result as JSON text, and
    # wrapping an MCP tool's plain value again for a program.
    metadata = {"user": "ann"}
    return ToolCallInput(name, dict(arguments), "c1", "run-1", "trace-1", metadata, True, True)


def test_options_for_tools_the_registry_lacks_are_a_caller_error() -> None:
    with pytest.raises(ToolConfigError, match="lacks: nope") as raised:
        ToolActivities(registry(), options={"nope": ToolActivityOptions(max_attempts=1)})
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"timeout": -1}, "timeout must be positive seconds"),
        ({"timeout": 0}, "timeout must be positive seconds"),
        ({"timeout_secs": float("inf")}, "timeout must be positive seconds"),
        ({"timeout": "5"}, "timeout must be positive seconds"),
        ({"max_attempts": -3}, "max_attempts must be an int of at least 1"),
        ({"max_attempts": 0}, "max_attempts must be an int of at least 1"),
        ({"max_attempts": 1.5}, "max_attempts must be an int of at least 1"),
    ],
)
def test_activity_options_that_no_activity_can_take_are_a_caller_error(
    options: dict[str, object], problem: str
) -> None:
    # -1 or -3 hung every run calling the tool; 0 was quietly the run's default.
    with pytest.raises(ToolConfigError, match=problem) as raised:
        ToolActivityOptions(**options)  # type: ignore[arg-type]
    assert isinstance(raised.value, ValueError)


async def test_describe_carries_definitions_rules_and_options() -> None:
    options = {"add": ToolActivityOptions(timeout_secs=5, max_attempts=2, task_queue="calc")}
    catalogue = await ToolActivities(registry(), options=options).describe_tools()
    specs = {spec.name: spec for spec in catalogue.tools}
    assert list(specs) == ["add", "wipe", "spend", "fail", "big"]
    add = specs["add"]
    assert (add.permissions, add.tags, add.category) == (["read"], ["math"], "calc")
    assert (add.timeout_secs, add.max_attempts, add.task_queue) == (5, 2, "calc")
    assert add.parameters_schema()["required"] == ["a", "b"]
    assert [specs[n].approval for n in ("add", "wipe", "spend")] == ["never", "always", "per_call"]
    assert catalogue.strict is True
    assert catalogue.permissions is not None and catalogue.permissions["ask"] == ["write"]


async def test_custom_permissions_stay_custom_through_the_description() -> None:
    # They came back as built-in names: "billing:refund" failed the run, and a custom
    # permission named "read" would have turned into the built-in.
    refund, read = Permission.custom("billing:refund"), Permission.custom("read")
    config = PermissionConfig(allowed=["read", read], denied=[refund], ask=[read])
    tools = ToolRegistry(PermissionChecker(config))

    @tools.tool(permissions=[read, "read"])
    def peek() -> str:
        """Peek."""
        return "seen"

    catalogue = await ToolActivities(tools).describe_tools()
    assert catalogue.permissions is not None
    assert permission_config(catalogue.permissions) == config
    assert permissions_of(catalogue.tools[0].permissions) == (read, Permission.READ)


async def test_an_mcp_plain_value_stays_wrapped_for_a_workflow_that_cannot_wrap_it_again() -> None:
    # The SDK sends count's int as {"result": 3}. A workflow of an earlier version hands
    # a program what the activity returns, and its listing says {result: int}.
    transport = StdioTransport(sys.executable, [str(SERVERS / "wrapped_server.py")])
    async with McpClient("notes", transport, timeout=15) as client:
        tools = ToolRegistry()
        tools.register_all(client.into_tools())
        activities = ToolActivities(tools)
        counted = call("count", text="one two three")
        assert (await activities.call_tool(counted)).value() == 3
        earlier = dataclasses.replace(counted, unwraps=False)
        assert (await activities.call_tool(earlier)).value() == {"result": 3}


async def test_an_mcp_task_waiting_for_input_no_one_can_give_is_cancelled(
    tmp_path: Path,
) -> None:
    # A 2026-07-28 task asking a question with no elicitation_handler to answer it: an
    # activity cannot pause the run for it, and nothing retries it. The call failed
    # saying "answer it with McpTask.answer()", and the task waited on the server.
    store = tmp_path / "tasks.json"
    server = [str(SERVERS / "task_server.py"), "--stdio", "--store", str(store)]
    async with McpClient("ci", StdioTransport(sys.executable, server), timeout=15, tasks=True) as c:
        tools = ToolRegistry()
        tools.register_all(c.into_tools(tasks=["ask"]))
        done = await ActivityEnvironment().run(
            ToolActivities(tools).call_tool, call("ask", question="Colour?")
        )
    data = json.loads(store.read_text())
    [(task_id, record)] = data["tasks"].items()
    assert data["cancels"] == [task_id] and record["cancelled_at"] is not None
    assert done.recoverable is False
    assert done.error == (
        f"MCP server 'ci': task '{task_id}' of tool 'ask' waits for input (q1) that this "
        "client has no handler for, and its call cannot pause for an answer here; the "
        "client cancelled it (tasks/cancel)"
    )


async def test_a_call_returns_its_output_or_its_error() -> None:
    activities = ToolActivities(registry())
    assert (await activities.call_tool(call("add", a=2, b=3))).value() == 5
    failed = await activities.call_tool(call("fail"))
    assert failed.error == "tool 'fail' failed: LookupError: nothing here"
    assert failed.recoverable is True
    unknown = await activities.call_tool(call("nope"))
    assert unknown.recoverable is False
    assert unknown.error is not None
    assert unknown.error.startswith("tool 'nope' is not registered: the tools offered are: add, ")


async def test_a_call_the_workflow_screened_logs_no_skipped_approval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The workflow asked before it scheduled the call: the registry's warning for a
    # direct call that skips approval (invoke_all()) would be a false alarm here.
    activities = ToolActivities(registry())
    with caplog.at_level("WARNING", logger="agcore_tools.registry"):
        assert (await activities.call_tool(call("wipe"))).value() == "wiped"
    assert "without asking" not in caplog.text


async def test_a_per_call_approval_rule_runs_on_the_worker() -> None:
    activities = ToolActivities(registry())
    assert await activities.needs_approval(call("spend", n=3)) is True
    assert await activities.needs_approval(call("spend", n=1)) is False
    assert await activities.needs_approval(call("wipe")) is True


async def test_an_approval_rule_is_asked_on_the_worker_as_the_loop_asks_it() -> None:
    # An async callable object ran as a sync function, and a sync function handing
    # back its async check's coroutine counted as True (a coroutine's truth), unawaited.
    class OverLimit:
        async def __call__(self, args: dict[str, Any], ctx: ToolContext) -> bool:
            return bool(args["amount"] > 100)

    async def over_limit(args: dict[str, Any], ctx: ToolContext) -> bool:
        return bool(args["amount"] > 100)

    def wraps_async(args: dict[str, Any], ctx: ToolContext) -> Any:
        return over_limit(args, ctx)

    tools = ToolRegistry()
    for name, rule in (("pay_object", OverLimit()), ("pay_wrapped", wraps_async)):

        @tools.tool(name=name, needs_approval=rule)
        def pay(amount: int) -> str:
            """Pay."""
            return "paid"

    activities = ToolActivities(tools)
    for name in ("pay_object", "pay_wrapped"):
        assert await activities.needs_approval(call(name, amount=500)) is True
        assert await activities.needs_approval(call(name, amount=5)) is False


async def test_a_result_over_the_limit_fails_without_retries() -> None:
    activities = ToolActivities(registry(), max_result_bytes=1024)
    # 926 characters make a payload of 1024 bytes: {..., "output_json":"\\"xx...\\"", ...}
    assert (await activities.call_tool(call("big", size=926))).value() == "x" * 926
    with pytest.raises(ApplicationError) as raised:
        await activities.call_tool(call("big", size=927))
    assert raised.value.non_retryable is True
    assert raised.value.type == "ToolResultTooLarge"
    assert raised.value.message.startswith(
        "result of tool 'big' is 1025 bytes, over the 1024-byte limit"
    )


@pytest.mark.parametrize("limit", [None, "1MB", -1, 0, 1000, True, 1.5, 3 * 1024 * 1024])
def test_a_result_limit_no_payload_can_keep_is_a_caller_error(limit: object) -> None:
    # None (CycleConfig's "no limit") failed every call after its tool ran, retried:
    # the tool ran four times. 0 refused every result; 3 MiB let through payloads the
    # server refuses, again retried.
    with pytest.raises(ToolConfigError) as raised:
        ToolActivities(registry(), max_result_bytes=limit)  # type: ignore[arg-type]
    assert isinstance(raised.value, ValueError)
    assert str(raised.value) == (
        "ToolActivities max_result_bytes must be an int from 1024 to 2097152 (Temporal's "
        f"payload limit), got {limit!r}"
    )
    ToolActivities(registry(), max_result_bytes=2 * 1024 * 1024)  # the payload limit: taken


@pytest.mark.parametrize("given", [None, "registry"])
def test_a_registry_that_is_no_tool_registry_is_a_caller_error(given: object) -> None:
    # An AttributeError: ... has no attribute 'list_tools'.
    with pytest.raises(ToolConfigError, match="ToolActivities takes a ToolRegistry, got"):
        ToolActivities(given)  # type: ignore[arg-type]


def test_a_client_that_is_no_async_openai_is_a_caller_error() -> None:
    # An AttributeError: 'str' object has no attribute 'with_options'.
    with pytest.raises(ClientTypeError) as raised:
        ToolActivities(registry(), "sk-s3cret")  # type: ignore[arg-type]
    assert isinstance(raised.value, TypeError)
    assert "takes an openai.AsyncOpenAI client or None, got str" in str(raised.value)
    assert "s3cret" not in str(raised.value)


class Refusing(PayloadConverter):
    """A worker's own payload converter, which fails on what it is given."""

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        raise ValueError("this converter takes no tool results")

    def from_payloads(
        self, payloads: Sequence[Payload], type_hints: list[type] | None = None
    ) -> list[Any]:
        raise ValueError("this converter reads nothing")


async def test_a_result_that_cannot_be_returned_fails_without_retries() -> None:
    # The error was retried, running the tool again on every attempt.
    ran: list[int] = []
    tools = ToolRegistry()

    @tools.tool
    def charge(amount: int) -> str:
        """Charge."""
        ran.append(amount)
        return "charged"

    env = ActivityEnvironment()
    env.payload_converter = Refusing()
    with pytest.raises(ApplicationError) as raised:
        await env.run(ToolActivities(tools).call_tool, call("charge", amount=5))
    assert (raised.value.non_retryable, raised.value.type) == (True, "ToolResultNotReturned")
    assert raised.value.message == (
        "tool 'charge' ran, but its result could not be returned: ValueError: this converter "
        "takes no tool results"
    )
    assert isinstance(raised.value.__cause__, ValueError)
    assert ran == [5]


async def test_a_lone_surrogate_in_a_result_becomes_a_replacement_character() -> None:
    # Before: pydantic refused to write it, so the call failed as ToolResultNotReturned
    # (not retryable), while LlmCycle sends the same result with U+FFFD in its place.
    tools = ToolRegistry()

    @tools.tool
    def list_dir() -> list[str]:
        """The names in a folder: one was not UTF-8, as os.listdir decodes it."""
        return ["report.txt", b"caf\xe9.txt".decode("utf-8", "surrogateescape")]

    activities = ToolActivities(tools)
    for as_text in (True, False):
        done = await activities.call_tool(dataclasses.replace(call("list_dir"), as_text=as_text))
        assert done.error is None
        assert done.value() == ["report.txt", "caf\ufffd.txt"]


def accented() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool
    def accents(n: int) -> str:
        """Accents."""
        return "é" * n

    return tools


async def test_a_result_is_measured_as_its_payload_writes_non_ascii_text() -> None:
    # 309 accents are 620 bytes of UTF-8 JSON, which passed; Temporal's converter writes
    # each as a 6-byte escape, and the server refused the payload on every retry, running
    # the tool again each time.
    activities = ToolActivities(accented(), max_result_bytes=1024)
    with pytest.raises(ApplicationError) as raised:
        await activities.call_tool(call("accents", n=309))
    assert raised.value.non_retryable is True
    assert raised.value.message.startswith(
        "result of tool 'accents' is 1952 bytes, over the 1024-byte limit"
    )


def french_tool(number: int) -> BaseTool:
    class Outil(BaseTool):
        name = f"outil_{number}"
        description = "Décrit l'élément. " + "é" * 40_000

        async def execute(self, args: dict[str, Any], ctx: ToolContext) -> str:
            return "ok"

    return Outil()


async def test_tools_are_measured_as_their_payload_writes_non_ascii_text() -> None:
    # 20 descriptions of 40,000 accents are 1.6 MB of UTF-8, which passed; as a payload
    # they are 4.8 MB, and the run's workflow task failed on every retry.
    tools = ToolRegistry()
    tools.register_all([french_tool(number) for number in range(20)])
    with pytest.raises(ApplicationError) as raised:
        await ToolActivities(tools).describe_tools()
    assert (raised.value.non_retryable, raised.value.type) == (True, "ToolCatalogueTooLarge")
    assert raised.value.message.startswith("this worker's 20 tools describe to 48")


async def test_a_program_step_whose_output_is_over_the_limit_fails_without_retries() -> None:
    pytest.importorskip("pydantic_monty")
    # Its snapshot (~1.3 MB) fits in a payload; with the 1 MB it printed, the output
    # does not, and the worker could not send it on any attempt.
    functions = {"add": ["add", ["a", "b"], ["a", "b"]]}
    code = "big = 'y' * 1_000_000\nprint('z' * {})\nn = await add(1, 2)\nlen(big) + n"
    step = ToolActivities(registry()).program_step
    waiting = await ActivityEnvironment().run(
        step, ProgramStepInput(code.format(1000), functions, {})
    )
    assert waiting.pending == [0]
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(
            step, ProgramStepInput(code.format(1_000_000), functions, {})
        )
    assert raised.value.non_retryable is True
    assert raised.value.type == "ProgramSnapshotTooLarge"
    assert raised.value.message.startswith("the output of a code-mode program's step is 23")
    assert "1000001 characters printed), over the 2097152-byte payload limit" in (
        raised.value.message
    )


async def test_a_program_step_whose_state_cannot_be_dumped_fails_without_retries() -> None:
    pytest.importorskip("pydantic_monty")
    # About 15 MB of a 16 MiB heap: the stretch runs, but dumping it needs more memory.
    functions = {"add": ["add", ["a", "b"], ["a", "b"]]}
    code = "rows = [str(i) * 10 for i in range(90_000)]\nn = await add(1, 2)\nlen(rows) + n"
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(
            ToolActivities(registry()).program_step,
            ProgramStepInput(code, functions, {"max_memory": 16 * 1024 * 1024}),
        )
    assert raised.value.non_retryable is True
    assert raised.value.type == "ProgramSnapshotTooLarge"
    assert raised.value.message.startswith(
        "the state of a code-mode program cannot be saved between its steps (MemoryError: "
    )
    assert raised.value.message.endswith("; keep less data in the program's variables")


async def test_a_program_value_json_cannot_hold_is_the_programs_error_not_a_retry() -> None:
    pytest.importorskip("pydantic_monty")
    step = ToolActivities(registry()).program_step
    done = await ActivityEnvironment().run(
        step, ProgramStepInput("print('hi')\n{frozenset([1]): 'a'}", {}, {})
    )
    assert done.error is not None and done.report is not None
    assert done.error.startswith("the program's value cannot be returned: TypeError: ")
    assert done.report.startswith("The program printed:\nhi\n")
    binary = await ActivityEnvironment().run(
        step, ProgramStepInput("import hashlib\nhashlib.sha256(b'x').digest()", {}, {})
    )
    assert binary.output == "[32 bytes of binary data: return bytes.hex() or base64 text instead]"


async def test_a_snapshot_that_cannot_be_loaded_fails_the_step_without_retries() -> None:
    pytest.importorskip("pydantic_monty")
    garbage = base64.b64encode(b"not a dump").decode()
    step = ProgramStepInput("await add(1, 2)", {}, {}, garbage, [0], {"0": {"return_value": 3}})
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(ToolActivities(registry()).program_step, step)
    assert (raised.value.non_retryable, raised.value.type) == (True, "ApprovalError")
    assert raised.value.message.startswith(
        "the paused program cannot be loaded from its snapshot (MontyRuntimeError: "
    )


async def test_model_errors_are_retryable_unless_a_retry_cannot_help() -> None:
    request = ModelRequest("chat", False, {"model": "m", "messages": []})
    script = [S.error(400, "bad request", type="invalid_request_error"), S.error(503, "busy")]
    with S(script) as server:
        async with server.client() as client:
            activities = ToolActivities(registry(), client)
            with pytest.raises(ApplicationError) as refused:
                await activities.model_request(request)
            with pytest.raises(ApplicationError) as busy:
                await activities.model_request(request)
    assert (refused.value.non_retryable, refused.value.type) == (True, "ModelRequestRefused")
    assert (busy.value.non_retryable, busy.value.type) == (False, "InternalServerError")
    assert "chat completion request failed: BadRequestError" in refused.value.message


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("body", [["SECRET"], "SECRET", 12345, None], ids=repr)
async def test_an_answer_that_is_no_json_object_fails_the_request_and_is_not_retried(
    api: str, body: Any
) -> None:
    # Returned as it was, the workflow could not decode it as the dict it awaits: each
    # workflow task failed, and the run was retried until its timeout, or forever.
    from agcore_tools.testing import RawResponse

    request = ModelRequest(api, False, {"model": "m", "messages": []})
    with S([RawResponse(200, body)]) as server:
        async with server.client() as client:
            with pytest.raises(ApplicationError) as refused:
                await ToolActivities(registry(), client).model_request(request)
    assert refused.value.non_retryable is True
    kind = type(body).__name__
    assert refused.value.message == (
        f"the model's response is malformed: the body is {kind}, not an object"
    )
    assert "SECRET" not in refused.value.message


async def test_a_background_responses_request_fails_unsent_and_is_not_retried() -> None:
    # The activity never streams: sent, the answer was a queued response with no output.
    asked = {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}
    with S([S.reply_text("Hello")]) as server:
        async with server.client() as client:
            activities = ToolActivities(registry(), client)
            with pytest.raises(ApplicationError) as refused:
                await activities.model_request(
                    ModelRequest("responses", False, {**asked, "background": True})
                )
            assert server.requests == []
            answer = await activities.model_request(
                ModelRequest("responses", False, {**asked, "background": False})
            )
    assert (refused.value.non_retryable, refused.value.type) == (True, "LlmConfigError")
    assert refused.value.message.startswith("CycleConfig(background=True) needs a streamed run")
    assert answer["output"][0]["content"][0]["text"] == "Hello"


async def test_every_attempt_of_a_call_sends_the_same_idempotency_key() -> None:
    from temporalio.testing import ActivityEnvironment

    keys: list[str | None] = []
    tools = ToolRegistry()

    @tools.tool
    def charge(amount: int, ctx: ToolContext) -> str:
        """Charge."""
        keys.append(ctx.idempotency_key)
        return "charged"

    activities = ToolActivities(tools)
    for attempt in (1, 2):  # a retry after a lost worker is a new attempt of the same call
        env = ActivityEnvironment()
        env.info = dataclasses.replace(env.info, workflow_id="order-77", attempt=attempt)
        done = await env.run(activities.call_tool, call("charge", amount=5))
        assert done.value() == "charged"
    assert keys == ["order-77:c1", "order-77:c1"]


async def test_a_key_a_proxy_echoes_never_reaches_the_runs_history() -> None:
    # A gateway echoing the bearer token in its 401 (or 500) body: the activity's failure,
    # its cause included, is written to the workflow's history, where anyone who can read
    # the history (the UI, `temporal workflow show`) read the worker's API key.
    from openai import AsyncOpenAI
    from temporalio.api.failure.v1 import Failure
    from temporalio.converter import DefaultFailureConverter

    key, gateway = "sk-proj-SECRETKEY0123456789", "gw-S3CRET-0042"

    def echo(status: int) -> Any:
        def answer(request: Any) -> Any:
            sent = f"{request.headers.get('authorization')} {request.headers.get('x-gateway')}"
            return S.error(status, f"Invalid credentials: {sent}")

        return answer

    request = ModelRequest("chat", False, {"model": "m", "messages": []})
    failures = []
    with S([echo(401), echo(500)]) as server:
        client = AsyncOpenAI(
            api_key=key, base_url=server.base_url, default_headers={"X-Gateway": gateway}
        )
        async with client:
            activities = ToolActivities(registry(), client)
            for _ in range(2):
                with pytest.raises(ApplicationError) as raised:
                    await activities.model_request(request)
                failures.append(raised.value)
    for error in failures:
        assert error.message.endswith("Invalid credentials: Bearer *** ***"), error.message
        recorded = Failure()
        DefaultFailureConverter().to_failure(error, PayloadConverter.default, recorded)
        written = recorded.SerializeToString()
        assert key.encode() not in written and gateway.encode() not in written
        assert b"Bearer ***" in written
    assert [f.non_retryable for f in failures] == [True, False]


async def test_a_task_call_heartbeats_before_its_task_is_started() -> None:
    # A call run as an MCP task has a heartbeat timeout (5 s) from its attempt's start,
    # but heartbeated only once the server had started the task: a tools/call slower
    # than that (a server starting, a busy server) timed the attempt out, and its retry
    # started the task again while the first attempt still ran it. Until this attempt
    # starts a task, its heartbeats carry the one an earlier attempt kept.
    import asyncio
    from datetime import timedelta

    beats: list[tuple[Any, ...]] = []
    beaten = asyncio.Event()

    class Build(BaseTool):
        name = "build"
        description = "Build."
        as_task = True

        async def execute(self, args: dict[str, Any], ctx: ToolContext) -> str:
            await asyncio.wait_for(beaten.wait(), timeout=5.0)  # the heartbeat timeout
            return "started"

    tools = ToolRegistry()
    tools.register(Build())
    kept = {"task": {"taskId": "t-1"}}
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        start_to_close_timeout=timedelta(seconds=30),
        heartbeat_timeout=timedelta(seconds=5),
        heartbeat_details=[kept],
        attempt=2,
    )

    def heartbeat(*details: Any) -> None:
        beats.append(details)
        beaten.set()

    env.on_heartbeat = heartbeat
    done = await env.run(ToolActivities(tools).call_tool, call("build"))
    assert (done.error, done.value()) == (None, "started")
    assert beats[0] == (kept,)


async def test_a_completion_over_the_payload_limit_fails_without_retries() -> None:
    # 400,000 CJK characters are 1.2 MB of UTF-8 and 2.4 MB as the converter writes
    # them: the worker could not hand the completion over, and each retry paid for the
    # whole answer again (4 requests by default), the run failing with "PayloadsTooLarge"
    # naming neither the size nor what to change.
    request = ModelRequest("chat", False, {"model": "m", "messages": []})
    with S([S.reply_text("字" * 400_000), S.reply_text("字" * 300_000)]) as server:
        async with server.client() as client:
            activities = ToolActivities(registry(), client)
            with pytest.raises(ApplicationError) as refused:
                await activities.model_request(request)
            fits = await activities.model_request(request)
    assert (refused.value.non_retryable, refused.value.type) == (True, "ModelResponseTooLarge")
    assert re.fullmatch(
        r"chat completion response is \d+ bytes, over the 2097152-byte payload limit of a "
        r"Temporal activity result; bound the model's output \(CycleConfig\(max_tokens=\.\.\.\)"
        r", or max_output_tokens=\.\.\. with api='responses'\)",
        refused.value.message,
    ), refused.value.message
    assert len(fits["choices"][0]["message"]["content"]) == 300_000


async def test_a_tools_own_timeout_is_its_error_not_a_retry() -> None:
    # A tool's own timeout (@tool(timeout=...)) ended the call with the same retryable
    # error as the activity's time limit: Temporal ran the tool again on each of its
    # attempts (4 by default), then the model read that it timed out after the
    # activity's limit. As in LlmCycle, the model now reads its timeout, once.
    import asyncio
    from datetime import timedelta

    runs: list[int] = []
    tools = ToolRegistry()

    @tools.tool(timeout=0.2)
    async def charge(amount: int) -> str:
        """Charge."""
        runs.append(amount)
        await asyncio.Event().wait()  # never answers: its own timeout ends it
        return "charged"

    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, start_to_close_timeout=timedelta(seconds=30))
    done = await env.run(ToolActivities(tools).call_tool, call("charge", amount=5))
    assert done.error == (
        "tool 'charge' failed: timed out after 0.2 s; it may have run in part, so do not "
        "assume it had no effect"
    )
    assert done.recoverable is True and runs == [5]


async def test_a_key_an_api_key_provider_gave_never_reaches_the_runs_history() -> None:
    # With an api_key provider the SDK sets the key it returns on the client copy that
    # sends: the activity's own, which the masking did not read.
    from openai import AsyncOpenAI
    from temporalio.api.failure.v1 import Failure
    from temporalio.converter import DefaultFailureConverter

    key = "sk-proj-PROVIDED0123456789"

    async def provide() -> str:
        return key

    def echo(request: Any) -> Any:
        return S.error(401, f"Invalid credentials: {request.headers.get('authorization')}")

    request = ModelRequest("chat", False, {"model": "m", "messages": []})
    with S([echo]) as server:
        async with AsyncOpenAI(api_key=provide, base_url=server.base_url) as client:
            with pytest.raises(ApplicationError) as raised:
                await ToolActivities(registry(), client).model_request(request)
    assert raised.value.message.endswith("Invalid credentials: Bearer ***"), raised.value.message
    recorded = Failure()
    DefaultFailureConverter().to_failure(raised.value, PayloadConverter.default, recorded)
    assert key.encode() not in recorded.SerializeToString()
