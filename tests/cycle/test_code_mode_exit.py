"""A process that exits right after a program ends with exit code 0: pydantic-monty's
threads, still finishing the sandbox's last steps, got the interpreter's exit to abort
the process (SIGABRT, "Fatal Python error: PyGILState_Release") after it had printed
everything: 6 of the 60 children of 10 runs of the first test below, before the exit
waited for them."""

from __future__ import annotations

import atexit
import subprocess
import sys
import textwrap
import time

import pytest

from agcore_tools import _sandbox as sandbox

pytest.importorskip("pydantic_monty")

CHILD = textwrap.dedent(
    """
    import asyncio

    from agcore_tools._sandbox import DEFAULT_LIMITS, MontySandbox


    async def main() -> None:
        for number in range(40):
            async with MontySandbox({}, DEFAULT_LIMITS) as box:
                segment = await box.start(f"{number} + 1")
        print("value", segment.output, flush=True)


    asyncio.run(main())
    """
)
CHILDREN = 6  # side by side, as a busy machine runs them


def test_a_process_that_exits_right_after_its_programs_exits_with_0() -> None:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(CHILDREN)
    ]
    ends = []
    try:
        for child in children:
            out, err = child.communicate(timeout=120)
            ends.append((child.returncode, out, err[-300:]))
    finally:
        for child in children:
            child.kill()
            child.wait(timeout=10)
    assert [(code, out) for code, out, _ in ends] == [(0, "value 40\n")] * CHILDREN, ends


async def test_a_sandbox_holds_the_exit_while_open_and_just_after() -> None:
    async with sandbox.MontySandbox({}, sandbox.DEFAULT_LIMITS) as box:
        assert sandbox._exit_grace.left() == sandbox.EXIT_GRACE
        await box.start("1")
    assert 0.0 < sandbox._exit_grace.left() <= sandbox.EXIT_GRACE


def test_exit_waits_only_while_a_program_ended_moments_ago() -> None:
    grace = sandbox.ExitGrace(0.2)
    assert grace.left() == 0.0  # no sandbox yet
    grace.opened()
    assert grace.left() == 0.2  # one is open: the whole grace
    grace.closed()
    assert 0.0 < grace.left() <= 0.2
    started = time.monotonic()
    grace.wait()
    assert time.monotonic() - started >= 0.1
    assert grace.left() == 0.0
    started = time.monotonic()
    grace.wait()  # the grace is over: exit waits for nothing
    assert time.monotonic() - started < 0.05
    atexit.unregister(grace.wait)  # opened() registered it for this test's process
