"""Run a Python script as a real subprocess, the way a user would, for the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_script(
    script: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` from the repository root without the caller's OPENAI_* variables
    (so it is offline unless ``env`` says otherwise)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    clean.update(env or {})
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=clean,
        cwd=ROOT,
        check=False,
    )
