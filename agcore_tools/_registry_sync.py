"""A registry's synchronous entry points and notebook views, as a mixin.

Kept out of :mod:`agcore_tools.registry` so the registry stays a read of registration,
discovery and execution. Everything here goes through the registry's public
:attr:`~agcore_tools.ToolRegistry.tool_table` and down to the same functions the async
methods use (``_execute.execute``, ``calls.run_tool_calls``) on agcore_tools' own event
loop, so the sync and async forms cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from . import _sync
from ._display import REGISTRY_HEADERS, html_table, markdown_table, registry_rows
from ._execute import execute
from ._keywords import checks_public_keywords
from ._records import ToolInvocation
from ._table import ToolTable
from .approval import ApprovalDecision, ToolCallOutputs
from .base import ToolContext

__all__ = ["RegistrySync"]


class _HasTable(Protocol):
    @property
    def tool_table(self) -> ToolTable: ...


@checks_public_keywords
class RegistrySync:
    """``invoke_sync``, ``run_tool_calls_sync`` and the notebook tables of a registry."""

    def invoke_sync(
        self: _HasTable, name: str, args: Mapping[str, Any], ctx: ToolContext | None = None
    ) -> ToolInvocation:
        """:meth:`invoke` for synchronous code: runs it on agcore_tools' own event loop.
        A direct call, as :meth:`invoke` is: it skips approval (logged once per tool),
        not the permission checker; run a model's calls with :meth:`run_tool_calls_sync`.

        Works in a plain script, from worker threads and inside a running loop (a
        notebook cell), where it blocks until the call ends. Cancelling ``ctx`` from
        another thread (a Stop button: ``ctx.cancellation.cancel()``) ends it at once:
        the tool is cancelled (a sync tool's thread is left to end by itself) and it
        raises :class:`~agcore_tools.RunStoppedError`. See the sync apps guide
        (``docs/guides/sync.md``).

        Example:
            >>> from agcore_tools import ToolRegistry
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry()
            >>> _ = registry.register(StaticTool("example"))
            >>> registry.invoke_sync("example", {}).output
            'ok'
        """
        return _sync.run(
            execute(self.tool_table, name, args, ctx, callers=True, direct="invoke_sync()")
        )

    def run_tool_calls_sync(
        self: _HasTable,
        tool_calls: Iterable[Any] | None,
        *,
        ctx: ToolContext | None = None,
        timeout: float | None = 60.0,
        max_result_bytes: int | None = 16384,
        max_attachment_bytes: int | None = 5 * 1024 * 1024,
        repair_arguments: bool = False,
        approvals: Iterable[ApprovalDecision] | None = None,
        approval_key: bytes | None = None,
    ) -> ToolCallOutputs:
        """:meth:`run_tool_calls` for apps on the sync ``OpenAI`` client.

        Runs the calls on agcore_tools' own event loop, concurrently as the async method
        does, and blocks until the messages are ready. Interrupting it (Ctrl-C) cancels
        the calls still running; so does cancelling ``ctx`` from another thread (a Stop
        button), after which it raises :class:`~agcore_tools.RunStoppedError` and the
        calls get no messages.

        Example:
            >>> from agcore_tools import ToolRegistry
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry()
            >>> _ = registry.register(StaticTool("example"))
            >>> calls = [{"id": "call_1", "type": "function",
            ...           "function": {"name": "example", "arguments": "{}"}}]
            >>> registry.run_tool_calls_sync(calls)
            [{'role': 'tool', 'tool_call_id': 'call_1', 'content': 'ok'}]
        """
        # Loaded on first use: it brings json and hmac, which `import agcore_tools` skips.
        from .calls import answer_list, check_tool_calls, run_tool_calls

        # Read the caller's iterables here, in the caller's thread.
        check_tool_calls(tool_calls, "run_tool_calls_sync")
        calls = list(tool_calls) if tool_calls is not None else None
        answers = answer_list(approvals)
        return _sync.run(
            run_tool_calls(
                self.tool_table,
                calls,
                ctx=ctx,
                timeout=timeout,
                max_result_bytes=max_result_bytes,
                max_attachment_bytes=max_attachment_bytes,
                repair_arguments=repair_arguments,
                approvals=answers,
                approval_key=approval_key,
                method="run_tool_calls_sync",
            )
        )

    # -- presentation --------------------------------------------------------------

    def __repr__(self: _HasTable) -> str:
        return f"<ToolRegistry tools={list(self.tool_table.entries)!r}>"

    def _repr_markdown_(self: _HasTable) -> str:
        """A notebook table: name, description, permissions, tags, category, calls, failures."""
        entries = self.tool_table.entries
        title = f"**ToolRegistry** — {len(entries)} tool(s)"
        return f"{title}\n\n{markdown_table(REGISTRY_HEADERS, registry_rows(entries.values()))}"

    def _repr_html_(self: _HasTable) -> str:
        """The same table as :meth:`_repr_markdown_`, in HTML."""
        entries = self.tool_table.entries
        caption = f"ToolRegistry — {len(entries)} tool(s)"
        return html_table(REGISTRY_HEADERS, registry_rows(entries.values()), caption)
