"""Would ``repair_arguments`` save a turn? Forced calls to a real small model, counted.

Starts llama-cpp-python's server on SmolLM2-135M (as tests/real/test_pipeline_llama.py
does), sends forced calls for a few tools at several ``max_tokens`` limits, and counts
the arguments that are not valid JSON, those the repair turns into an object, and of
those, the ones the tool's own validation then accepts (a saved turn)::

    PYTHONPATH=. .venv/bin/python benchmarks/bench_repair.py

Each request is deterministic (temperature 0, seed 0), so one run is the figure.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Annotated

from pydantic import Field

from agcore_tools import ToolRegistry
from agcore_tools._repair import repair_json

MODEL = Path.home() / ".cache" / "agcore-tools" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
LIMITS = (8, 12, 16, 24, 32, 48)
PROMPTS = ("Do it.", "Use the tool for Paris, 3 days, metric.", "Write two rows to the sheet.")


def registry() -> ToolRegistry:
    tools = ToolRegistry()

    @tools.tool
    def forecast(city: str, days: int = 3, units: str = "metric") -> str:
        """The weather forecast for a city."""
        return city

    @tools.tool
    def write_rows(sheet: str, rows: list[list[str]], header: bool = False) -> str:
        """Write rows to a sheet."""
        return sheet

    @tools.tool
    def search(query: Annotated[str, Field(max_length=80)], limit: int = 5) -> str:
        """Search the notes."""
        return query

    return tools


def start() -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(MODEL),
        "--chat_format", "chatml-function-calling", "--host", "127.0.0.1", "--port", "0",
        "--n_ctx", "2048", "--verbose", "False",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found: list[str] = []
    ready = threading.Event()

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if not found and (match := re.search(r"Uvicorn running on (http://\S+)", line)):
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    if not ready.wait(120) or not found:
        process.kill()
        raise SystemExit("llama_cpp.server did not start")
    return process, f"{found[0]}/v1"


def main() -> None:
    from openai import OpenAI

    tools = registry()
    process, base_url = start()
    counts = {"calls": 0, "invalid": 0, "repaired": 0, "accepted": 0}
    try:
        with OpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=60) as client:
            for definition in tools.definitions():
                name = definition["function"]["name"]
                for prompt in PROMPTS:
                    for limit in LIMITS:
                        response = client.chat.completions.create(
                            model="bench",
                            messages=[{"role": "user", "content": prompt}],
                            tools=[definition],  # type: ignore[list-item]
                            tool_choice={"type": "function", "function": {"name": name}},
                            max_tokens=limit,
                            temperature=0,
                            seed=0,
                        )
                        text = response.choices[0].message.tool_calls[0].function.arguments
                        counts["calls"] += 1
                        try:
                            json.loads(text)
                            continue
                        except ValueError:
                            counts["invalid"] += 1
                        repaired = repair_json(text)
                        if repaired is None or not repaired.lstrip().startswith("{"):
                            continue
                        counts["repaired"] += 1
                        invocation = tools.invoke_sync(name, json.loads(repaired))
                        counts["accepted"] += invocation.ok
    finally:
        process.terminate()
        process.wait(10)
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
