"""How long the interpreter's exit waits for pydantic-monty's own threads.

Why a module of its own: the wait is a process-wide concern (one record per process,
reset in a forked child), below the sandbox that reports to it; it needs nothing but
the standard library.
"""

from __future__ import annotations

import atexit
import os
import threading
import time

__all__ = ["EXIT_GRACE", "ExitGrace", "exit_grace"]


EXIT_GRACE = 0.05
"""Seconds the interpreter's exit gives Monty's threads after a sandbox closed (see
:class:`ExitGrace`)."""


class ExitGrace:
    """Lets Monty's own threads finish before the interpreter's exit ends them.

    Why: pydantic-monty (1.6 and 1.7 alike) finishes a sandbox's last awaited steps
    on threads of its own that run Python code. When a process exits right after a
    program, one of them can still want the GIL while the interpreter finalizes;
    Python then ends that thread, and the extension aborts the whole process ("Fatal
    Python error: PyGILState_Release", exit code 134) after the script has done
    everything it was asked. So at exit, if a sandbox is open or closed less than
    ``grace`` seconds ago, the interpreter sleeps out the rest of ``grace`` with the
    GIL released; a process that exits later waits for nothing.

    Example:
        >>> grace = ExitGrace(0.01)
        >>> grace.opened(); grace.closed()
        >>> 0 < grace.left() <= 0.01
        True
    """

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self._lock = threading.Lock()
        self._open = 0
        self._closed_at: float | None = None
        self._registered = False

    def opened(self) -> None:
        """A sandbox started; the first one registers :meth:`wait` to run at exit."""
        with self._lock:
            self._open += 1
            if not self._registered:
                atexit.register(self.wait)
                self._registered = True

    def closed(self) -> None:
        """A sandbox closed (its Monty pool with it)."""
        with self._lock:
            self._open = max(0, self._open - 1)  # one of the parent's, in a forked child
            self._closed_at = time.monotonic()

    def left(self) -> float:
        """Seconds exit would still wait now: the whole grace while a sandbox is open."""
        with self._lock:
            if self._open:
                return self.grace
            if self._closed_at is None:
                return 0.0
            return max(0.0, self.grace - (time.monotonic() - self._closed_at))

    def wait(self) -> None:
        """Sleep out what is :meth:`left` of the grace (at interpreter exit)."""
        left = self.left()
        if left > 0:
            time.sleep(left)

    def forked(self) -> None:
        """In a forked child: none of the parent's sandboxes or Monty's threads are here,
        and a lock another parent thread held at the fork would never be released."""
        self._lock = threading.Lock()
        self._open = 0
        self._closed_at = None


exit_grace = ExitGrace(EXIT_GRACE)
"""The process's one grace, which every Monty sandbox reports to."""
if hasattr(os, "register_at_fork"):  # pragma: no branch - absent on Windows only
    os.register_at_fork(after_in_child=exit_grace.forked)
