"""The loop's new names, and the old ones still working for a release with a
DeprecationWarning naming the new one."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import FrozenInstanceError, replace

import pytest

from agcore_tools import ChatResponse, CycleConfig, FinishReason, LlmCycle, LlmError, TurnComplete
from agcore_tools.cycle import Limits, Retries
from agcore_tools.temporal import ToolLoopResult
from agcore_tools.testing import ScriptedChatServer

from .conftest import S


def test_config_groups_hold_the_limits_and_the_retries() -> None:
    config = CycleConfig("m", limits=Limits(max_turns=3, tool_timeout=5.0), retries=Retries(0))
    assert config.limits == Limits(3, 5.0)
    assert (config.max_turns, config.tool_timeout, config.max_result_bytes) == (3, 5.0, 16384)
    assert (config.max_retries, config.retry_initial_delay, config.retry_max_delay) == (0, 0.5, 8.0)
    assert config.max_tool_attachment_bytes == config.limits.max_attachment_bytes
    with pytest.raises(FrozenInstanceError):
        config.limits.max_turns = 4  # type: ignore[misc]


def test_flat_keywords_fill_the_groups_and_replace_their_fields() -> None:
    flat = CycleConfig(
        "m", max_turns=4, tool_timeout=None, max_result_bytes=100, retry_initial_delay=0.1
    )
    assert flat.limits == Limits(max_turns=4, tool_timeout=None, max_result_bytes=100)
    assert flat.retries == Retries(initial_delay=0.1)
    assert flat == CycleConfig(
        "m",
        limits=Limits(max_turns=4, tool_timeout=None, max_result_bytes=100),
        retries=Retries(initial_delay=0.1),
    )
    mixed = CycleConfig("m", limits=Limits(max_turns=2, tool_timeout=9.0), max_turns=7)
    assert (mixed.max_turns, mixed.tool_timeout) == (7, 9.0)


def test_replace_takes_flat_names_and_groups() -> None:
    config = CycleConfig("m", temperature=0.3)
    assert replace(config, max_turns=None).limits.max_turns is None
    assert replace(config, retries=Retries(5)).max_retries == 5
    assert replace(config, max_result_bytes=200).limits.max_result_bytes == 200
    assert dict(replace(config, max_turns=2).request_options) == {"temperature": 0.3}


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Limits(max_turns=0), "Limits.max_turns"),
        (lambda: Limits(tool_timeout=0), "Limits.tool_timeout"),
        (lambda: Limits(max_result_bytes=10), "Limits.max_result_bytes"),
        (lambda: Retries(max_retries=-1), "Retries.max_retries"),
        (lambda: Retries(max_delay=-1.0), "Retries.max_delay"),
        (lambda: CycleConfig("m", tool_timeout=0), "CycleConfig.tool_timeout"),
        (lambda: CycleConfig("m", max_result_bytes=1), "CycleConfig.max_result_bytes"),
        (lambda: CycleConfig("m", limits={"max_turns": 1}), "limits=Limits"),  # type: ignore[arg-type]
    ],
)
def test_bad_group_values_are_refused_naming_the_field(
    build: Callable[[], object], field: str
) -> None:
    with pytest.raises(LlmError, match=field):
        build()


def test_the_old_config_names_warn_naming_the_new_ones() -> None:
    with pytest.warns(DeprecationWarning, match="tool_timeout="):
        config = CycleConfig("m", tool_timeout_secs=5.0)
    assert config.tool_timeout == 5.0
    with pytest.warns(DeprecationWarning, match="max_result_bytes="):
        config = CycleConfig("m", max_tool_result_bytes=100)
    assert config.max_result_bytes == 100
    with pytest.warns(DeprecationWarning, match="CycleConfig.tool_timeout"):
        assert config.tool_timeout_secs == 60.0
    with pytest.warns(DeprecationWarning, match="CycleConfig.max_result_bytes"):
        assert config.max_tool_result_bytes == 100


def test_the_kept_flat_names_do_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = CycleConfig("m", max_turns=2, max_retries=1, max_tool_attachment_bytes=10)
        assert (config.max_turns, config.max_retries, config.max_tool_attachment_bytes) == (
            2,
            1,
            10,
        )


def test_finish_reason_is_the_name_and_the_old_ones_warn() -> None:
    response = ChatResponse({"role": "assistant", "content": "Hi"}, "Hi", FinishReason.LENGTH)
    assert response.finish_reason is FinishReason.LENGTH
    with pytest.warns(DeprecationWarning, match="ChatResponse.finish_reason"):
        assert response.stop_reason is FinishReason.LENGTH
    turn = TurnComplete(FinishReason.STOP, 1, raw_finish_reason="eos")
    assert (turn.finish_reason, turn.raw_finish_reason) == (FinishReason.STOP, "eos")
    with pytest.warns(DeprecationWarning, match="TurnComplete.finish_reason"):
        assert turn.reason is FinishReason.STOP
    with pytest.warns(DeprecationWarning, match="TurnComplete.raw_finish_reason"):
        assert turn.raw_reason == "eos"
    with pytest.warns(DeprecationWarning, match="TurnComplete.finish_reason"):
        match turn:
            case TurnComplete(reason=reason):  # an old pattern still matches
                assert reason is FinishReason.STOP
    assert ToolLoopResult("5", [], 1, "stop", {}).finish_reason == "stop"


async def test_close_closes_an_owned_client_and_aclose_warns(
    serve: Callable[..., ScriptedChatServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve(S.reply_text("hi"))
    monkeypatch.setenv("OPENAI_API_KEY", "-")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    cycle = LlmCycle(CycleConfig("m"))
    assert (await cycle.submit("Hi")).text == "hi"
    assert cycle.client is not None
    await cycle.close()
    assert cycle.client.is_closed()
    with pytest.warns(DeprecationWarning, match=r"LlmCycle.close\(\)") as caught:
        await LlmCycle(CycleConfig("m")).aclose()
    # At the awaiting line, through the keyword-checking wrapper's coroutine.
    assert caught[0].filename == __file__


def test_tool_activity_options_take_timeout_and_the_old_name_warns() -> None:
    from agcore_tools.temporal import ToolActivityOptions

    assert ToolActivityOptions(timeout=5, max_attempts=2) == ToolActivityOptions(5, 2)
    with pytest.warns(DeprecationWarning, match=r"ToolActivityOptions\(timeout="):
        options = ToolActivityOptions(timeout_secs=7)
    assert options.timeout == 7
    with pytest.warns(DeprecationWarning, match="ToolActivityOptions.timeout"):
        assert options.timeout_secs == 7
