"""LLM-loop instruction counts: the loop's cost measured in instructions, not time.

On a shared, noisy machine the timed ratios of ``bench_cycle.py`` move by ±0.1 between
runs. Counted instructions do not: this script runs one contender of
``bench_cycle.py`` for a number of loops against the same scripted server, started in
a child process so that only the client is counted, under ``valgrind`` (callgrind;
children are not traced). Two runs, of 5 and of 25 loops, are subtracted, so start-up
and imports cancel out and what is left is the cost of 20 three-request loops::

    .venv-bench/bin/python benchmarks/count_cycle.py            # every contender (slow)
    .venv-bench/bin/python benchmarks/count_cycle.py stream raw-stream

Contenders: ``loop`` and ``stream`` (agcore_tools), ``raw`` and ``raw-stream`` (the
hand-written SDK loops), and the same four over the Responses API: ``responses``,
``responses-stream``, ``raw-responses``, ``raw-responses-stream``. ``--run NAME LOOPS`` is the inner mode valgrind runs. Needs
``valgrind`` on the PATH.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

NAMES = {
    "loop": "agcore LlmCycle",
    "stream": "agcore LlmCycle (stream)",
    "raw": "raw OpenAI SDK loop",
    "raw-stream": "raw OpenAI SDK loop (stream)",
    "responses": "agcore LlmCycle (responses)",
    "raw-responses": "raw OpenAI SDK loop (responses)",
    "responses-stream": "agcore LlmCycle (responses, stream)",
    "raw-responses-stream": "raw OpenAI SDK loop (responses, stream)",
}
FEW, MANY = 5, 25

SERVER = """
import sys
sys.path.insert(0, {here!r})
from bench_cycle import by_progress
from agcore_tools.testing import ScriptedChatServer
with ScriptedChatServer([by_progress], repeat=True) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
"""


async def run(name: str, loops: int, base_url: str) -> None:
    import bench_cycle
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="-", max_retries=0, timeout=30.0)
    contenders = {
        c.name: c
        for c in [*bench_cycle.raw_contenders(client), *bench_cycle.agcore_contenders(client)]
    }
    contender = contenders[NAMES[name]]
    for _ in range(3 + loops):  # 3 warm-up loops: the first request's lazy imports
        await contender.loop()
    await client.close()


def count(name: str, loops: int) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--run",
                name,
                str(loops),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    match = re.search(r"Collected\s*:\s*([\d,]+)", done.stderr)
    if match is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(match.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("contenders", nargs="*", default=list(NAMES))
    parser.add_argument("--run", nargs=2, metavar=("NAME", "LOOPS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = sorted(set(args.contenders) - set(NAMES))
    if unknown:
        parser.error(f"unknown contender(s) {unknown}; choose from {sorted(NAMES)}")
    if args.run:  # inside valgrind: the server runs in a child process, not counted
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER.format(here=str(HERE))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            base_url = server.stdout.readline().strip()
            asyncio.run(run(args.run[0], int(args.run[1]), base_url))
        finally:
            server.communicate("", timeout=30)
        return
    per_loop = {}
    for name in args.contenders:
        few, many = count(name, FEW), count(name, MANY)
        per_loop[name] = (many - few) / (MANY - FEW)
        print(f"{NAMES[name]:<30} {per_loop[name] / 1e6:8.2f} M instructions per 3-request loop")
    pairs = (
        ("loop", "raw"),
        ("stream", "raw-stream"),
        ("responses", "raw-responses"),
        ("responses-stream", "raw-responses-stream"),
    )
    for name, raw in pairs:
        if name in per_loop and raw in per_loop:
            print(f"{NAMES[name]:<30} {per_loop[name] / per_loop[raw]:.3f}x {NAMES[raw]}")
    print(f"(PYTHONPATH={os.environ.get('PYTHONPATH', '')})")


if __name__ == "__main__":
    main()
