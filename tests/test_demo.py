"""The README's main command: examples/demo.py, run as a real subprocess in offline mode."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_runs_offline_and_prints_the_loop_as_it_happens() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("agcore_tools demo: OFFLINE")
    assert "OPENAI_API_KEY" in lines[0]
    out = result.stdout
    # Tool events, in order, with the real tools' outputs.
    assert out.index("-> get_weather({'city': 'Paris'})") < out.index(
        '<- get_weather: {"city":"Paris"'
    )
    assert "[turn 1 ended: tool_calls]" in out
    assert '<- convert_currency: {"amount":19488.0,"currency":"JPY","rate":162.4}' in out
    assert out.index("[turn 2 ended: tool_calls]") < out.index("[turn 3 ended: stop]")
    assert "120 EUR is about 19,488 JPY" in out
    assert lines[-1] == "done: 3 requests, 3 tool calls, 30 prompt + 53 completion tokens"
    assert result.stderr == ""
