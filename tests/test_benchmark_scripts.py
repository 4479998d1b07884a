"""Every script in ``benchmarks/`` still imports against the library as it is now.

Benchmarks are not run here (they do not belong in the suite), but a rename in the
library once left ``bench_interop.py`` unable to start for two days without a test
noticing. A script that needs a package only the benchmark venv has (a peer, a plot
library) is skipped by that missing package, named; any other import error fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"

_IMPORT_ALL = """
import importlib, json, sys
results = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        own = exc.name is None or exc.name.split(".")[0] in ("agcore_tools", *sys.argv[1:])
        results[name] = ("error" if own else "missing", f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        results[name] = ("error", f"{type(exc).__name__}: {exc}")
    else:
        results[name] = ("ok", "")
print(json.dumps(results))
"""


def test_every_benchmark_script_imports() -> None:
    names = sorted(path.stem for path in BENCHMARKS.glob("*.py"))
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, *names],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=BENCHMARKS,
        env={"PYTHONPATH": f"{BENCHMARKS}:{ROOT}", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.strip().splitlines()[-1])
    errors = {name: why for name, (state, why) in results.items() if state == "error"}
    assert errors == {}
    imported = [name for name, (state, _) in results.items() if state == "ok"]
    assert "bench_interop" in imported and "bench_search" in imported
    # Needs agcore_tools alone at import (its peers are imported where they run).
    assert "bench_loop_stalls" in imported
    assert len(imported) >= 20, results
