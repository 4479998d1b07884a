"""A real server that dies mid-session is reported as such, and comes back.

An inner pytest session uses the real fixtures of ``tests/real/conftest.py``: its first
test kills the llama server with SIGSEGV, as a build for the wrong CPU does on its first
prompt. The outer test checks what a developer would read: that test's teardown names
the server, the signal and the server's last lines, and the next test is answered at the
same address (where LiteLLM's proxy, say, still points) by the server started again on
the same port, not a "Connection error". The proxy itself is left out: starting one
more takes longer than the rest of this test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import describe_exit

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]

INNER_TESTS = """
import os
import signal

from openai import OpenAI


def ask(server):
    with OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0, timeout=60) as c:
        return c.chat.completions.create(
            model=server.model, messages=[{"role": "user", "content": "Hi"}], max_tokens=2
        )


def test_1_the_server_crashes(llama_server):
    ask(llama_server)
    os.kill(llama_server.process.pid, signal.SIGSEGV)
    llama_server.process.wait(30)


def test_2_the_next_test_is_answered(llama_server):
    assert ask(llama_server).choices[0].message is not None
"""


def test_a_killed_server_is_reported_with_its_signal_and_started_again(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.real.conftest"]\n')
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    out = done.stdout + done.stderr
    assert "2 passed, 1 error" in out, out
    assert "ERROR at teardown of test_1_the_server_crashes" in out, out
    assert "llama_cpp.server at http://127.0.0.1:" in out, out
    assert "exited during the session (killed by SIGSEGV)" in out, out
    assert "Uvicorn running on http://127.0.0.1:" in out, out  # the server's own last lines
    assert "It was started again on the same port" in out, out
    assert "Connection error" not in out, out


def test_an_exit_is_described_by_signal_or_code() -> None:
    assert describe_exit(-11) == "killed by SIGSEGV"
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(1) == "exit code 1"
    assert describe_exit(-200) == "killed by signal 200"
