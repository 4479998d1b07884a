"""CycleConfig: defaults, validation, request options."""

from __future__ import annotations

import inspect
from dataclasses import FrozenInstanceError, replace

import pytest
from openai import Timeout
from openai.resources.chat.completions import AsyncCompletions
from openai.resources.responses import AsyncResponses

from agcore_tools import CycleConfig, LlmConfigError, LlmError, TrimOldest
from agcore_tools.cycle import Limits
from agcore_tools.cycle._config_checks import OTHER_APIS_OPTIONS


def test_defaults_follow_the_contract() -> None:
    config = CycleConfig("gpt-4o-mini")
    assert config.model == "gpt-4o-mini"
    assert config.max_turns == 10
    assert config.tool_timeout_secs == 60.0
    assert config.max_tool_result_bytes == 16384
    assert config.max_tool_attachment_bytes == 5 * 1024 * 1024
    assert config.max_retries == 3
    assert isinstance(config.history, TrimOldest)
    assert dict(config.request_options) == {}
    assert config.unknown_tool == "raise"
    assert config.reset_tool_choice is True


def test_unknown_keywords_are_request_options_merged_with_the_mapping() -> None:
    config = CycleConfig(
        "m", request_options={"temperature": 0.5, "seed": 1}, temperature=0.1, tool_choice="auto"
    )
    assert dict(config.request_options) == {"temperature": 0.1, "seed": 1, "tool_choice": "auto"}


def test_replace_keeps_request_options_and_the_config_is_frozen() -> None:
    config = CycleConfig("m", temperature=0.2)
    changed = replace(config, max_turns=3)
    assert changed.max_turns == 3
    assert dict(changed.request_options) == {"temperature": 0.2}
    assert changed == replace(config, max_turns=3)
    with pytest.raises(FrozenInstanceError):
        config.max_turns = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.request_options["temperature"] = 1.0  # type: ignore[index]


@pytest.mark.parametrize("option", ["model", "messages", "stream", "tools"])
def test_options_the_loop_sets_are_refused(option: str) -> None:
    with pytest.raises(LlmError, match=option):
        CycleConfig("m", request_options={option: "x"})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_turns", 0),
        ("tool_timeout_secs", 0),
        ("max_tool_result_bytes", 10),
        ("max_tool_attachment_bytes", 0),
        ("max_tool_calls_per_turn", 0),
        ("max_tool_calls_per_turn", 2.5),
        ("max_retries", -1),
        ("retry_initial_delay", -0.5),
        ("max_turns", "3"),
        ("max_turns", 2.5),  # used to pass, and allow 3 requests
        ("max_turns", True),
        ("max_result_bytes", 4096.0),
        ("max_retries", 1.5),
        ("unknown_tool", "ignore"),
        ("reset_tool_choice", "yes"),
    ],
)
def test_bad_limits_are_refused_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(LlmError, match=field):
        CycleConfig("m", **{field: value})


@pytest.mark.parametrize("n", [2, 0, True, 1.0, "1"])
def test_an_n_other_than_one_is_refused(n: object) -> None:
    # n=2 was taken: the loop read the first answer of each request, and every one was
    # billed. Given either way (request_options too, as replace() passes them).
    for given in ({"n": n}, {"request_options": {"n": n}}):
        with pytest.raises(LlmConfigError) as raised:
            CycleConfig("m", **given)  # type: ignore[arg-type]
        assert isinstance(raised.value, ValueError)
        assert str(raised.value) == (
            f"CycleConfig.n must be 1 or None, got {n!r}: the loop reads only the first "
            "answer of each request, but each of the n is generated and billed"
        )
    config = CycleConfig("m", n=1)
    with pytest.raises(LlmConfigError, match=r"CycleConfig\.n must be 1"):
        replace(config, request_options={"n": 3})
    assert CycleConfig("m", n=None).request_options["n"] is None
    # The SDK merges extra_body into the request: n=2 there was billed the same way.
    with pytest.raises(LlmConfigError) as raised:
        CycleConfig("m", extra_body={"top_k": 5, "n": n})
    assert str(raised.value).startswith(f"CycleConfig.extra_body['n'] must be 1 or None, got {n!r}")
    assert CycleConfig("m", extra_body={"n": 1}).request_options["extra_body"] == {"n": 1}


@pytest.mark.parametrize("timeout", [-1, 0, 0.0, float("nan"), True])
def test_a_request_timeout_that_is_no_positive_number_is_refused(timeout: object) -> None:
    # -1 was taken, and every request then failed as an APITimeoutError after retries.
    with pytest.raises(LlmConfigError) as raised:
        CycleConfig("m", timeout=timeout)
    assert str(raised.value) == (
        "CycleConfig.timeout (each request's time limit) must be positive seconds, an "
        f"openai.Timeout or None, got {timeout!r}"
    )
    with pytest.raises(LlmConfigError, match=r"CycleConfig\.timeout"):
        CycleConfig("m", request_options={"timeout": timeout})


def test_a_request_timeout_of_seconds_an_sdk_timeout_or_none_is_taken() -> None:
    for timeout in (30, 2.5, None, Timeout(10.0, connect=2.0)):
        assert CycleConfig("m", timeout=timeout).request_options["timeout"] is timeout


