"""Which wire API a cycle speaks: one object per API, chosen by ``CycleConfig.api``.

The loop (:mod:`agcore_tools.cycle.cycle`) only calls the :class:`Wire` methods, so a
wire API's request parameters, SDK call and response assembly live in its own module
(:mod:`._wire_chat`, :mod:`._wire_responses`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol

from ._stream import Turn
from ._trace import RunTrace
from ._wire_chat import ChatWire
from ._wire_responses import ResponsesWire
from .config import CycleConfig
from .events import StreamEvent

__all__ = ["TurnAssembler", "Wire", "wire_for"]


class TurnAssembler(Protocol):
    """What a wire's builder does with one response."""

    @property
    def raw_reason(self) -> str | None: ...
    def feed(self, chunk: Any) -> Sequence[StreamEvent]: ...
    def feed_completion(self, completion: Any) -> None: ...
    def show_arguments(self, tool_name: str) -> None: ...
    def avoid_ids(self, ids: Collection[str]) -> None: ...
    def end_stream(self) -> None: ...
    def build(self) -> Turn: ...


class Wire(Protocol):
    """One wire API."""

    name: str

    def params(
        self,
        config: CycleConfig,
        messages: Sequence[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        stream: bool,
    ) -> dict[str, Any]: ...
    def request(self, requester: Any, params: dict[str, Any]) -> tuple[Any, dict[str, Any]]: ...
    def builder(self, turn_tag: str, repair: bool, trace: RunTrace | None) -> TurnAssembler: ...


_CHAT = ChatWire()
_RESPONSES = ResponsesWire(chain=False)
_CHAINED = ResponsesWire(chain=True)


def wire_for(config: CycleConfig) -> Wire:
    """The wire of ``config.api`` (``chain_responses`` picks the chained Responses one)."""
    if config.api == "chat":
        return _CHAT
    return _CHAINED if config.chain_responses else _RESPONSES
