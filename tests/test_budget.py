"""Token costs of tool definitions and the budget check."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Callable

import pytest

from agcore_tools import DefinitionBudgetError, LlmError, _budget
from agcore_tools._budget import BYTES_PER_TOKEN, check_budget, definition_costs


def _definition(name: str, description: str) -> dict[str, object]:
    return {"type": "function", "function": {"name": name, "description": description}}


def test_without_a_known_model_the_cost_is_utf8_bytes_over_four_rounded_up():
    # "é" is two bytes: the estimate counts bytes, not characters.
    definition = _definition("café", "Ordér a café. " * 10)
    text = json.dumps(definition, separators=(",", ":"), ensure_ascii=False)

    [(name, tokens)] = definition_costs([definition], "not-a-known-model")

    assert name == "café"
    assert tokens == math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)
    assert tokens > len(text) / BYTES_PER_TOKEN


def test_a_lone_surrogate_is_counted_as_the_replacement_character_it_is_sent_as(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: counting a tool result holding one (os.listdir's name of a file not named
    # in UTF-8) raised a bare UnicodeEncodeError out of the loop.
    listed = b"caf\xe9".decode("utf-8", "surrogateescape")
    assert _budget.count_tokens(listed, "not-a-known-model") == 2  # 6 bytes, as "caf\ufffd"
    model = "agcore-test-utf8-counter"
    # A counter that encodes its text as UTF-8, as an encoding's tokenizer does.
    monkeypatch.setitem(_budget._loaded, model, lambda text: len(text.encode("utf-8")))
    assert _budget.count_tokens(listed, model) == len("caf\ufffd".encode())


def test_responses_definitions_are_named_too():
    flat = {"type": "function", "name": "f", "parameters": {}}
    assert definition_costs([flat], "m")[0][0] == "f"


def test_the_error_names_the_costliest_tools_first_at_most_five():
    small, big = _definition("small", "x"), _definition("big", "y" * 400)
    many = [big, small, *(_definition(f"t{i}", "z" * 40) for i in range(6))]

    with pytest.raises(DefinitionBudgetError) as raised:
        check_budget(many, "m", 50)

    error = raised.value
    assert isinstance(error, LlmError)
    assert error.costs[0][0] == "big" and error.costs[-1][0] == "small"
    assert error.tokens == sum(tokens for _, tokens in error.costs)
    top = ", ".join(f"{name} ({tokens})" for name, tokens in error.costs[:5])
    assert f"the costliest: {top}; offer fewer tools" in str(error)
    assert "small" not in str(error)


def test_no_budget_or_no_definitions_never_fails():
    check_budget([_definition("big", "y" * 4000)], "m", None)
    check_budget([], "m", 1)


async def test_loading_an_encoding_never_blocks_the_loop_and_is_bounded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # tiktoken reads its data from files or downloads it, with no timeout. Counting used
    # to load it on the event loop, at the first count of a run: a slow or unreachable
    # network stalled every task of the app. Now only load_counter() loads, in a worker
    # thread and within LOAD_TIMEOUT; until then counts are the estimate.
    release = threading.Event()
    started = threading.Event()

    def stalled(model: str) -> Callable[[str], int]:
        started.set()
        release.wait(10)
        return lambda text: 1  # tiktoken's counter, had it loaded

    monkeypatch.setattr(_budget, "_load", stalled)
    monkeypatch.setattr(_budget, "LOAD_TIMEOUT", 0.2)
    model = "agcore-test-stalled-model"
    try:
        assert _budget.count_tokens("x" * 8, model) == 2  # counting loads nothing
        assert not started.is_set()
        loading = asyncio.ensure_future(_budget.load_counter(model))
        ran_while_loading = False
        while not loading.done():  # the loop goes on while the thread waits
            await asyncio.sleep(0.01)
            # Loaded on the loop, the load would be over by the time this ran again.
            ran_while_loading |= started.is_set() and not loading.done()
        await loading
        assert started.is_set() and ran_while_loading
        assert "did not load the encoding of 'agcore-test-stalled-model' within 0.2 s" in (
            caplog.text
        )
        assert _budget.count_tokens("x" * 8, model) == 2
        await asyncio.wait_for(_budget.load_counter(model), 1)  # not tried again
        # The load that finishes late does not switch the counts, as the warning said.
        cached = _budget._counter.cache_info().currsize
        release.set()
        for _ in range(500):
            if _budget._counter.cache_info().currsize > cached:
                break
            await asyncio.sleep(0.01)
        assert _budget._counter.cache_info().currsize > cached
        assert _budget.count_tokens("x" * 8, model) == 2
    finally:
        release.set()


async def test_a_load_that_times_out_is_reported_once_however_many_waited(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Sixty-four cycles starting at once while the load stalled logged the same
    # warning sixty-four times.
    release = threading.Event()

    def stalled(model: str) -> Callable[[str], int]:
        release.wait(10)
        return lambda text: 1

    monkeypatch.setattr(_budget, "_load", stalled)
    monkeypatch.setattr(_budget, "LOAD_TIMEOUT", 0.2)
    model = "agcore-test-stalled-model-once"
    try:
        with caplog.at_level("WARNING", "agcore_tools"):
            await asyncio.gather(*(_budget.load_counter(model) for _ in range(5)))
        warnings = [r for r in caplog.records if "did not load the encoding" in r.getMessage()]
        assert len(warnings) == 1
        assert _budget.count_tokens("x" * 8, model) == 2
    finally:
        release.set()
