"""A run's CycleConfig as workflow input: everything but what must not be stored."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("temporalio")

from agcore_tools import CycleConfig, LlmConfigError, TrimOldest
from agcore_tools.temporal import ToolLoopInput
from agcore_tools.temporal._payloads import config_fields, config_from_fields


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
