"""The committed cassette of a real llama-cpp-python run replays offline, in CI.

tests/cassettes/llama_tool_run.json was recorded from SmolLM2-135M on llama-cpp-python
by tests/real/test_replay_llama_real.py (``AGCORE_RECORD_MODE=rewrite`` re-records it):
five turns, four forced calls of the example MCP server's ``celsius_to_fahrenheit`` as
JSON, then a text answer as server-sent events. Here it is replayed with the network
blocked and no MCP server process: the same calls, the same history, in under 100 ms.
"""

from __future__ import annotations

import json
from typing import Any

from agcore_tools.testing import Cassette

from ._replay_runs import FORCE, LLAMA_CASSETTE, llama_run, replayed_offline

REPLAY_BOUND = 0.100  # the target: five turns replayed in under 100 ms


def recorded_history() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The last request's messages, as recorded, and the MCP calls the cassette holds."""
    data = json.loads(LLAMA_CASSETTE.read_text())
    posts = [i for i in data["interactions"] if i.get("request", {}).get("method") == "POST"]
    calls = [i for i in data["interactions"] if i.get("method") == "tools/call"]
    return posts[-1]["request"]["json"]["messages"], calls


def test_the_llama_cassette_replays_with_no_socket_in_under_100_ms() -> None:
    async def replay() -> Any:
        with Cassette(LLAMA_CASSETTE, "none") as cassette:
            return await llama_run(cassette)

    first, outcome, timings = replayed_offline(replay)
    print(f"llama five-turn replay: {min(timings) * 1000:.1f} ms (best of {timings})")
    assert min(timings) < REPLAY_BOUND, timings

    sent, mcp_calls = recorded_history()
    tool = FORCE["function"]["name"]  # type: ignore[index]
    assert outcome.turns == 5
    assert [name for name, _ in outcome.calls] == [tool] * 4
    assert [args for _, args in outcome.calls] == [c["arguments"] for c in mcp_calls]
    # The final history: what the last request sent, then the model's streamed answer.
    assert outcome.messages[: len(sent)] == sent
    assert outcome.messages[-1] == {"role": "assistant", "content": outcome.text}
    assert outcome.text and outcome.messages == first.messages
    results = [m["content"] for m in outcome.messages if m["role"] == "tool"]
    assert results == [c["result"] for c in mcp_calls]  # from the cassette, not a server
