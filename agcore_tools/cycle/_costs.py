"""What each tool cost in one ``submit*_with_tools`` run, and how the counts compare
with the prompt tokens the provider reported.

The loop hands a :class:`CostMeter` each request it sent (its messages and tool
definitions, as references: nothing is counted then) and each assistant message; when
the run ends, :meth:`CostMeter.settle` counts once, with
:func:`~agcore_tools._budget.count_tokens` (the ``tokens`` extra's encoding, else one
token per 4 bytes of UTF-8), per tool:

- its definition's compact JSON, once per request that offered it (a definition the
  run sent several times as the same object, as a run without ``select=`` does, is
  counted once and multiplied; a run with ``select=`` sends each request its own
  copies, each counted);
- the arguments text of each of its calls the model wrote in the run;
- the text of each tool message answering one of its calls in the run;

and adds the executions' calls, failures and seconds. The counts go to the response
(:class:`ToolCosts`), to the registry's :class:`~agcore_tools.ToolStats`, and, when the
application has set an OpenTelemetry meter provider, to ``agcore.tool.tokens`` (see
``_otel.py``).

:meth:`ToolCosts.reconcile` compares the run's estimated prompt tokens (every request's
messages and definitions, counted the same way) with the provider's ``prompt_tokens``.
It counts only when asked: the messages are the largest part of the count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _otel
from .._budget import count_tokens, json_text
from .._usage import ZERO_COST, ToolCost, Usage
from ..base import definition_name
from ..registry import ToolInvocation, ToolRegistry

__all__ = ["COST_HEADERS", "NO_TOOL_COSTS", "CostMeter", "Reconciliation", "ToolCosts", "cost_rows"]

Message = dict[str, Any]
Definitions = Sequence[Mapping[str, Any]]
# What one request sent: its messages (in the wire's item shape) and its definitions.
Sent = tuple[Sequence[Any], Definitions]
# A wire's items of a request's messages, and its form of one definition (Responses).
Shape = Callable[[Sequence[Any]], Sequence[Any]]
ToolShape = Callable[[Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """The run's estimated prompt tokens against the provider's ``prompt_tokens``.

    Only the requests whose response reported a prompt count are compared; the others
    are counted in :attr:`unreported` (a streamed response without usage, say).

    Example:
        >>> r = Reconciliation(estimate=1020, reported=1000, requests=2)
        >>> r.gap, r.within(0.05)
        (0.02, True)
        >>> Reconciliation(estimate=0, reported=0, requests=0, unreported=1).gap is None
        True
    """

    estimate: int
    """Estimated prompt tokens of the compared requests: their messages and tool
    definitions, each counted as :attr:`ChatResponse.tool_costs
    <agcore_tools.ChatResponse.tool_costs>` counts them."""
    reported: int
    """The provider's ``prompt_tokens`` summed over the same requests."""
    requests: int
    """How many requests the figures cover."""
    unreported: int = 0
    """Requests left out because the provider reported no prompt tokens for them."""
    per_request: tuple[tuple[int, int | None], ...] = ()
    """``(estimate, reported)`` of every request in order; reported is None for one
    left out."""

    @property
    def gap(self) -> float | None:
        """``(estimate - reported) / reported``: positive when the estimate is over;
        None when the provider reported nothing."""
        if self.reported <= 0:
            return None
        return (self.estimate - self.reported) / self.reported

    def within(self, tolerance: float) -> bool:
        """Whether the relative gap is at most ``tolerance`` either way (False without a
        reported figure)."""
        gap = self.gap
        return gap is not None and abs(gap) <= tolerance


