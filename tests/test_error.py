from __future__ import annotations

import pytest

from agcore_tools import (
    InvalidArgumentsError,
    LlmError,
    MaxTurnsExceededError,
    McpError,
    McpNotInitializedError,
    McpTimeoutError,
    PermissionDeniedError,
    ToolError,
    ToolExecutionError,
    ToolIOError,
    ToolNotFoundError,
    ToolTimeoutError,
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
