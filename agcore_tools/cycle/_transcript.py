"""The notebook views of an ``LlmCycle``: its ``repr`` and its transcript table.

A mixin, so :mod:`agcore_tools.cycle.cycle` keeps to the loop; it reads only the
cycle's ``config`` and ``messages``.
"""

from __future__ import annotations

from typing import Any

from .._display import MAX_ROWS, html_table, markdown_table, message_rows
from .config import CycleConfig

_TRANSCRIPT_HEADERS = ("#", "role", "content")
_TRANSCRIPT_CELL = 240  # characters of a transcript cell before it is cut


class TranscriptViews:
    """``repr`` and the notebook transcript (``_repr_markdown_``, ``_repr_html_``)."""

    config: CycleConfig
    messages: list[dict[str, Any]]

    def __repr__(self) -> str:
        return f"<LlmCycle model={self.config.model!r} messages={len(self.messages)}>"

    def _transcript_title(self) -> str:
        shown = min(len(self.messages), MAX_ROWS)
        hidden = (
            f", the first {len(self.messages) - shown} not shown"
            if shown < len(self.messages)
            else ""
        )
        return f"LlmCycle — {self.config.model}, {len(self.messages)} message(s){hidden}"

    def _repr_markdown_(self) -> str:
        """A notebook view of the transcript: one row per message of :attr:`messages`.

        Assistant rows show their text and each tool call as ``name(arguments) [id]``;
        tool rows show which call they answer and the result the model saw. Long cells
        are cut with an ellipsis.

        Example:
            >>> from openai import AsyncOpenAI
            >>> from agcore_tools import CycleConfig, LlmCycle
            >>> cycle = LlmCycle(CycleConfig("m"), client=AsyncOpenAI(api_key="-"))
            >>> cycle.messages += [
            ...     {"role": "user", "content": "2 + 3?"},
            ...     {"role": "assistant", "content": None, "tool_calls": [{"id": "c1",
            ...      "type": "function", "function": {"name": "add", "arguments": '{"a":2,"b":3}'}}]},
            ...     {"role": "tool", "tool_call_id": "c1", "content": "5"},
            ...     {"role": "assistant", "content": "5"},
            ... ]
            >>> print(cycle._repr_markdown_())
            **LlmCycle — m, 4 message(s)**
            <BLANKLINE>
            | # | role | content |
            |---|---|---|
            | 0 | user | 2 + 3? |
            | 1 | assistant | → add({"a":2,"b":3}) [c1] |
            | 2 | tool | add [c1] → 5 |
            | 3 | assistant | 5 |
        """
        table = markdown_table(_TRANSCRIPT_HEADERS, message_rows(self.messages), _TRANSCRIPT_CELL)
        return f"**{self._transcript_title()}**\n\n{table}"

    def _repr_html_(self) -> str:
        """The same view as :meth:`_repr_markdown_`, in HTML."""
        rows = message_rows(self.messages)
        return html_table(_TRANSCRIPT_HEADERS, rows, self._transcript_title(), _TRANSCRIPT_CELL)
