from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agcore_tools import (
    CycleConfig,
    FunctionTool,
    InvalidArgumentsError,
    LlmConfigError,
    LlmError,
    MaxTurnsExceededError,
    McpClient,
    McpError,
    McpNotInitializedError,
    McpTimeoutError,
    Permission,
    PermissionDeniedError,
    StdioTransport,
    StreamableHttpTransport,
    ToolConfigError,
    ToolDefinitionError,
    ToolError,
    ToolExecutionError,
    ToolIOError,
    ToolNotFoundError,
    ToolRegistry,
    ToolTimeoutError,
    TrimOldest,
    load_mcp_servers,
    tool,
)

RECOVERABLE = [
    ToolError("other"),
    ToolExecutionError("t", "boom"),
    InvalidArgumentsError("t", "x: bad"),
    ToolTimeoutError("t", 2.0),
]
UNRECOVERABLE = [
    ToolNotFoundError("t"),
    PermissionDeniedError("t", "shell", "is denied"),
    McpError("srv", "pipe closed"),
    McpNotInitializedError("srv"),
    McpTimeoutError("srv", "tools/call timed out"),
    ToolIOError("disk full", tool_name="t"),
]


@pytest.mark.parametrize("error", RECOVERABLE, ids=lambda e: type(e).__name__)
def test_recoverable_per_seed_table(error: ToolError) -> None:
    assert error.is_recoverable() is True


@pytest.mark.parametrize("error", UNRECOVERABLE, ids=lambda e: type(e).__name__)
def test_unrecoverable_per_seed_table(error: ToolError) -> None:
    assert error.is_recoverable() is False


@pytest.mark.parametrize("error", RECOVERABLE + UNRECOVERABLE, ids=lambda e: type(e).__name__)
def test_every_error_is_a_tool_error_with_a_one_line_message(error: ToolError) -> None:
    assert isinstance(error, ToolError)
    assert "\n" not in str(error) and str(error)


def test_messages_name_the_tool_and_the_cause() -> None:
    err = ToolExecutionError("div", "ZeroDivisionError: division by zero\n  at line 3")
    assert err.tool_name == "div"
    assert str(err) == "tool 'div' failed: ZeroDivisionError: division by zero at line 3"
    assert ToolNotFoundError("x").tool_name == "x"
    assert isinstance(ToolTimeoutError("t", 1), ToolExecutionError)


def test_llm_errors_are_separate_from_tool_errors() -> None:
    err = MaxTurnsExceededError(4)
    assert isinstance(err, LlmError) and not isinstance(err, ToolError)
    assert err.max_turns == 4 and "max_turns=4" in str(err)


# Mistakes in the caller's own code are also ValueError or TypeError (issue 8 §6).
@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda: FunctionTool(len, timeout=0), ValueError),
        (lambda: FunctionTool(42), TypeError),  # type: ignore[arg-type]
        (lambda: FunctionTool(_unannotated), TypeError),
        (lambda: ToolRegistry().register(object()), TypeError),  # type: ignore[arg-type]
        (lambda: tool(_documented, name="no spaces allowed", registry=ToolRegistry()), ValueError),
        (lambda: ToolRegistry().definitions(api="grpc"), ValueError),  # type: ignore[arg-type]
        (lambda: Permission.custom(""), ValueError),
        (lambda: Permission.parse("fly"), ValueError),
        (lambda: Permission.parse(3), TypeError),  # type: ignore[arg-type]
        (lambda: StdioTransport(""), ValueError),
        (lambda: StreamableHttpTransport("ftp://x"), ValueError),
        (lambda: McpClient("", StdioTransport("srv")), ValueError),
        (lambda: McpClient("srv", StdioTransport("srv"), timeout=0), ValueError),
        (lambda: load_mcp_servers({"mcpServers": {"x": 1}}), ValueError),
        (lambda: ToolRegistry().invoke_all([42]).send(None), ValueError),  # type: ignore[list-item]
        (lambda: ToolRegistry().invoke_all([], timeout=-1).send(None), ValueError),
        (lambda: ToolRegistry().invoke_all([], timeout="5").send(None), ValueError),  # type: ignore[arg-type]
        (lambda: ToolRegistry().invoke_as_completed([], timeout=0), ValueError),
        (lambda: ToolRegistry().run_tool_calls([], timeout=-1).send(None), ValueError),
        (lambda: ToolRegistry().run_tool_calls(5).send(None), ValueError),  # type: ignore[arg-type]
        (lambda: ToolRegistry().run_tool_calls({"id": "c"}).send(None), ValueError),
    ],
)
def test_caller_mistakes_are_also_value_or_type_errors(make: Any, kind: type[Exception]) -> None:
    with pytest.raises(kind) as info:
        make()
    assert isinstance(info.value, ToolError)
    assert isinstance(info.value, (ToolConfigError, ToolDefinitionError))


