"""Finish reasons, usage arithmetic and the event dataclasses."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from agcore_tools import (
    AssistantTextDelta,
    FinishReason,
    StreamEvent,
    ToolExecutionCompleted,
    ToolTimeoutError,
    TurnComplete,
    Usage,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("stop", FinishReason.STOP),
        ("length", FinishReason.LENGTH),
        ("tool_calls", FinishReason.TOOL_CALLS),
        ("function_call", FinishReason.TOOL_CALLS),
        ("content_filter", FinishReason.CONTENT_FILTER),
        ("end_turn", FinishReason.OTHER),
        (None, FinishReason.OTHER),
    ],
)
def test_finish_reason_parse(raw, expected) -> None:
    assert FinishReason.parse(raw) is expected


def test_finish_reason_is_a_string_enum() -> None:
    assert FinishReason.STOP == "stop"
    assert FinishReason("tool_calls") is FinishReason.TOOL_CALLS


def test_usage_adds_every_field_and_counts_requests() -> None:
    total = Usage(1, 2, 3, 4, 5) + Usage(10, 20, 30, 40, 50)
    assert total == Usage(11, 22, 33, 44, 55, requests=2)


def test_usage_from_the_sdk_object_and_from_partial_dicts() -> None:
    from openai.types import CompletionUsage

    sdk = CompletionUsage.model_validate(
        {
            "prompt_tokens": 100,
            "completion_tokens": 40,
            "total_tokens": 140,
            "prompt_tokens_details": {"cached_tokens": 64},
            "completion_tokens_details": {"reasoning_tokens": 12},
        }
    )
    assert Usage.from_sdk(sdk) == Usage(100, 40, 140, 64, 12)
    assert Usage.from_sdk({"prompt_tokens": 3}) == Usage(3, 0, 3)
    assert Usage.from_sdk({"prompt_tokens": None, "completion_tokens": "x"}) == Usage(0, 0, 0)


def test_events_are_frozen_and_matchable() -> None:
    event: StreamEvent = ToolExecutionCompleted("slow", "c1", None, ToolTimeoutError("slow", 1))
    match event:
        case ToolExecutionCompleted(tool_name=name, error=ToolTimeoutError()):
            matched = name
        case _:
            matched = None
    assert matched == "slow"
    assert not event.ok
    with pytest.raises(AttributeError):
        AssistantTextDelta("x").text = "y"  # type: ignore[misc]
    assert TurnComplete(FinishReason.STOP).turn == 1


def test_the_streaming_guide_lists_every_stream_event() -> None:
    # A `match` written from the guide's table would silently skip a missing event.
    guide = Path(__file__).resolve().parents[2] / "docs" / "guides" / "streaming.md"
    text = guide.read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| \[?`(\w+)`", text, re.MULTILINE))
    order = text.split("## Their order", 1)[1].split("\n## ", 1)[0]
    for event in typing.get_args(StreamEvent):
        assert event.__name__ in listed, event.__name__
        assert f"`{event.__name__}`" in order, event.__name__
