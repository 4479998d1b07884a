"""Every script in examples/ runs offline (no OPENAI_API_KEY) as a real subprocess, says
so in its first line, and prints what its tools really returned.

The demo has its own test (test_demo.py); the notebook is run by test_notebook.py.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from agcore_tools.testing import ScriptedChatServer
from tests._scripts import run_script

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
FILESYSTEM_SERVER = ROOT / "node_modules" / ".bin" / "mcp-server-filesystem"


def run_example(name: str, *args: str, hidden: str | None = None) -> list[str]:
    """Run ``examples/<name>`` offline; return its output lines after checking the first.

    ``hidden`` is the tools the example's permission checker leaves out of the model's
    definitions: the one warning its stderr then holds (it is never silent).
    """
    result = run_script(EXAMPLES / name, *args)
    assert result.returncode == 0, result.stderr
    if hidden is None:
        assert result.stderr == ""
    else:
        assert result.stderr.startswith("definitions() leaves out "), result.stderr
        assert hidden in result.stderr and result.stderr.count("\n") == 1, result.stderr
    lines = result.stdout.splitlines()
    assert re.match(r"[\w -]+: OFFLINE - no OPENAI_API_KEY is set", lines[0]), lines[0]
    return lines[1:]


def test_every_example_has_a_test() -> None:
    tested = {
        "demo.py",  # test_demo.py
        "mcp_server.py",  # a server, not an example: tests/mcp/test_example_server.py
        "_offline.py",  # the shared offline fallback, used by all of them
        "weather_calculator.py",
        "filesystem_mcp.py",
        "openai_chat_loop.py",
        "openai_responses_loop.py",
        "streaming_console.py",
        "permissions.py",
        "temporal_loop.py",
    }
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def test_weather_calculator_runs_the_full_loop() -> None:
    out = run_example("weather_calculator.py")
    assert out[1] == "assistant> Lima is at 19.5 °C and Nairobi at 23 °C; the average is 21.25 °C."
    assert out[3:6] == [
        "3 tool calls in 3 requests:",
        "  get_weather({\"city\": \"Lima\"}) -> {'city': 'Lima', 'celsius': 19.5}",
        "  get_weather({\"city\": \"Nairobi\"}) -> {'city': 'Nairobi', 'celsius': 23.0}",
    ]
    assert '  calculate({"expression": "(19.5 + 23.0) / 2"}) -> 21.25' in out
    # The transcript: both weather results answer one assistant message, in call order.
    transcript = out[out.index("transcript:") + 1 :]
    assert [line.split(":")[0].strip() for line in transcript] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


@pytest.mark.parametrize("expression", ["9**9**9**9", "((9**100)**100)**100"])
def test_the_calculator_refuses_a_power_too_large_instead_of_freezing(expression: str) -> None:
    # In a subprocess: a huge exact power holds the GIL, so only a kill stops it.
    code = (
        "import asyncio, weather_calculator as wc\n"
        f"call = wc.registry.invoke('calculate', {{'expression': {expression!r}}})\n"
        "print(asyncio.run(call).error)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=EXAMPLES, capture_output=True, text=True, timeout=30
    )
    assert result.stdout == (
        f"tool 'calculate' failed: ValueError: {expression} is too large to compute "
        "(over about 1e308)\n"
    ), result.stderr


def test_filesystem_example_reads_through_server_filesystem_and_counts_locally() -> None:
    if not FILESYSTEM_SERVER.exists():
        pytest.skip("npm test dependencies are not installed; run `make node`")
    out = run_example("filesystem_mcp.py", hidden="tool 'fs__write_file' needs 'write'")
    assert out[0] == (
        "tools: 15, 14 from MCP; refused: fs__write_file, fs__edit_file, "
        "fs__create_directory, fs__move_file"
    )
    calls = "\n".join(out)
    assert re.search(r"fs__list_directory\(.*\) -> \{'content': '\[FILE\] ideas.md", calls)
    assert "-> {'content': 'Send the quarterly report before the Friday deadline.\\n'}" in calls
    assert "count_words({'text': 'Send the quarterly report" in calls
    assert calls.count("count_words(") == 1 and out[-2].endswith("-> 8")
    assert out[-1] == "assistant> todo.md mentions the Friday deadline; it is 8 words long."


def test_chat_completions_drop_in_answers_tool_calls_and_keeps_the_history() -> None:
    out = run_example("openai_chat_loop.py")
    assert out[:4] == [
        "user> Where is my order A1001?",
        "assistant> Order A1001 has shipped with DHL and should arrive on 5 December.",
        "user> And order B2002?",
        "assistant> I can't find an order B2002. Could you check the number?",
    ]
    assert out[4] == (
        "tool results the model read: "
        """['{"status":"shipped","carrier":"DHL","eta":"2026-12-05"}', """
        "\"Error: tool 'order_status' failed: LookupError: no order 'B2002'\"]"
    )


def test_responses_drop_in_sends_function_call_outputs() -> None:
    out = run_example("openai_responses_loop.py")
    assert out == [
        "user> How much is 250 USD in euros and in pounds?",
        "  call_1 -> 0.9225",
        "  call_2 -> 0.7871",
        "assistant> 250 USD is about 230.63 EUR (at 0.9225) or 196.78 GBP (at 0.7871).",
    ]


def test_streaming_console_shows_each_call_as_it_ends() -> None:
    out = run_example("streaming_console.py")
    started = [line for line in out if line.startswith("  -> ping_mirror")]
    finished = [line for line in out if line.startswith("  <- ping_mirror")]
    # Started in the model's order, finished fastest first: reported live, per call.
    assert [re.search(r"'region': '(\w+)'", line)[1] for line in started] == ["eu", "us", "asia"]
    assert [re.search(r'"region":"(\w+)"', line)[1] for line in finished] == ["us", "asia", "eu"]
    assert out.index("  [turn 1 ended: tool_calls]") < out.index(started[0])
    assert out[-3].startswith("assistant> The us mirror is the fastest")
    assert out[-1] == "done: 2 requests, 3 tool calls, 20 prompt + 36 completion tokens"


def test_permission_policy_blocks_the_destructive_tool() -> None:
    out = run_example("permissions.py", hidden="tool 'delete_file' needs 'delete'")
    denied = "permission denied: tool 'delete_file' needs 'delete', which is denied"
    assert out == [
        f"invoke raised PermissionDeniedError: {denied}",
        "  tool_name='delete_file' permission='delete'",
        "  recoverable=False",
        f"submit_with_tools raised LlmError: tool loop stopped: {denied}",
        f'  __cause__: PermissionDeniedError("{denied}")',
        f"  the model's tool result: Error: {denied}",
        "report.txt still exists: True",
    ]


def test_with_an_api_key_the_examples_use_the_environments_server_and_model() -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        from openai_chat_loop import offline_script
    finally:
        sys.path.remove(str(EXAMPLES))
    with ScriptedChatServer(offline_script()) as server:
        base_url = server.base_url
        env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": base_url}
        env["AGCORE_MODEL"] = "my-model"
        result = run_script(EXAMPLES / "openai_chat_loop.py", "Where is A1001?", env=env)
    assert result.returncode == 0, result.stderr
    first, *rest = result.stdout.splitlines()
    assert first == f"chat completions drop-in: talking to {base_url} with model my-model."
    assert rest[1] == "assistant> Order A1001 has shipped with DHL and should arrive on 5 December."
    assert {request.json["model"] for request in server.requests} == {"my-model"}
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"


def test_temporal_loop_runs_on_a_local_dev_server() -> None:
    pytest.importorskip("temporalio")
    out = run_example("temporal_loop.py")
    assert out[0] == "assistant> There are 19 mugs in stock: 12 blue and 7 red."
    assert out[1] == (
        "6 activities: agcore.model_request, agcore.call_tool, agcore.call_tool, "
        "agcore.model_request, agcore.call_tool, agcore.model_request"
    )
    assert out[out.index("transcript:") + 3 : out.index("transcript:") + 6] == [
        "  tool: 12",
        "  tool: 7",
        "  assistant:  -> add",
    ]
