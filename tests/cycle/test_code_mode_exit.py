"""A process that exits right after a program ends with exit code 0: pydantic-monty's
threads, still finishing the sandbox's last steps, got the interpreter's exit to abort
the process (SIGABRT, "Fatal Python error: PyGILState_Release") after it had printed
everything: before the exit waited for them, the first test below failed 6 runs of 6
(11 of its 36 children aborted)."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import textwrap
import time

import pytest

from agcore_tools import _exit_grace as grace_module
from agcore_tools import _sandbox as sandbox

pytest.importorskip("pydantic_monty")

CHILD = textwrap.dedent(
    """
    import asyncio

    from agcore_tools._sandbox import DEFAULT_LIMITS, MontySandbox


    async def one(number: int) -> object:
        async with MontySandbox({}, DEFAULT_LIMITS) as box:
            return (await box.start(f"{number} + 1")).output


    async def main() -> None:
        print("values", sum(await asyncio.gather(*(one(n) for n in range(8)))), flush=True)


    asyncio.run(main())
    """
)
# One after another: children side by side aborted less often (about one in ten, against
# about one in three), and eight sandboxes closing together as often as forty in a row.
CHILDREN = 6


def test_a_process_that_exits_right_after_its_programs_exits_with_0() -> None:
    ends = []
    for _ in range(CHILDREN):
        done = subprocess.run(
            [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120
        )
        ends.append((done.returncode, done.stdout, done.stderr[-300:]))
    assert [(code, out) for code, out, _ in ends] == [(0, "values 36\n")] * CHILDREN, ends


async def test_a_sandbox_holds_the_exit_while_open_and_just_after() -> None:
    async with sandbox.MontySandbox({}, sandbox.DEFAULT_LIMITS) as box:
        assert grace_module.exit_grace.left() == grace_module.EXIT_GRACE
        await box.start("1")
    assert 0.0 < grace_module.exit_grace.left() <= grace_module.EXIT_GRACE


def test_exit_waits_only_while_a_program_ended_moments_ago() -> None:
    grace = grace_module.ExitGrace(0.2)
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
    inherited = grace_module.ExitGrace(0.01)
    inherited.closed()  # a sandbox of the parent's, closed in a forked child
    inherited.wait()
    assert inherited.left() == 0.0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_does_not_wait_for_its_parents_sandboxes() -> None:
    # The child has none of them; and a lock another thread of the parent held at the
    # fork stays held in the child for good: its exit would hang on it.
    code = textwrap.dedent(
        """
        import os, signal, sys, threading
        from agcore_tools._exit_grace import exit_grace as _exit_grace
        _exit_grace.opened()  # a sandbox open in the parent
        held, release = threading.Event(), threading.Event()
        def hold():  # another thread of the parent's, in the grace's bookkeeping
            with _exit_grace._lock:
                held.set()
                release.wait(30)
        threading.Thread(target=hold).start()
        assert held.wait(30)
        pid = os.fork()
        if pid == 0:
            signal.alarm(10)  # a hung child ends instead of the test
            os._exit(0 if _exit_grace.left() == 0.0 else 3)
        release.set()
        _exit_grace.closed()
        _, status = os.waitpid(pid, 0)
        sys.exit(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_a_sandbox_closed_by_the_library_loops_shutdown_gets_the_whole_grace() -> None:
    # A program still running on the library's loop at exit (a *_sync call in another
    # thread) is closed by the loop's wind-down, an exit hook registered before the
    # grace's: the grace, run first, had ended before that sandbox closed.
    code = textwrap.dedent(
        """
        import asyncio, atexit, threading

        def last() -> None:  # registered first: the last exit hook to run
            print("left", grace.exit_grace.left(), flush=True)

        atexit.register(last)

        from agcore_tools import _exit_grace as grace, _sync
        from agcore_tools._sandbox import DEFAULT_LIMITS, MontySandbox
        from agcore_tools.error import SyncCallError

        started = threading.Event()

        async def hold() -> None:
            async with MontySandbox({}, DEFAULT_LIMITS) as box:
                await box.start("1")
                started.set()
                await asyncio.Event().wait()  # until the loop's wind-down cancels it

        def call() -> None:
            try:
                _sync.run(hold())
            except SyncCallError:  # cancelled at exit, as said
                pass

        threading.Thread(target=call, daemon=True).start()
        assert started.wait(60)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "left 0.0\n"), done.stderr
