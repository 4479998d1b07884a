"""Run a Python script the way a user would, for the tests: as a real subprocess, or
forked from a process that has already imported what it needs (:func:`run_snippet`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests import _forkserver

ROOT = Path(__file__).resolve().parents[1]


def _offline_env(env: dict[str, str] | None) -> dict[str, str]:
    """This process's environment without its OPENAI_* variables, then ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    clean.update(env or {})
    return clean


def run_script(
    script: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` from the repository root without the caller's OPENAI_* variables
    (so it is offline unless ``env`` says otherwise)."""
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_offline_env(env),
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
    argv = [sys.executable, str(script)]
    env, preload = _offline_env(env), _forkserver.DOC_SNIPPETS
    return _forkserver.run(argv, env=env, cwd=ROOT, timeout=timeout, preload=preload)
