"""How an :class:`~agcore_tools.McpClient` recovers from a lost connection or session.

Example:
    >>> McpRecovery().max_restarts, McpRecovery().window
    (3, 30.0)
    >>> [McpRecovery(backoff=0.5).delay(n) for n in (1, 2, 3, 4)]
    [0.0, 0.5, 1.0, 2.0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._keywords import checks_init_keywords
from ..error import ToolConfigError

__all__ = ["McpRecovery"]


@checks_init_keywords
@dataclass(frozen=True, slots=True)
class McpRecovery:
    """Restarts, session renewal and the liveness check of an :class:`~agcore_tools.McpClient`.

    With a policy (the default), a connection that was lost (the stdio server died, the
    HTTP server stopped answering or forgot the session) is started again by the next
    request, and a request that provably never ran, or whose tool is annotated
    ``readOnlyHint`` or ``idempotentHint``, is sent once more. Pass ``recovery=None``
    to :class:`~agcore_tools.McpClient` to turn all of it off.

    Restarts are budgeted like a circuit breaker: at most ``max_restarts`` within
    ``window`` seconds. Once they are spent (the circuit is open), requests fail at
    once, saying when the next restart will be tried; when the oldest of them is
    ``window`` seconds old (half-open), the next request tries one restart, and a
    request that succeeds closes the circuit. So a server back after an outage is used
    again without ``connect()``. :attr:`McpClient.circuit` tells the state.

    Example:
        >>> policy = McpRecovery(max_restarts=5, window=60, ping_interval=30)
        >>> policy.window, policy.ping_interval
        (60.0, 30.0)
    """

    max_restarts: int = 3
    """Restarts within ``window`` seconds, without a request succeeding in between,
    before requests fail at once (``connect()`` starts counting again); 0 never
    restarts."""
    backoff: float = 0.5
    """Seconds before the second restart of a window; each later one waits twice as
    long (the first is immediate). Counted from when the connection was lost."""
    ping_interval: float | None = None
    """Seconds between liveness pings; a server that does not answer one within this
    time is declared dead. None (the default) sends none."""
    window: float = 30.0
    """Seconds a restart counts against ``max_restarts``: once the oldest counted one is
    this old, the next request may try again."""

    def __post_init__(self) -> None:
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int):
            raise ToolConfigError(
                f"McpRecovery max_restarts must be an int, got {self.max_restarts!r}"
            )
        if self.max_restarts < 0:
            raise ToolConfigError(f"McpRecovery max_restarts must be >= 0, got {self.max_restarts}")
        object.__setattr__(self, "backoff", _seconds("backoff", self.backoff, zero_ok=True))
        object.__setattr__(self, "window", _seconds("window", self.window, zero_ok=False))
        if self.ping_interval is not None:
            object.__setattr__(
                self, "ping_interval", _seconds("ping_interval", self.ping_interval, zero_ok=False)
            )

    def delay(self, restart: int) -> float:
        """Seconds to wait, after the loss, before the ``restart``-th restart of a window.

        Example:
            >>> McpRecovery(backoff=2).delay(3)
            4.0
        """
        return 0.0 if restart <= 1 else self.backoff * 2.0 ** (restart - 2)


def _seconds(name: str, value: object, *, zero_ok: bool) -> float:
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if (
        isinstance(value, bool)
        or not math.isfinite(seconds)
        or seconds < 0
        or (seconds == 0 and not zero_ok)
    ):
        raise ToolConfigError(
            f"McpRecovery {name} must be a {'non-negative' if zero_ok else 'positive'} "
            f"number of seconds, got {value!r}"
        )
    return seconds