class ToolCosts(Mapping[str, ToolCost]):
    """What each tool cost in one run: tool name -> :class:`~agcore_tools.ToolCost`, in
    the order the tools were first offered or called, with the run's :attr:`total` and
    :meth:`reconcile`.

    Example:
        >>> from agcore_tools import ToolCost
        >>> costs = ToolCosts({"add": ToolCost(definition_tokens=30, definition_requests=2,
        ...                                    argument_tokens=4, result_tokens=1, calls=1)})
        >>> costs["add"].definition_tokens, costs.total.tokens, list(costs)
        (30, 35, ['add'])
        >>> costs.get("missing") is None
        True
    """

    __slots__ = ("_answers", "_by_tool", "_model", "_sent", "_shape", "_tool_shape")

    def __init__(
        self,
        by_tool: Mapping[str, ToolCost] | None = None,
        *,
        model: str = "",
        sent: Sequence[Sent] = (),
        answers: Sequence[Usage | None] = (),
        shape: Shape | None = None,
        tool_shape: ToolShape | None = None,
    ) -> None:
        # sent and answers: each request's messages and definitions, and its usage.
        self._by_tool = dict(by_tool or {})
        self._model = model
        self._sent = tuple(sent)
        self._answers = tuple(answers)
        self._shape = shape
        self._tool_shape = tool_shape

    def __getitem__(self, name: str) -> ToolCost:
        return self._by_tool[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_tool)

    def __len__(self) -> int:
        return len(self._by_tool)

    def __repr__(self) -> str:
        return f"ToolCosts({self._by_tool!r})"

    def __hash__(self) -> int:  # immutable, and equal as a mapping is
        return hash(tuple(self._by_tool.items()))

    @property
    def total(self) -> ToolCost:
        """Every tool's cost summed: the run's tool tokens, calls, failures and seconds.

        Example:
            >>> ToolCosts().total.tokens
            0
        """
        total = ZERO_COST
        for cost in self._by_tool.values():
            total = total + cost
        return total

    def reconcile(self) -> Reconciliation:
        """The run's estimated prompt tokens (each request's messages and definitions,
        counted like the tools' costs) against the provider-reported ``prompt_tokens``.

        Counted when called, not during the run. The estimate leaves out what a server
        adds around the messages (its chat template, the tool instructions it renders):
        the gap is that, plus the tokenizer's difference from the count used here.

        Example:
            >>> ToolCosts().reconcile()
            Reconciliation(estimate=0, reported=0, requests=0, unreported=0, per_request=())
        """
        model, shape, tool_shape = self._model, self._shape, self._tool_shape
        # By the id of the history's own message (or definition), which _sent keeps
        # alive, so a message sent again is counted once. Never by the id of a shaped
        # item: the wire builds those afresh, and a freed one's id is soon reused.
        counted: dict[int, int] = {}
        rows: list[tuple[int, int | None]] = []
        for (messages, definitions), usage in zip(self._sent, self._answers, strict=True):
            request = 0
            for message in messages:
                key = id(message)
                tokens = counted.get(key)
                if tokens is None:
                    items = shape([message]) if shape is not None else (message,)
                    tokens = sum(count_tokens(json_text(item), model) for item in items)
                    counted[key] = tokens
                request += tokens
            for definition in definitions:
                key = id(definition)
                tokens = counted.get(key)
                if tokens is None:
                    sent = tool_shape(definition) if tool_shape is not None else definition
                    tokens = counted[key] = count_tokens(json_text(sent), model)
                request += tokens
            reported = usage.prompt_tokens if usage is not None else 0
            rows.append((request, reported if reported > 0 else None))
        compared = [(e, r) for e, r in rows if r is not None]
        return Reconciliation(
            sum(e for e, _ in compared),
            sum(r for _, r in compared),
            len(compared),
            len(rows) - len(compared),
            tuple(rows),
        )


COST_HEADERS = (
    "tool",
    "definition tokens",
    "requests",
    "argument tokens",
    "result tokens",
    "calls",
    "failures",
    "time",
)
"""The columns of the tool costs table in a response's notebook view."""


def cost_rows(costs: ToolCosts) -> list[tuple[Any, ...]]:
    """The rows of a response's tool costs table, in :data:`COST_HEADERS`."""
    return [
        (
            name,
            cost.definition_tokens,
            cost.definition_requests,
            cost.argument_tokens,
            cost.result_tokens,
            cost.calls,
            cost.failures,
            f"{cost.seconds * 1000:.2f} ms",
        )
        for name, cost in costs.items()
    ]


NO_TOOL_COSTS = ToolCosts()
"""The costs of a run that offered and called no tool."""


