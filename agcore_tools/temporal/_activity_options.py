"""How one tool's activity runs, where it differs from the run's config:
:class:`ToolActivityOptions`.

Apart from the activities (``_activities``) because it is a record a worker is given,
checked as it is made, and read when the worker describes its tools: it knows nothing
of the registry, the model client or Temporal's activity API.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import overload

from typing_extensions import deprecated

from .._aio import positive_number
from .._deprecated import renamed
from ..error import ToolConfigError

__all__ = ["ToolActivityOptions"]


@dataclass(frozen=True, init=False)
class ToolActivityOptions:
    """How one tool's activity runs, where it differs from the run's config.

    ``timeout`` (seconds) replaces ``CycleConfig.tool_timeout`` (the activity's
    start-to-close timeout), ``max_attempts`` the attempts an activity that fails (a
    worker lost, a timeout) gets, ``CycleConfig.max_retries + 1``. ``task_queue``
    routes the tool's calls to other workers than the ones that describe it.
    ``timeout_secs=`` still works, with a ``DeprecationWarning``. A ``timeout`` that is
    not a positive number, or ``max_attempts`` not an int of at least 1, raises
    :class:`~agcore_tools.ToolConfigError` (a run calling the tool would hang).

    Example:
        >>> options = ToolActivityOptions(timeout=300, max_attempts=1)
        >>> options.timeout, options.max_attempts
        (300, 1)
        >>> ToolActivityOptions(max_attempts=0)
        Traceback (most recent call last):
        ...
        agcore_tools.error.ToolConfigError: ToolActivityOptions max_attempts must be an int of at least 1 or None, got 0
    """

    timeout: float | None
    """Seconds the tool's activity may run; None: the run's ``CycleConfig.tool_timeout``."""
    max_attempts: int | None
    """Attempts of the tool's activity; None: ``CycleConfig.max_retries + 1``."""
    task_queue: str | None
    """The task queue the tool's calls go to; None: the one that describes it."""

    @overload
    def __init__(
        self,
        timeout: float | None = None,
        max_attempts: int | None = None,
        task_queue: str | None = None,
    ) -> None: ...

    @overload
    @deprecated(
        "ToolActivityOptions(timeout_secs=...) is deprecated; use ToolActivityOptions(timeout=...)",
        category=None,
    )
    def __init__(
        self,
        timeout: float | None = None,
        max_attempts: int | None = None,
        task_queue: str | None = None,
        *,
        timeout_secs: float | None,
    ) -> None: ...

    def __init__(
        self,
        timeout: float | None = None,
        max_attempts: int | None = None,
        task_queue: str | None = None,
        *,
        timeout_secs: float | None = None,
    ) -> None:
        if timeout_secs is not None:
            renamed("ToolActivityOptions(timeout_secs=...)", "ToolActivityOptions(timeout=...)")
            if timeout is None:
                timeout = timeout_secs
        # Checked here, on the worker: a run reading a bad one fails its workflow task on
        # every retry (a negative value), or takes the run's default (zero).
        if timeout is not None and not (positive_number(timeout) and math.isfinite(timeout)):
            raise ToolConfigError(
                "ToolActivityOptions timeout must be positive seconds (an int or a float) "
                f"or None, got {timeout!r}"
            )
        if max_attempts is not None and (
            isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
        ):
            raise ToolConfigError(
                "ToolActivityOptions max_attempts must be an int of at least 1 or None, "
                f"got {max_attempts!r}"
            )
        object.__setattr__(self, "timeout", timeout)
        object.__setattr__(self, "max_attempts", max_attempts)
        object.__setattr__(self, "task_queue", task_queue)

    @property
    @deprecated(
        "ToolActivityOptions.timeout_secs is deprecated; use ToolActivityOptions.timeout",
        category=None,
    )
    def timeout_secs(self) -> float | None:
        """Deprecated: use :attr:`timeout`.

        Example:
            >>> import warnings
            >>> with warnings.catch_warnings(record=True) as caught:  # it warns
            ...     warnings.simplefilter("always")
            ...     ToolActivityOptions(timeout=5).timeout_secs
            5
            >>> caught[0].category.__name__
            'DeprecationWarning'
        """
        renamed("ToolActivityOptions.timeout_secs", "ToolActivityOptions.timeout")
        return self.timeout
