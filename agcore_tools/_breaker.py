"""A tool's circuit breaker, as state: closed, open or half-open, and which call
outcomes move it.

Split from ``_guard`` because it is a job of its own: a state machine under a lock
(:class:`BreakerMachine`, one per tool; the public :class:`~agcore_tools.policies.Breaker`
holds only its settings), with no loop, no store and no event, which the
:class:`~agcore_tools._guard.Guard` of a tool's policy drives (it tells the breaker of
each call's admission and end, and announces what changes) and which ``_policy_book``
keeps with the tool object, so every registry that holds the tool shares it.
:func:`counts_as_failure` is the one rule of which errors a breaker counts.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from typing import Any, Literal

from ._text import args_digest
from .error import (
    InvalidArgumentsError,
    McpError,
    McpInputRequiredError,
    McpNotInitializedError,
    ToolError,
    ToolUnavailableError,
)
from .policies import Breaker

__all__ = ["BreakerMachine", "BreakerState", "counts_as_failure"]

BreakerState = Literal["closed", "open", "half_open"]
"""Where a breaker stands: calls pass, calls are refused, or one probe call passes."""

_PAUSED_KEPT = 256  # the call ids of paused calls a breaker keeps for their resume


class BreakerMachine:
    """The running state of one tool's :class:`~agcore_tools.policies.Breaker` (the
    policy record says when to open; this is where it stands): closed, open (until
    ``reopens``), or half-open.

    Half-open, one call is let through, the probe, and only its outcome decides: not a
    call that started before the breaker opened and ends meanwhile, nor an answer from
    the cache. Calls are told apart by their context object (one per call). A call that
    paused (an MCP task still running, a question to the user) decides nothing, and its
    resume, known by its call id, is let through whatever the state: refused, the
    task's result would be lost. A probe's resume decides as the probe would have. The
    resume runs the same call: a call with that id but other arguments is a new one
    (call ids are not unique across conversations).

    A registry is shared by every thread and loop that uses it, so each change is made
    under a lock: two calls at once cannot both become the probe.

    Example:
        >>> breaker = BreakerMachine(Breaker(failures=1, window=60, cool_down=30))
        >>> call = object()
        >>> breaker.admit("lookup", 0.0, call)
        >>> breaker.record(True, 1.0, call)
        'open'
        >>> breaker.hidden(2.0), breaker.hidden(31.0)
        (True, False)
    """

    __slots__ = (
        "_lock",
        "config",
        "failed_at",
        "last_probe",
        "paused",
        "probe",
        "reopens",
        "resumed",
        "state",
    )

    def __init__(self, config: Breaker) -> None:
        self.config = config
        self.state: BreakerState = "closed"
        self.failed_at: deque[float] = deque()
        self.reopens = 0.0
        self.probe: object | None = None
        """The call let through half-open, while it runs."""
        self.last_probe: object | None = None
        """The probe that ended without an outcome: its timeout may still be told."""
        self.paused: OrderedDict[str, tuple[bool, bytes]] = OrderedDict()
        """The call ids of calls that paused, the most recent last: whether each was the
        probe, and its arguments' digest."""
        self.resumed: list[tuple[object, bool]] = []
        """The resumes of paused calls running now: their context, and whether it was the
        probe that paused."""
        self._lock = threading.Lock()

    def hidden(self, moment: float) -> bool:
        """Whether the breaker is open at ``moment``: its tool is not offered."""
        return self.state == "open" and moment < self.reopens

    def admit(
        self, name: str, moment: float, caller: object, call_id: str | None = None, args: Any = None
    ) -> None:
        """Let ``caller``'s call of tool ``name`` start at ``moment``, or raise
        :class:`ToolUnavailableError` (open, or half-open with its probe running)."""
        with self._lock:
            ticket = self.paused.get(call_id) if self.paused and call_id is not None else None
            if ticket is not None and ticket[1] == args_digest(args):
                del self.paused[call_id]  # type: ignore[arg-type]
                self.resumed.append((caller, ticket[0]))
                return
            if self.state == "closed":
                return
            if self.state == "open":
                left = self.reopens - moment
                if left > 0:
                    config = self.config
                    raise ToolUnavailableError(
                        name,
                        f"its circuit breaker opened after {config.failures} failure(s) "
                        f"within {config.window:g} s",
                        retry_after=left,
                    )
                self.state = "half_open"
            if self.probe is not None:
                raise ToolUnavailableError(
                    name, "its circuit breaker is letting one probe call through, which is running"
                )
            self.probe, self.last_probe = caller, None

    def record(
        self,
        failed: bool | None,
        moment: float,
        caller: object,
        *,
        paused: tuple[str, bytes] | None = None,
    ) -> BreakerState | None:
        """Note the end of ``caller``'s call (``failed`` None: it did not run to an
        end; ``paused``: the call id and arguments' digest of a call that paused); the
        new state, if changed."""
        with self._lock:
            return self._record(failed, moment, caller, paused)

    def _record(
        self, failed: bool | None, moment: float, caller: object, paused: tuple[str, bytes] | None
    ) -> BreakerState | None:
        was_probe = caller is self.probe
        resumed = next((i for i, (c, _) in enumerate(self.resumed) if c is caller), None)
        if resumed is not None:
            was_probe = self.resumed.pop(resumed)[1]
        elif was_probe:
            self.probe = None
        if paused is not None and failed is None:
            self.paused[paused[0]] = (was_probe, paused[1])
            while len(self.paused) > _PAUSED_KEPT:
                self.paused.popitem(last=False)
            return None
        if resumed is not None:
            if not was_probe or self.state != "half_open":
                return self._count(failed, moment) if failed and self.state == "closed" else None
            if failed is None:
                self.last_probe = caller
                return None
            self.probe = None  # a probe running meanwhile is one of a phase now over
        elif was_probe:
            if failed is None:
                self.last_probe = caller
                return None
        elif failed is None:
            return None
        elif caller is not self.last_probe or self.state != "half_open":
            return self._count(failed, moment) if self.state == "closed" else None
        self.last_probe = None
        self.state = "open" if failed else "closed"
        self.failed_at.clear()
        self.reopens = moment + self.config.cool_down
        return self.state

    def _count(self, failed: bool, moment: float) -> BreakerState | None:
        if not failed:
            return None
        config = self.config
        failed_at = self.failed_at
        failed_at.append(moment)
        while failed_at and failed_at[0] <= moment - config.window:
            failed_at.popleft()
        if len(failed_at) >= config.failures:
            self.state = "open"
            self.reopens = moment + config.cool_down
            failed_at.clear()
            return "open"
        return None


def counts_as_failure(error: BaseException) -> bool:
    """Whether a call that raised ``error`` counts as a failure of its tool.

    Example:
        >>> from agcore_tools.error import ToolExecutionError
        >>> counts_as_failure(ToolExecutionError("t", "boom"))
        True
        >>> counts_as_failure(McpNotInitializedError("s", "not connected", by_caller=True))
        False
    """
    # The model's bad arguments and the policies' own refusals say nothing about
    # whether the tool works.
    if isinstance(error, (InvalidArgumentsError, ToolUnavailableError)):
        return False
    if isinstance(error, McpInputRequiredError):
        return False  # its task waits for the user's answer: it has not failed
    if isinstance(error, McpNotInitializedError) and error.by_caller:
        return False  # the app's mistake (a call before connect()): the server is fine
    if isinstance(error, McpError) and not error.is_recoverable():
        # Its server failed: down, restarts spent, or it would not start. The call was
        # never sent, yet it is the failure a breaker is for: a dead server's tools
        # stayed offered, each call failing at once. A refusal the server answered (the
        # model's arguments, a 429) is recoverable, and does not count.
        return True
    return not (isinstance(error, ToolError) and error.may_have_run is False)
