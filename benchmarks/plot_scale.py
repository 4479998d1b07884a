"""Plot ``bench_scale.py``'s results: client CPU per turn and p99 latency against N.

Run with the benchmark venv (matplotlib is in the ``bench`` extra)::

    .venv-bench/bin/python benchmarks/plot_scale.py [benchmarks/results/bench_scale.json]

Writes ``docs/img/scale.png``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent
SHOWN = {
    "raw/default": ("raw SDK loop, SDK's default client", "tab:gray", "--"),
    "raw/sharded": ("raw SDK loop, sharded client", "tab:gray", "-"),
    "raw-stream/sharded": ("raw SDK streaming loop, sharded", "tab:brown", "-"),
    "cycle/default": ("LlmCycle, SDK's default client", "tab:blue", "--"),
    "cycle/sharded": ("LlmCycle, sharded client", "tab:blue", "-"),
    "cycle-stream/sharded": ("LlmCycle streaming, sharded", "tab:cyan", "-"),
    "agents/sharded": ("openai-agents Runner, sharded", "tab:red", "-"),
    "bare/default": ("bare httpx2 posts (floor), one pool", "black", ":"),
    "bare/sharded": ("bare httpx2 posts (floor), sharded", "black", "-."),
}


def main() -> None:
    source = (
        Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "benchmarks/results/bench_scale.json"
    )
    rows = json.loads(source.read_text())["results"]
    figure, (cpu, p99) = plt.subplots(1, 2, figsize=(12, 4.8))
    for name, (label, color, style) in SHOWN.items():
        points = sorted((r["n"], r) for r in rows if r["contender"] == name)
        if not points:
            continue
        ns = [n for n, _ in points]
        cpu.plot(
            ns,
            [r["cpu_ms_per_turn"] for _, r in points],
            style,
            color=color,
            marker="o",
            label=label,
        )
        p99.plot(
            ns, [r["p99_conversation_ms"] / 1e3 for _, r in points], style, color=color, marker="o"
        )
    for axes in (cpu, p99):
        axes.set_xscale("log")
        axes.set_xlabel("concurrent conversations N")
        axes.grid(True, which="both", alpha=0.3)
    cpu.set_ylabel("client CPU per turn (ms)")
    cpu.set_ylim(bottom=0)
    p99.set_yscale("log")
    p99.set_ylabel("p99 conversation latency (s, 3 turns)")
    figure.legend(loc="lower center", ncol=3, fontsize="small", frameon=False)
    figure.suptitle("N concurrent 3-turn tool loops in one process (bench_scale.py)")
    figure.tight_layout(rect=(0, 0.12, 1, 1))
    out = ROOT / "docs/img/scale.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    print(f"written {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
