"""The retry policy of the loop's requests (tenacity).

Retried: HTTP 408, 409, 429 and 5xx, timeouts and connection errors, unless the
server says ``x-should-retry: false``. The wait doubles from an initial delay, with
jitter, unless the server names one with ``retry-after-ms`` or ``Retry-After``
(seconds or an HTTP date), which is honoured up to 60 seconds.
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = ["RetryPolicy", "is_retryable", "retry_after"]

logger = logging.getLogger("agcore_tools.cycle")

T = TypeVar("T")

_RETRY_STATUSES = frozenset({408, 409, 429})
_MAX_RETRY_AFTER = 60.0


def _headers(exc: BaseException) -> Any:
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None)


def is_retryable(exc: BaseException) -> bool:
    """Whether a failed request is worth another attempt.

    Example:
        >>> is_retryable(ValueError("not an API error"))
        False
    """
    from openai import APIConnectionError, APIStatusError

    if isinstance(exc, APIStatusError):
        hint = exc.response.headers.get("x-should-retry")
        if hint in ("true", "false"):
            return hint == "true"
        return exc.status_code in _RETRY_STATUSES or exc.status_code >= 500
    # APITimeoutError is an APIConnectionError.
    return isinstance(exc, APIConnectionError)


def retry_after(exc: BaseException) -> float | None:
    """The wait in seconds a failed response asks for, or None.

    Reads ``retry-after-ms`` first, then ``Retry-After`` (seconds or an HTTP date);
    values outside 0-60 s are ignored.
    """
    headers = _headers(exc)
    if headers is None:
        return None
    seconds: float | None = None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        seconds = _float(millis)
        seconds = seconds / 1000.0 if seconds is not None else None
    if seconds is None:
        value = headers.get("retry-after")
        if value is not None:
            seconds = _float(value)
            if seconds is None:
                seconds = _seconds_until(value)
    if seconds is None or not 0.0 <= seconds <= _MAX_RETRY_AFTER:
        return None
    return seconds


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _seconds_until(http_date: str) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently to retry a request.

    Example:
        >>> RetryPolicy(max_retries=2, initial_delay=0.5, max_delay=8.0).backoff(3)
        2.0
    """

    max_retries: int = 3
    """Retries after the first attempt."""
    initial_delay: float = 0.5
    """Seconds before the first retry."""
    max_delay: float = 8.0
    """Cap of the computed (not the server-given) wait."""

    def backoff(self, attempt: int) -> float:
        """The wait before retry ``attempt`` (from 1), before jitter."""
        return min(self.max_delay, self.initial_delay * 2.0 ** (attempt - 1))

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        asked = retry_after(error) if error is not None else None
        if asked is not None:
            return asked
        # Jitter keeps many clients that failed together from retrying together.
        return self.backoff(state.attempt_number) * (1.0 - 0.25 * random.random())

    @staticmethod
    def _log(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        logger.warning(
            "chat completion attempt %d failed (%s: %s); retrying in %.2f s",
            state.attempt_number,
            type(error).__name__,
            error,
            wait,
        )

    async def call(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt`` until it succeeds, fails for good, or runs out of retries.

        The last error is re-raised as it is.
        """
        # Imported here: tenacity (and the tornado support it loads when tornado is
        # installed) would add ~10 ms to `import agcore_tools`.
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(is_retryable),
            before_sleep=self._log,
            reraise=True,
        )

        # tenacity calls a plain callable without awaiting it, and SDK methods are not
        # recognisable as coroutine functions; awaiting here works for any callable.
        async def run() -> T:
            return await attempt()

        return await retrying(run)
