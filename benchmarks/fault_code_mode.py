"""Fault injection for code mode's approvals (issue 27): 50 runs, each killed while
its program waits for approval and resumed in a new process.

Each run starts ``tests/cycle/code_mode_child.py`` against a scripted model: its
program gathers two calls, then calls a tool that needs approval, and pauses. The
child saves the history and is killed with SIGKILL at a random point of the pause
(0–200 ms after it said so); a new child resumes from the saved history with the
approval. Every tool run is written to a ledger file. A run passes when no call ran
twice (the ledger holds each call once) and the program's result equals an
uninterrupted run's.

Run from the repository's root (``--runs`` and ``--seed`` to change them)::

    .venv/bin/python benchmarks/fault_code_mode.py
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agcore_tools.testing import ScriptedChatServer as S
from tests.cycle.code_mode_child import EXPECTED, PROGRAM, kill_and_resume


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=27)
    args = parser.parse_args()
    call = S.reply_tool_calls([("run_python", {"code": textwrap.dedent(PROGRAM)}, "c_prog")])
    script = [call, S.reply_text("done")] * args.runs
    rng = random.Random(args.seed)
    passed, twice, wrong, seconds = 0, 0, 0, []
    with S(script) as server, tempfile.TemporaryDirectory() as folder:
        for n in range(args.runs):
            started = time.perf_counter()
            ledger, _ = kill_and_resume(server.base_url, Path(folder) / f"run{n}", rng)
            seconds.append(time.perf_counter() - started)
            result = next(
                m["content"]
                for m in server.requests[2 * n + 1].json["messages"]
                if m.get("role") == "tool" and m.get("tool_call_id") == "c_prog"
            )
            ran_once = sorted(ledger) == ["get_order 1", "get_order 2", "refund 2 5.0"]
            twice += not ran_once
            wrong += result != EXPECTED
            passed += ran_once and result == EXPECTED
    print(
        f"{passed}/{args.runs} runs passed: {twice} with a call run twice, {wrong} with another result"
    )
    print(f"per run (two processes): median {statistics.median(seconds):.2f} s")
    if passed != args.runs:
        sys.exit(1)


if __name__ == "__main__":
    main()
