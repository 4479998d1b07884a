"""Token counts of model requests.

A leaf module: the loop fills :class:`Usage` records, and :class:`MaxTurnsExceededError`
(in ``error``, the bottom layer) carries one, so the record lives below both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._sdk import sdk_field

__all__ = ["ZERO_USAGE", "Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one request, or summed over several with ``+``.

    Example:
        >>> total = Usage(10, 5, 15) + Usage(20, 3, 23)
        >>> total.total_tokens, total.requests
        (38, 2)
    """

    prompt_tokens: int = 0
    """Input tokens."""
    completion_tokens: int = 0
    """Output tokens (reasoning tokens included)."""
    total_tokens: int = 0
    """Input plus output tokens."""
    cached_tokens: int = 0
    """Input tokens served from the provider's prompt cache, when it reports them."""
    reasoning_tokens: int = 0
    """Output tokens spent on hidden reasoning, when the provider reports them."""
    requests: int = 1
    """How many requests these counts cover."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.requests + other.requests,
        )

    @classmethod
    def from_sdk(cls, usage: Any) -> Usage:
        """Read an OpenAI SDK ``CompletionUsage`` (or a dict of the same shape).

        Missing fields count as zero, since providers fill them unevenly.

        Example:
            >>> Usage.from_sdk({"prompt_tokens": 7, "completion_tokens": 2}).total_tokens
            9
        """
        prompt = _int(sdk_field(usage, "prompt_tokens"))
        completion = _int(sdk_field(usage, "completion_tokens"))
        total = _int(sdk_field(usage, "total_tokens")) or prompt + completion
        cached = _int(sdk_field(sdk_field(usage, "prompt_tokens_details"), "cached_tokens"))
        reasoning = _int(
            sdk_field(sdk_field(usage, "completion_tokens_details"), "reasoning_tokens")
        )
        return cls(prompt, completion, total, cached, reasoning)


ZERO_USAGE = Usage(requests=0)
"""The sum of no requests."""


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0
