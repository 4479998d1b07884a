"""The retry policy of the loop's requests (tenacity).

Retried: HTTP 408, 409, 429 and 5xx, timeouts and connection errors, unless the
server says ``x-should-retry: false``, or a 500's body names a request option
(``response_format``, ``tool_choice``, ``parallel_tool_calls``): some servers refuse an
option with a 500, which no retry changes (the loop may fall back instead, see
``profiles.read_refusal``). The wait doubles from an initial delay, with
jitter, unless the server names one with ``retry-after-ms`` or ``Retry-After``
(seconds or an HTTP date), which is honoured up to 60 seconds.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .profiles import names_an_option

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
        if exc.status_code == 500 and names_an_option(str(exc)):
            return False  # a refusal (llama-cpp-python answers 500), not a hiccup
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
    redact: Callable[[str], str] | None = field(default=None, repr=False, compare=False)
    """Masks the secrets in an error's text before a retry's log line shows it."""
    halted: Callable[[], bool] | None = field(default=None, repr=False, compare=False)
    """True once no retry can succeed (the client was closed): a failure is then final."""

    def retryable(self, error: BaseException) -> bool:
        """Whether a failed attempt is tried again: ``error`` is one a retry may
        resolve (:func:`is_retryable`), and the policy is not ``halted``.

        Example:
            >>> RetryPolicy(halted=lambda: True).retryable(TimeoutError())
            False
        """
        return is_retryable(error) and not (self.halted is not None and self.halted())

    def backoff(self, attempt: int) -> float:
        """The wait before retry ``attempt`` (from 1), before jitter."""
        return min(self.max_delay, self.initial_delay * 2.0 ** (attempt - 1))

    def delay(self, error: BaseException, attempt: int) -> float:
        """Seconds to wait before retry ``attempt`` (from 1) after ``error``: the
        server's ``retry-after-ms``/``Retry-After`` if any, else the jittered backoff."""
        asked = retry_after(error)
        if asked is not None:
            return asked
        # Jitter keeps many clients that failed together from retrying together.
        return self.backoff(attempt) * (1.0 - 0.25 * random.random())

    def _log(self, attempt: int, error: BaseException, wait: float) -> None:
        text = str(error) if self.redact is None else self.redact(str(error))
        logger.warning(
            "model request attempt %d failed (%s: %s); retrying in %.2f s",
            attempt,
            type(error).__name__,
            text,
            wait,
        )

    async def call(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run ``attempt`` until it succeeds, fails for good, or runs out of retries.

        The last error is re-raised as it is.
        """
        # 1. The first attempt runs bare: tenacity's bookkeeping (~25 µs a request)
        #    is only paid once something has failed.
        try:
            return await attempt()
        except Exception as exc:
            if self.max_retries == 0 or not self.retryable(exc):
                raise
            first_error = exc
        wait = self.delay(first_error, 1)
        self._log(1, first_error, wait)
        await asyncio.sleep(wait)
        # 2. The retries, under tenacity; its attempt n is the cycle's attempt n + 1.
        #    Imported here: tenacity (and the tornado support it loads when tornado is
        #    installed) would add ~10 ms to `import agcore_tools`.
        from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

        def wait_for(state: RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome is not None else None
            return self.delay(error, state.attempt_number + 1) if error is not None else 0.0

        def log(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome is not None else None
            sleep = state.next_action.sleep if state.next_action is not None else 0.0
            if error is not None:
                self._log(state.attempt_number + 1, error, sleep)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries),
            wait=wait_for,
            retry=retry_if_exception(self.retryable),
            before_sleep=log,
            reraise=True,
        )

        # tenacity calls a plain callable without awaiting it, and SDK methods are not
        # recognisable as coroutine functions; awaiting here works for any callable.
        async def run() -> T:
            return await attempt()

        return await retrying(run)
