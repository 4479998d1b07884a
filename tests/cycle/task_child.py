"""A child process for the running-task tests: start a run whose MCP task outlasts the
client's timeout, or resume a saved history, then save the history and wait to be killed.

    python tests/cycle/task_child.py start|resume MODEL_URL MCP_URL ERA HISTORY

It prints the pending items as JSON once the history is saved.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path

from agcore_tools import CycleConfig, LlmCycle, McpClient, StreamableHttpTransport, ToolRegistry


async def main(mode: str, model_url: str, mcp_url: str, era: str, history: Path) -> None:
    from openai import AsyncOpenAI

    options = {"protocol": "legacy"} if era == "2025-11-25" else {"tasks": True}
    model = AsyncOpenAI(base_url=model_url, api_key="-", timeout=20.0)
    mcp = McpClient("ci", StreamableHttpTransport(mcp_url), timeout=30.0, **options)  # type: ignore[arg-type]
    async with mcp, LlmCycle(CycleConfig("m", approval_key=b"k" * 32), client=model) as cycle:
        registry = ToolRegistry()
        registry.register_all(mcp.into_tools(tasks=["build"], task_wait=0.3))
        if mode == "start":
            response = await cycle.submit_with_tools("build the release", registry)
        else:
            saved = json.loads(await asyncio.to_thread(history.read_text))
            cycle.messages[:] = saved
            response = await cycle.submit_with_tools(None, registry)
        text = json.dumps(cycle.messages)
        await asyncio.to_thread(history.write_text, text)
        pending = [dataclasses.asdict(item) for item in response.pending]
        print(json.dumps({"pending": pending, "text": response.text}), flush=True)
        await asyncio.sleep(60)  # killed here


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5], Path(sys.argv[5])))
