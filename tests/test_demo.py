"""The README's main command: examples/demo.py, run as a real subprocess in offline mode,
with the bundled MCP server started over stdio."""

from __future__ import annotations

from pathlib import Path

from tests._scripts import run_script

ROOT = Path(__file__).resolve().parents[1]


def test_demo_runs_offline_and_prints_the_loop_as_it_happens() -> None:
    result = run_script(ROOT / "examples" / "demo.py")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("agcore_tools demo: OFFLINE")
    assert "OPENAI_API_KEY" in lines[0]
    assert lines[1:3] == [
        "tools (local): get_weather, convert_currency",
        "tools (mcp:demo): text_stats, capital_of, celsius_to_fahrenheit",
    ]
    out = result.stdout
    # Tool events, in order, with the real tools' outputs.
    assert out.index("-> get_weather({'city': 'Paris'})") < out.index(
        '<- get_weather: {"city":"Paris"'
    )
    assert "[turn 1 ended: tool_calls]" in out
    # The MCP tool ran in the bundled server (its output is the server's text), in the
    # same turn as a local tool.
    assert out.index("-> celsius_to_fahrenheit({'celsius': 24})") < out.index(
        "<- celsius_to_fahrenheit: 75.2 °F"
    )
    assert '<- convert_currency: {"amount":19488.0,"currency":"JPY","rate":162.4}' in out
    assert out.index("[turn 2 ended: tool_calls]") < out.index("[turn 3 ended: stop]")
    assert "120 EUR is about 19,488 JPY" in out
    assert lines[-1] == "done: 3 requests, 4 tool calls, 30 prompt + 64 completion tokens"
    assert result.stderr == ""
