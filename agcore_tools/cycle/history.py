"""History policies: which part of ``cycle.messages`` each request sends.

A policy never edits the history itself: ``cycle.messages`` keeps the whole
trajectory, and the policy picks the messages of each request from it.

The unit a policy may drop is an *exchange*: a user message and everything after it
up to the next user message. An assistant message that asks for tool calls and the
tool messages answering it always sit in the same exchange, so no policy built on
:func:`split_exchanges` can separate them (providers reject such a history with a 400).
The user message that carries the images, audio and files of those tool results
(tool messages carry text only; see :mod:`agcore_tools.content`) belongs to the same
exchange too, as does the user message that asks again for a structured answer
(``output_type``) that did not validate.

Example:
    >>> policy = TrimOldest(max_messages=3)
    >>> history = [
    ...     {"role": "system", "content": "Be brief."},
    ...     {"role": "user", "content": "Hi"},
    ...     {"role": "assistant", "content": "Hello!"},
    ...     {"role": "user", "content": "Bye"},
    ... ]
    >>> [m["content"] for m in policy.select(history)]
    ['Be brief.', 'Bye']
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .._attachments import is_attachments_message
from .._retry_feedback import is_feedback_message
from ..error import LlmConfigError

__all__ = ["HistoryPolicy", "TrimOldest", "split_exchanges"]

logger = logging.getLogger("agcore_tools.cycle")

Message = dict[str, Any]


@runtime_checkable
class HistoryPolicy(Protocol):
    """Chooses the messages a request sends, from the whole history.

    Implement ``select``; return the list unchanged (the same object is fine) when
    nothing needs dropping. Keep assistant ``tool_calls`` messages together with
    their tool results; :func:`split_exchanges` gives units that do.

    Example:
        >>> class LastTen:
        ...     def select(self, messages):
        ...         system, exchanges = split_exchanges(messages)
        ...         return system + [m for ex in exchanges[-10:] for m in ex]
        >>> isinstance(LastTen(), HistoryPolicy)
        True
    """

    def select(self, messages: Sequence[Message]) -> Sequence[Message]:
        """The messages to send, in order."""
        ...


def split_exchanges(messages: Sequence[Message]) -> tuple[list[Message], list[list[Message]]]:
    """Split a history into its leading system messages and its exchanges.

    An exchange starts at a user message and runs to the next one; messages before
    the first user message form an exchange of their own. The user message that
    carries tool results' images, audio and files continues its exchange, and so does
    the one that tells the model why its structured answer (``output_type``) was
    refused, so a retry is never sent without the question and answer it is about.

    Example:
        >>> system, exchanges = split_exchanges([
        ...     {"role": "system", "content": "s"},
        ...     {"role": "user", "content": "a"},
        ...     {"role": "assistant", "content": "b"},
        ...     {"role": "user", "content": "c"},
        ... ])
        >>> len(system), [len(ex) for ex in exchanges]
        (1, [2, 1])
    """
    start = 0
    while start < len(messages) and messages[start].get("role") in ("system", "developer"):
        start += 1
    system = list(messages[:start])
    exchanges: list[list[Message]] = []
    previous: Message | None = None
    for message in messages[start:]:
        starts = (
            message.get("role") == "user"
            and not is_attachments_message(message, previous)
            and not is_feedback_message(message, previous)
        )
        if starts or not exchanges:
            exchanges.append([message])
        else:
            exchanges[-1].append(message)
        previous = message
    return system, exchanges


def _size(message: Message) -> int:
    # Characters of the JSON text approximate what the provider will tokenise. An
    # assistant message of the Responses API holds its turn twice: the output items
    # under "response", which that API is sent, and the same text and calls in the
    # Chat shape, which it is not. Counting both would halve the budget there.
    response = message.get("response") if message.get("role") == "assistant" else None
    output = response.get("output") if isinstance(response, Mapping) else None
    sent = output if isinstance(output, list) else message
    return len(json.dumps(sent, ensure_ascii=False, default=str))


@dataclass(frozen=True, slots=True)
class TrimOldest:
    """Keep the system prompt and the newest exchanges within a budget (the default).

    Drops whole exchanges, oldest first, until the rest fits ``max_messages`` and
    ``max_chars`` (characters of the messages' JSON; an assistant message from the
    Responses API counts as its output items, what that API sends). The newest exchange
    is always kept, even alone over budget. With no budget (the default) nothing is
    dropped.

    Example:
        >>> history = [{"role": "user", "content": "x" * 100}, {"role": "user", "content": "y"}]
        >>> [m["content"] for m in TrimOldest(max_chars=60).select(history)]
        ['y']
    """

    max_messages: int | None = None
    """Most messages to send (system messages included), or None for no limit."""
    max_chars: int | None = None
    """Most characters of message JSON to send, or None for no limit. An assistant
    message with the Responses API's ``response`` counts as its output items only."""

    def __post_init__(self) -> None:
        for name in ("max_messages", "max_chars"):
            value = getattr(self, name)
            if value is None:
                continue
            # Checked here: "20" failed only at the first request, with a bare TypeError.
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise LlmConfigError(
                    f"TrimOldest.{name} must be an integer at least 1 or None, got {value!r}"
                )

    def select(self, messages: Sequence[Message]) -> Sequence[Message]:
        """The system messages plus the newest exchanges that fit the budget."""
        if self.max_messages is None and self.max_chars is None:
            return messages
        if self.max_chars is None and len(messages) <= (self.max_messages or 0):
            return messages
        system, exchanges = split_exchanges(messages)
        sizes = [_size(m) for m in system] if self.max_chars is not None else []
        count, chars = len(system), sum(sizes)
        kept: list[list[Message]] = []
        # 1. Walk back from the newest exchange, keeping whole exchanges that fit.
        for exchange in reversed(exchanges):
            extra_chars = sum(_size(m) for m in exchange) if self.max_chars is not None else 0
            fits = (self.max_messages is None or count + len(exchange) <= self.max_messages) and (
                self.max_chars is None or chars + extra_chars <= self.max_chars
            )
            if not fits and kept:
                break
            if not fits:
                logger.warning(
                    "the newest exchange alone exceeds the history budget; sending it anyway"
                )
            kept.append(exchange)
            count += len(exchange)
            chars += extra_chars
        # 2. Put them back in order behind the system prompt.
        dropped = len(exchanges) - len(kept)
        if dropped:
            logger.debug("history policy dropped the %d oldest exchange(s)", dropped)
        return system + [m for exchange in reversed(kept) for m in exchange]
