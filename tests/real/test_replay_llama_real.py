"""Record a multi-turn tool run against the real llama-cpp-python server, then replay it
offline and compare (issue 30, part 4: the proof).

The run (tests/_replay_runs.py, ``llama_run``) is five model turns with an MCP server's
tool: four calls forced with ``tool_choice`` (SmolLM2 fills in the arguments, and the
MCP server answers them), then a text answer. The replay gets the same tool calls and
the same history with no socket and no server process.

With ``AGCORE_RECORD_MODE=rewrite`` the recording also replaces the committed cassette
tests/cassettes/llama_tool_run.json, which tests/test_replay_llama.py replays in every
run of the suite.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agcore_tools.testing import Cassette, no_network

from .._replay_runs import (
    FORCE,
    LLAMA_CASSETTE,
    LLAMA_MODEL,
    counted_connects,
    llama_run,
    stopwatch,
)
from .conftest import RealServer

# A real model on a shared 2-core machine: allow more than the suite's 120 s per test.
pytestmark = pytest.mark.timeout(300)


async def test_a_llama_tool_run_is_recorded_then_replayed_offline(
    llama_server: RealServer, tmp_path: Path
) -> None:
    path = tmp_path / "llama_tool_run.json"
    with Cassette(path, "rewrite") as cassette:
        recorded = await llama_run(
            cassette, base_url=llama_server.base_url, api_key="sk-llama-NOT-A-REAL-KEY", timeout=120
        )
    # Five real turns: four forced calls of the MCP tool, which ran in its server, then text.
    assert recorded.turns == 5, recorded.messages
    tool = FORCE["function"]["name"]  # type: ignore[index]
    assert [name for name, _ in recorded.calls] == [tool] * 4
    results = [m["content"] for m in recorded.messages if m["role"] == "tool"]
    assert len(results) == 4 and not [r for r in results if r.startswith("Error")], results
    assert "sk-llama-NOT-A-REAL-KEY" not in path.read_text()
    assert all(r["model"] == LLAMA_MODEL for r in Cassette(path, "none").requests if r)

    with (
        no_network() as guard,
        counted_connects() as connects,
        stopwatch() as elapsed,
        Cassette(path, "none") as cassette,
    ):
        replayed = await llama_run(cassette)
    assert guard.attempts == [] and connects == []
    assert replayed.calls == recorded.calls
    assert replayed.messages == recorded.messages
    assert replayed.text == recorded.text and replayed.turns == 5
    # The first replay in the process, imports included; tests/test_replay_llama.py
    # times warm ones against the 100 ms target.
    assert elapsed[0] < 1.0

    if os.environ.get("AGCORE_RECORD_MODE") == "rewrite":
        shutil.copyfile(path, LLAMA_CASSETTE)
