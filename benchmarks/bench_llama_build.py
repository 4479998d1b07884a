"""What the portable llama-cpp-python build costs against a native one, on the test model.

The Makefile builds llama-cpp-python for the x86-64 baseline (AVX2, FMA, F16C) instead of
``-march=native``, so a cached wheel never crashes on another CPU. This measures the price
of that on SmolLM2-135M: prompt evaluation and generation speed, each build in child
processes of its own, rounds interleaved so the machine's noise falls on both alike.

    # the portable build is the one make installs into .venv; build a native one aside:
    .venv/bin/python -m pip wheel --no-cache-dir --no-deps -w /tmp/native llama-cpp-python==0.3.36
    .venv/bin/python -m pip install --no-deps --target /tmp/native/site /tmp/native/*.whl
    .venv/bin/python benchmarks/bench_llama_build.py --native-site /tmp/native/site

Prints tokens per second (median over rounds) for each build and the native/portable
ratio; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_MEASURE = """
import json, sys, time
import llama_cpp
from llama_cpp import Llama
model, prompt_words, gen_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
llm = Llama(model_path=model, n_ctx=2048, n_threads=2, verbose=False, seed=0)
prompt = " ".join(["tools"] * prompt_words)
n_prompt = len(llm.tokenize(prompt.encode()))
def run(max_tokens):
    llm.reset()  # no prefix reuse between runs
    start = time.perf_counter()
    out = llm(prompt, max_tokens=max_tokens, temperature=0.0)
    return time.perf_counter() - start, out["usage"]["completion_tokens"]
run(1)  # warm-up
prompt_s, _ = run(1)
total_s, generated = run(gen_tokens)
print(json.dumps({
    "prompt_tps": n_prompt / prompt_s,
    "gen_tps": (generated - 1) / max(total_s - prompt_s, 1e-9),
    "info": llama_cpp.llama_print_system_info().decode().strip(),
}))
"""


def _default_model() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "agcore-tools" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _measure(site: str | None, model: Path, words: int, tokens: int) -> dict[str, object]:
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(model), str(words), str(tokens)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--native-site", required=True, help="folder holding a native llama_cpp")
    parser.add_argument("--model", type=Path, default=_default_model())
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--prompt-words", type=int, default=400)
    parser.add_argument("--gen-tokens", type=int, default=64)
    args = parser.parse_args()
    builds = {"portable": None, "native": args.native_site}
    runs: dict[str, list[dict[str, object]]] = {name: [] for name in builds}
    for _ in range(args.rounds):
        for name, site in builds.items():
            runs[name].append(_measure(site, args.model, args.prompt_words, args.gen_tokens))
    medians = {}
    for name, results in runs.items():
        prompt = statistics.median(float(str(r["prompt_tps"])) for r in results)
        gen = statistics.median(float(str(r["gen_tps"])) for r in results)
        medians[name] = (prompt, gen)
        print(f"{name:9} prompt {prompt:8.1f} tok/s   generation {gen:7.1f} tok/s")
        print(f"          {results[0]['info']}")
    (pp, pg), (np_, ng) = medians["portable"], medians["native"]
    print(f"portable / native: prompt {pp / np_:.3f}x, generation {pg / ng:.3f}x")


if __name__ == "__main__":
    main()