def test_a_count_must_be_an_integer() -> None:
    with pytest.raises(ValueError) as raised:
        Limits(max_turns=2.5)  # type: ignore[arg-type]
    assert str(raised.value) == "Limits.max_turns must be an integer at least 1 or None, got 2.5"
    assert CycleConfig("m", max_turns=3, tool_timeout=2.5).max_turns == 3


def test_the_calls_per_turn_limit_is_a_field_of_limits_and_a_flat_keyword() -> None:
    assert CycleConfig("m").max_tool_calls_per_turn == 128
    flat = CycleConfig("m", max_tool_calls_per_turn=None)
    assert flat == CycleConfig("m", limits=Limits(max_tool_calls_per_turn=None))
    assert flat.limits.max_tool_calls_per_turn is None
    # The Responses API's own max_tool_calls (built-in tools) stays a request option.
    options = CycleConfig("m", api="responses", max_tool_calls=3).request_options
    assert dict(options) == {"max_tool_calls": 3}


def test_none_means_no_limit_where_allowed() -> None:
    config = CycleConfig(
        "m",
        max_turns=None,
        tool_timeout_secs=None,
        max_tool_result_bytes=None,
        max_tool_attachment_bytes=None,
    )
    assert (
        config.max_turns,
        config.tool_timeout_secs,
        config.max_tool_result_bytes,
        config.max_tool_attachment_bytes,
    ) == (None, None, None, None)


def test_an_empty_model_is_refused() -> None:
    with pytest.raises(LlmError, match="model"):
        CycleConfig("")


def test_loop_policies_are_settings_not_request_options() -> None:
    config = CycleConfig("m", unknown_tool="tell_model", reset_tool_choice=False)
    assert (config.unknown_tool, config.reset_tool_choice) == ("tell_model", False)
    assert dict(config.request_options) == {}


@pytest.mark.parametrize(
    ("api", "option", "instead"),
    [
        ("responses", "max_tokens", ": use max_output_tokens=... instead"),
        ("responses", "max_completion_tokens", ": use max_output_tokens=... instead"),
        ("responses", "seed", ""),
        ("chat", "max_output_tokens", ": use max_completion_tokens=... instead"),
        ("chat", "reasoning", ": use reasoning_effort=... instead"),
    ],
)
def test_an_option_only_the_other_api_takes_is_refused_naming_its_equivalent(
    api: str, option: str, instead: str
) -> None:
    create = "responses.create" if api == "responses" else "chat.completions.create"
    for given in ({option: 1}, {"request_options": {option: 1}}):
        with pytest.raises(LlmConfigError) as info:
            CycleConfig("m", api=api, **given)  # type: ignore[arg-type]
        assert str(info.value) == (
            f"CycleConfig(api={api!r}) cannot send {option}=..., which {create} does not "
            f"take{instead}"
        )


def test_switching_api_with_replace_checks_the_options_again() -> None:
    config = CycleConfig("m", max_tokens=5, temperature=0.2)
    with pytest.raises(LlmConfigError, match=r"max_tokens=.*max_output_tokens"):
        replace(config, api="responses")
    shared = CycleConfig("m", temperature=0.2, response_format={"type": "json_object"})
    switched = replace(shared, api="responses")  # response_format becomes text.format
    assert dict(switched.request_options) == dict(shared.request_options)


def test_the_options_refused_for_an_api_are_none_its_sdk_create_takes() -> None:
    takes = {
        "chat": set(inspect.signature(AsyncCompletions.create).parameters),
        "responses": set(inspect.signature(AsyncResponses.create).parameters),
    }
    for api, refused in OTHER_APIS_OPTIONS.items():
        assert not refused & takes[api], api
    # And every option only the other API's create() takes is refused, but those the
    # loop sets itself (messages, input, previous_response_id): none was left out.
    own = {"messages", "input", "previous_response_id"}
    assert takes["responses"] - takes["chat"] - own <= OTHER_APIS_OPTIONS["chat"]
    assert (
        takes["chat"] - takes["responses"] - own - {"response_format"}
        <= (OTHER_APIS_OPTIONS["responses"])
    )


def test_repr_hides_header_and_query_values_and_the_approval_key() -> None:
    config = CycleConfig(
        "m",
        temperature=0.2,
        extra_headers={"Authorization": "Bearer sk-HEADER-SECRET"},
        extra_query={"api-key": "QUERY-SECRET"},
        approval_key=b"APPROVAL-SECRET",
    )

    shown = repr(config)
    assert "SECRET" not in shown
    assert "'extra_headers': {'Authorization': '***'}" in shown
    assert "'extra_query': {'api-key': '***'}" in shown
    assert "'temperature': 0.2" in shown and shown.startswith("CycleConfig(model='m', ")
    assert config.request_options["extra_headers"]["Authorization"] == "Bearer sk-HEADER-SECRET"


@pytest.mark.parametrize(("history", "example"), [(10, 10), ("all", 20), (True, 20)])
def test_a_history_that_is_no_policy_is_refused_naming_what_it_takes(
    history: object, example: int
) -> None:
    with pytest.raises(TypeError) as info:
        CycleConfig("m", history=history)  # type: ignore[arg-type]

    assert isinstance(info.value, LlmError)
    assert str(info.value) == (
        "CycleConfig.history must be a HistoryPolicy (an object with select(messages), "
        f"such as TrimOldest(max_messages={example})) or None, got {type(history).__name__}"
    )
    assert CycleConfig("m", history=TrimOldest(max_messages=example)).history.select([]) == []