def test_a_batch_timeout_that_is_not_positive_seconds_is_named() -> None:
    registry = ToolRegistry()
    with pytest.raises(ToolConfigError) as info:
        asyncio.run(registry.invoke_all([("x", {})], timeout=-1))
    assert str(info.value) == (
        "invoke_all() timeout must be positive seconds (an int or a float) or None, got -1"
    )
    with pytest.raises(
        ToolConfigError, match=r"^run_tool_calls_sync\(\) timeout must be .* got '5'$"
    ):
        registry.run_tool_calls_sync([], timeout="5")  # type: ignore[arg-type]
    with pytest.raises(ToolConfigError, match=r"^run_tool_calls_sync\(\) takes a list .* got int$"):
        registry.run_tool_calls_sync(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "make",
    [
        lambda: CycleConfig(model=""),
        lambda: CycleConfig(model="m", max_turns=0),
        lambda: CycleConfig(model="m", stream=True),
        lambda: TrimOldest(max_messages=0),
    ],
)
def test_loop_setting_mistakes_are_also_value_errors(make: Any) -> None:
    with pytest.raises(ValueError) as info:
        make()
    assert isinstance(info.value, LlmConfigError) and isinstance(info.value, LlmError)


def _unannotated(x):  # type: ignore[no-untyped-def]
    """No annotation."""
    return x


def _documented(x: int) -> int:
    """Echo x."""
    return x


def test_max_turns_exceeded_carries_what_the_run_did() -> None:
    from agcore_tools import ToolInvocation, Usage

    done = (ToolInvocation("add", {"a": 1}, output=2),)
    err = MaxTurnsExceededError(
        2, invocations=done, usage=Usage(10, 5, 15, requests=2), history_length=7
    )
    assert (err.max_turns, err.invocations, err.history_length) == (2, done, 7)
    assert err.usage.total_tokens == 15
    assert str(err) == "tool loop stopped: a new request would exceed max_turns=2"
    bare = MaxTurnsExceededError(3)
    assert (bare.invocations, bare.usage.requests, bare.history_length) == ((), 0, 0)


def test_every_error_has_one_root() -> None:
    from agcore_tools import AgcoreError
    from agcore_tools._sync import SyncCallError
    from agcore_tools.content import _BadContent

    for error in (ToolError, LlmError, SyncCallError, _BadContent):
        assert issubclass(error, AgcoreError)
    assert issubclass(_BadContent, ValueError)


def _one_of_each() -> dict[str, Any]:
    """An error of every class agcore_tools.error exports, as the library builds them."""
    import agcore_tools.error as E
    from agcore_tools.cycle import Usage

    return {
        "AgcoreError": E.AgcoreError("x"),
        "ToolError": E.ToolError("boom", tool_name="t"),
        "ToolNotFoundError": E.ToolNotFoundError("nope", "the tools offered are: add"),
        "ToolNotOfferedError": E.ToolNotOfferedError("nope", "search first"),
        "ToolExecutionError": E.ToolExecutionError("div", "ZeroDivisionError: x"),
        "ProgramError": E.ProgramError("KeyError", "Traceback ..."),
        "ToolTimeoutError": E.ToolTimeoutError("slow", 1.5, started=False),
        "InvalidArgumentsError": E.InvalidArgumentsError("add", "b: required", errors=[]),
        "PermissionDeniedError": E.PermissionDeniedError("rm", "shell", "is denied"),
        "ToolUnavailableError": E.ToolUnavailableError("s", "over its rate", retry_after=2.0),
        "ToolRejectedError": E.ToolRejectedError("refund", "no"),
        "ApprovalError": E.ApprovalError("bad answer", tool_name="t", redacted="r"),
        "McpError": E.McpError("fs", "died", status_code=500, recoverable=True, may_have_run=True),
        "McpNotInitializedError": E.McpNotInitializedError("fs"),
        "McpTimeoutError": E.McpTimeoutError("fs", "timed out"),
        "McpInputRequiredError": E.McpInputRequiredError("ci", "waits", {"q": {}}),
        "McpUsageError": E.McpUsageError("x"),
        "ToolIOError": E.ToolIOError("cannot open", tool_name="r"),
        "ToolDefinitionError": E.ToolDefinitionError("bad definition"),
        "ToolConfigError": E.ToolConfigError("bad option", tool_name="x"),
        "LlmError": E.LlmError("failed"),
        "LlmConfigError": E.LlmConfigError("bad"),
        "ClientTypeError": E.ClientTypeError("c"),
        "LlmUsageError": E.LlmUsageError("u"),
        "DefinitionBudgetError": E.DefinitionBudgetError(120, 100, [("a", 90)]),
        "MaxTurnsExceededError": E.MaxTurnsExceededError(
            3, usage=Usage(prompt_tokens=5, completion_tokens=2, total_tokens=7), history_length=5
        ),
        "OutputValidationError": E.OutputValidationError("City", "{}", ["population"], 2),
        "RunStoppedError": E.RunStoppedError(Usage(prompt_tokens=5, total_tokens=5)),
        "SyncCallError": E.SyncCallError("sync"),
        "CassetteError": E.CassetteError("c"),
        "CassetteMismatchError": E.CassetteMismatchError(2, "p", "x", "y"),
    }


def test_every_error_survives_pickle_and_copy_as_it_was() -> None:
    # Process pools pickle a worker's exception (or a ToolInvocation holding one): the
    # default rebuild, cls(*args), broke most classes, or doubled their message.
    import copy
    import pickle

    import agcore_tools.error as E

    errors = _one_of_each()
    exported = {n for n in E.__all__ if issubclass(getattr(E, n), E.AgcoreError)}
    assert set(errors) == exported  # a new error class needs a sample here
    for name, error in errors.items():
        for again in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
            assert type(again) is type(error), name
            assert str(again) == str(error), name
            assert vars(again) == vars(error), name
