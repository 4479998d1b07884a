"""A child process for the code-mode fault tests: run until the program pauses for
approval, or resume a saved history, against a scripted model at a given URL.

    python tests/cycle/code_mode_child.py start URL HISTORY LEDGER
    python tests/cycle/code_mode_child.py resume URL HISTORY LEDGER

Every tool run appends a line to LEDGER, so runs are counted across processes. "start"
saves the paused history to HISTORY, prints "paused", then waits to be killed.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from agcore_tools import CodeMode, CycleConfig, LlmCycle, ToolRegistry

PROGRAM = """
import asyncio
a, b = await asyncio.gather(get_order(1), get_order(2))
print("orders", a["total"], b["total"])
done = await refund(2, b["total"] / 4)
{"refund": done, "sum": a["total"] + b["total"]}
"""


def registry(ledger: Path) -> ToolRegistry:
    tools = ToolRegistry()

    def note(line: str) -> None:
        with ledger.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    @tools.tool
    async def get_order(order_id: int) -> dict:
        """An order."""
        note(f"get_order {order_id}")
        return {"id": order_id, "total": 10.0 * order_id}

    @tools.tool(needs_approval=True)
    def refund(order_id: int, amount: float) -> str:
        """Refund part of an order."""
        note(f"refund {order_id} {amount}")
        return f"refunded {amount} on {order_id}"

    return tools


async def main(mode: str, url: str, history: Path, ledger: Path) -> None:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key="-", timeout=20.0)
    async with LlmCycle(CycleConfig("m", approval_key=b"k" * 32), client=client) as cycle:
        tools = registry(ledger)
        if mode == "start":
            paused = await cycle.submit_with_tools("go", tools, select=CodeMode())
            requests = [
                {"call_id": r.call_id, "tool": r.tool_name, "arguments": r.arguments,
                 "signature": r.signature}
                for r in paused.pending_approvals
            ]  # fmt: skip
            saved = {"messages": cycle.messages, "requests": requests}
            await asyncio.to_thread(history.write_text, json.dumps(saved), encoding="utf-8")
            print("paused", flush=True)
            await asyncio.sleep(60)  # killed here, at a random point
            return
        from agcore_tools import ApprovalRequest

        saved = json.loads(await asyncio.to_thread(history.read_text, encoding="utf-8"))
        cycle.messages[:] = saved["messages"]
        answers = [
            ApprovalRequest(r["call_id"], r["tool"], r["arguments"], "", r["signature"]).approve()
            for r in saved["requests"]
        ]
        done = await cycle.submit_with_tools(None, tools, select=CodeMode(), approvals=answers)
        print("answer:", done.text, flush=True)


EXPECTED = 'orders 10.0 20.0\nresult: {"refund": "refunded 5.0 on 2", "sum": 30.0}'
"""The run_python result of an uninterrupted run (paused and resumed in one process)."""


def kill_and_resume(url: str, folder: Path, rng: random.Random) -> tuple[list[str], str]:
    """One fault run: start a child, kill it (SIGKILL) at a random point while its
    program waits for approval, resume in a new child. The ledger's lines and the
    resumed child's output."""
    folder.mkdir(parents=True, exist_ok=True)
    history, ledger = folder / "history.json", folder / "ledger.txt"
    here = str(Path(__file__).resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    args = [url, str(history), str(ledger)]
    child = subprocess.Popen(
        [sys.executable, here, "start", *args], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # bounded: the child exits if its server is gone
        if line.strip() != "paused":
            raise AssertionError(f"the child did not pause: {line!r}")
        # Killed at a random point of the pause: the history is saved, the Monty worker
        # and the event loop are whatever state they are in.
        time.sleep(rng.uniform(0.0, 0.2))
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=10)
        if child.stdout is not None:
            child.stdout.close()
    done = subprocess.run(
        [sys.executable, here, "resume", *args],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"the resume failed: {done.stderr[-2000:]}")
    return ledger.read_text(encoding="utf-8").splitlines(), done.stdout


if __name__ == "__main__":
    mode, url, history, ledger = sys.argv[1:5]
    asyncio.run(main(mode, url, Path(history), Path(ledger)))
