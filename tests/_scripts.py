"""Run a Python script as a real subprocess, the way a user would, for the tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests import _forkserver

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


def run_snippet(
    script: Path, *, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """:func:`run_script` for a document's code block: the same environment, working
    directory and captured output, in a process forked from one that has imported
    ``openai`` and ``agcore_tools`` (:mod:`tests._forkserver`), some 0.7 s of CPU less
    for each of about 75 blocks. Not for a script whose test is about its start-up or
    its interpreter's exit (import cost, what is left running at exit): those need
    :func:`run_script`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    clean.update(env or {})
    argv = [sys.executable, str(script)]
    preload = _forkserver.DOC_SNIPPETS
    return _forkserver.run(argv, env=clean, cwd=ROOT, timeout=timeout, preload=preload)
