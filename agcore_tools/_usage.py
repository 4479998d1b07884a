"""Token counts of model requests, and what each tool cost in them.

A leaf module: the loop fills :class:`Usage` records, and :class:`MaxTurnsExceededError`
(in ``error``, the bottom layer) carries one, so the record lives below both.
:class:`ToolCost` is its per-tool twin, which the loop fills from its own counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._sdk import sdk_field

__all__ = ["ZERO_USAGE", "ToolCost", "Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one request, or summed over several with ``+``.

    A request whose response reported no usage counts as a request with zeros, and
    in :attr:`unreported`: its zeros were not measured.

    Example:
        >>> total = Usage(10, 5, 15) + Usage(20, 3, 23)
        >>> total.total_tokens, total.requests
        (38, 2)
        >>> (total + Usage(unreported=1)).reported
        2
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
    unreported: int = 0
    """How many of those requests had no usage in their response (a stream without
    ``include_usage``, say): the counts leave them out."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.requests + other.requests,
            self.unreported + other.unreported,
        )

    @property
    def reported(self) -> int:
        """How many of the requests reported their usage (what the counts measure).

        Example:
            >>> Usage(requests=3, unreported=1).reported
            2
        """
        return self.requests - self.unreported

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


@dataclass(frozen=True, slots=True)
class ToolCost:
    """What one tool cost in a run, or summed over tools or runs with ``+``.

    Token figures are the loop's own counts (see :attr:`ChatResponse.tool_costs
    <agcore_tools.ChatResponse.tool_costs>`): the model's encoding with the ``tokens``
    extra, else one token per 4 bytes of UTF-8. The calls, failures and seconds are
    those of the run's tool invocations.

    Example:
        >>> a = ToolCost(definition_tokens=40, definition_requests=2, argument_tokens=6,
        ...              result_tokens=9, calls=1, seconds=0.25)
        >>> total = a + ToolCost(definition_tokens=20, definition_requests=1, calls=1,
        ...                      failures=1, seconds=0.5)
        >>> total.tokens, total.calls, total.failures, total.seconds
        (75, 2, 1, 0.75)
    """

    definition_tokens: int = 0
    """Tokens of the tool's definition, counted once per request that offered it."""
    definition_requests: int = 0
    """How many requests offered the tool."""
    argument_tokens: int = 0
    """Tokens of the arguments the model wrote in its calls to the tool."""
    result_tokens: int = 0
    """Tokens of the results sent back to the model (the tool messages' text)."""
    calls: int = 0
    """The model's calls to the tool that the run answered: its invocations, a call
    refused before it ran (forbidden, unavailable) or answered from a cache included
    (:attr:`ToolStats.calls <agcore_tools.ToolStats.calls>` counts only those started)."""
    failures: int = 0
    """Those calls that ended with an error."""
    seconds: float = 0.0
    """Wall time the calls took."""

    @property
    def tokens(self) -> int:
        """Definition, argument and result tokens together.

        Example:
            >>> ToolCost(definition_tokens=3, argument_tokens=2, result_tokens=1).tokens
            6
        """
        return self.definition_tokens + self.argument_tokens + self.result_tokens

    def __add__(self, other: ToolCost) -> ToolCost:
        return ToolCost(
            self.definition_tokens + other.definition_tokens,
            self.definition_requests + other.definition_requests,
            self.argument_tokens + other.argument_tokens,
            self.result_tokens + other.result_tokens,
            self.calls + other.calls,
            self.failures + other.failures,
            self.seconds + other.seconds,
        )


ZERO_COST = ToolCost()
"""The cost of a tool no request offered and no call used."""
