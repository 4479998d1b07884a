"""The restart budget of a session: a circuit breaker over restarts.

At most ``max_restarts`` restarts within ``window`` seconds (see
:class:`~agcore_tools.McpRecovery`), counted from when each attempt ended. The
circuit is:

- ``"closed"`` while the budget has room: a lost connection is restarted by the next
  request (after its backoff);
- ``"open"`` once it is spent: requests fail at once, saying when the oldest counted
  restart leaves the window;
- ``"half-open"`` once that happens: the next request tries one restart (if it fails,
  the circuit is open again); a request that succeeds (or ``connect()``) clears the
  count and closes the circuit.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Literal, TypeAlias

from .recovery import McpRecovery

__all__ = ["Circuit", "RestartBudget"]

Circuit: TypeAlias = Literal["closed", "open", "half-open"]
"""The state of the restart circuit (see the module docs)."""


class RestartBudget:
    """The restarts counted against a policy, and the circuit state they make.

    Example:
        >>> policy = McpRecovery(max_restarts=2, window=10)
        >>> budget = RestartBudget()
        >>> budget.spend(policy, 100.0); budget.spend(policy, 101.0)
        >>> budget.state(policy, 102.0), budget.next_at(policy, 102.0)
        ('open', 110.0)
        >>> budget.state(policy, 110.0), budget.next_at(policy, 110.0)
        ('half-open', 110.0)
        >>> budget.clear(); budget.state(policy, 110.0)
        'closed'
    """

    __slots__ = ("_opened", "_times")

    def __init__(self) -> None:
        self._times: deque[float] = deque()
        self._opened = False

    def clear(self) -> None:
        """A request succeeded, or ``connect()`` ran: the count starts again."""
        if self._times or self._opened:  # the hot path (a call that succeeded): neither
            self._times.clear()
            self._opened = False

    def spend(self, policy: McpRecovery, now: float) -> None:
        """A restart was tried; it ended at ``now``."""
        self._times.append(now)
        if self.used(policy, now) >= policy.max_restarts:
            self._opened = True

    def used(self, policy: McpRecovery, now: float) -> int:
        """Restarts counted at ``now`` (those older than the window are dropped)."""
        times = self._times
        while times and times[0] <= now - policy.window:
            times.popleft()
        return len(times)

    def next_at(self, policy: McpRecovery, now: float) -> float:
        """When a restart may be tried: ``now`` if the budget has room, else when the
        oldest counted restart leaves the window (``inf``: ``max_restarts`` is 0)."""
        if policy.max_restarts == 0:
            return math.inf
        used = self.used(policy, now)
        if used < policy.max_restarts:
            return now
        return self._times[used - policy.max_restarts] + policy.window

    def state(self, policy: McpRecovery, now: float) -> Circuit:
        """The circuit at ``now`` (see the module docs)."""
        if self.next_at(policy, now) > now:
            return "open"
        return "half-open" if self._opened else "closed"
