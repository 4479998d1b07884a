"""Check that the installed llama-cpp-python build runs the test model on this CPU.

A wheel compiled for another CPU can load a model and answer a one-token prompt, then die
on the first longer one (a SIGSEGV in ``decode``, seen with an AVX-512 build). This runs a
prompt of several tokens in a child process, so such a build stops ``make test``'s set-up
with the signal that killed it instead of surfacing later as connection errors in every
real-server test. It also refuses a build that reports AVX-512, which the Makefile's
portable flags leave out: on a CPU without it that build would pass the prompt here and
still be the wrong one to cache. Run by the Makefile after the build and the model
download.

    python scripts/check_llama.py path/to/model.gguf
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from pathlib import Path

logger = logging.getLogger("check_llama")

_TIMEOUT = 120.0  # loading and two tokens take about a second; a loaded machine more
_PROBE = """
import sys
import llama_cpp
from llama_cpp import Llama
info = llama_cpp.llama_print_system_info().decode()
print(info)
assert "AVX512 = 1" not in info, "built with AVX-512: not the portable build"
llm = Llama(model_path=sys.argv[1], n_ctx=512, verbose=False)
out = llm("The capital of France is a city called", max_tokens=4, temperature=0.0)
assert out["choices"][0]["text"] is not None
"""


def describe(returncode: int) -> str:
    """How a child process ended, as a person would say it.

    >>> describe(-11)
    'killed by SIGSEGV'
    >>> describe(3)
    'exit code 3'
    """
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def check(model: Path) -> int:
    """Run the probe; 0 when the build answered, 1 (with the reason logged) otherwise."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(model)],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        logger.error("llama-cpp-python did not answer a short prompt within %.0f s", _TIMEOUT)
        return 1
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        logger.error(
            "llama-cpp-python failed a multi-token prompt on this CPU (%s); the wheel was "
            "probably built for another CPU: delete it from the cache and run make again\n%s",
            describe(done.returncode),
            tail,
        )
        return 1
    logger.info("llama-cpp-python answered a multi-token prompt on this CPU")
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    if len(sys.argv) != 2:
        logger.error("usage: check_llama.py MODEL.gguf")
        sys.exit(2)
    sys.exit(check(Path(sys.argv[1])))