class CostMeter:
    """The loop's notes for :class:`ToolCosts`: what each request sent and what the
    model answered, kept as references until :meth:`settle` counts them once.

    Example:
        >>> meter = CostMeter("m", None)
        >>> meter.sent([{"role": "user", "content": "Hi"}],
        ...            [{"type": "function", "function": {"name": "f"}}])
        >>> meter.answered(Usage(12, 1, 13))
        >>> costs = meter.settle([], 0, [])
        >>> costs["f"]
        ToolCost(definition_tokens=11, definition_requests=1, argument_tokens=0, result_tokens=0, calls=0, failures=0, seconds=0.0)
        >>> costs.reconcile()
        Reconciliation(estimate=19, reported=12, requests=1, unreported=0, per_request=((19, 12),))
    """

    __slots__ = (
        "_answers",
        "_costs",
        "_model",
        "_registry",
        "_sent",
        "_server",
        "_shape",
        "_tool_shape",
    )

    def __init__(
        self,
        model: str,
        registry: ToolRegistry | None,
        shapes: tuple[Shape, ToolShape] | None = None,
        server: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        # shapes: the wire's items of a request's messages and its form of a definition
        # (the Responses API's; None: as the history holds them); server: the attributes
        # naming the model's server, asked only when metrics are on.
        self._model = model
        self._registry = registry
        self._shape: Shape | None = shapes[0] if shapes is not None else None
        self._tool_shape: ToolShape | None = shapes[1] if shapes is not None else None
        self._server = server
        self._sent: list[Sent] = []
        self._answers: list[Usage | None] = []
        self._costs: ToolCosts | None = None

    def sent(self, messages: Sequence[Any], definitions: Definitions | None) -> None:
        """Note one request's messages and definitions (the messages are copied as a list:
        the history grows after the request)."""
        self._sent.append((list(messages), definitions or ()))

    def answered(self, usage: Usage | None) -> None:
        """Note one request's reported usage (None when the provider sent none)."""
        self._answers.append(usage)

    @property
    def settled(self) -> ToolCosts | None:
        """The costs once :meth:`settle` has counted them."""
        return self._costs

    def settle(
        self,
        history: Sequence[Message],
        start: int,
        invocations: Sequence[ToolInvocation],
    ) -> ToolCosts:
        """Count the run once: ``history[start:]`` are the messages the run added (its
        assistant and tool messages); a resumed call's assistant message is before
        ``start``. Adds the counts to the registry's stats and, when metrics are on,
        records them. A second call returns the first's."""
        if self._costs is not None:
            return self._costs
        model = self._model
        parts: dict[str, list[float]] = {}

        def row(name: str) -> list[float]:
            found = parts.get(name)
            if found is None:
                found = parts[name] = [0, 0, 0, 0, 0, 0, 0.0]
            return found

        # Definitions: each definition object counted once, times the requests that sent it
        # (by id: a select= run's requests each send their own copies, counted each).
        counted: dict[int, tuple[str, int]] = {}
        tool_shape = self._tool_shape
        for _, definitions in self._sent:
            for definition in definitions:
                known = counted.get(id(definition))
                if known is None:
                    sent = tool_shape(definition) if tool_shape is not None else definition
                    known = counted[id(definition)] = (
                        definition_name(dict(definition)),
                        count_tokens(json_text(sent), model),
                    )
                entry = row(known[0])
                entry[0] += known[1]
                entry[1] += 1
        # Arguments the model wrote, and the results sent back, from the run's messages.
        names: dict[str, str] = {}
        for index in range(start, len(history)):
            message = history[index]
            role = message.get("role")
            if role == "assistant":
                for call in message.get("tool_calls") or ():
                    function = call.get("function") or {}
                    name = str(function.get("name", ""))
                    names[str(call.get("id"))] = name
                    arguments = function.get("arguments")
                    if isinstance(arguments, str) and arguments:
                        row(name)[2] += count_tokens(arguments, model)
            elif role == "tool":
                call_id = str(message.get("tool_call_id"))
                called = names.get(call_id) or _called(history, start, call_id)
                if called is not None:
                    row(called)[3] += count_tokens(_text(message.get("content")), model)
        for invocation in invocations:
            entry = row(invocation.tool_name)
            entry[4] += 1
            entry[5] += invocation.error is not None
            entry[6] += invocation.duration
        by_tool = {
            name: ToolCost(int(d), int(n), int(a), int(r), int(c), int(f), s)
            for name, (d, n, a, r, c, f, s) in parts.items()
        }
        self._costs = costs = ToolCosts(
            by_tool,
            model=model,
            sent=self._sent,
            answers=self._answers,
            shape=self._shape,
            tool_shape=tool_shape,
        )
        self._add_to_stats(by_tool)
        recorders = _otel.meters()
        if recorders is not None:
            self._record(recorders, by_tool)
        return costs

    def _add_to_stats(self, by_tool: Mapping[str, ToolCost]) -> None:
        registry = self._registry
        if registry is None:
            return
        for name, cost in by_tool.items():
            entry = registry.entry(name)
            if entry is None:
                continue  # a tool of the loop's own (search, code mode), or an unknown call
            stats = entry.stats
            stats.definition_tokens += cost.definition_tokens
            stats.definition_requests += cost.definition_requests
            stats.argument_tokens += cost.argument_tokens
            stats.result_tokens += cost.result_tokens

    def _record(self, recorders: tuple[Any, Any], by_tool: Mapping[str, ToolCost]) -> None:
        # Each request's gen_ai.client.token.usage is recorded by the loop as it is
        # answered, with tools or without (_otel.record_tokens).
        counter = recorders[1]
        server = self._server() if self._server is not None else {}
        base = {**server, "gen_ai.request.model": self._model}
        for name, cost in by_tool.items():
            tool = {**base, "gen_ai.tool.name": name}
            for part, kind, tokens in (
                ("definition", "input", cost.definition_tokens),
                ("arguments", "output", cost.argument_tokens),
                ("result", "input", cost.result_tokens),
            ):
                if tokens:
                    counter.add(
                        tokens,
                        {**tool, "gen_ai.token.type": kind, "agcore.tool.token.part": part},
                    )


def _called(history: Sequence[Message], start: int, call_id: str) -> str | None:
    # The tool of a call an earlier run's assistant message made (a resumed run's calls).
    for index in range(start - 1, -1, -1):
        message = history[index]
        if message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():
            if str(call.get("id")) == call_id:
                return str((call.get("function") or {}).get("name", ""))
    return None


def _text(content: Any) -> str:
    # A tool message's content: text, or (rarely) a list of text parts.
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
            for part in content
        )
    return "" if content is None else json_text(content)
