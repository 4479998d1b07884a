"""A registry's direct calls and a model's calls run through it, as a mixin.

Kept out of :mod:`agcore_tools.registry` so the registry stays a read of
registration, discovery and policies. Everything here goes through the registry's
public :attr:`~agcore_tools.ToolRegistry.tool_table`, down to the functions that run
calls (``_execute``, ``calls.run_tool_calls``), as the sync forms in
:mod:`agcore_tools._registry_sync` do.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Coroutine, Iterable, Mapping
from typing import Any, Protocol

from ._execute import as_completed, check_context, execute, listed_calls
from ._function_tool import check_timeout
from ._keywords import checks_public_keywords
from ._records import ToolCall, ToolInvocation
from ._table import ToolTable
from .approval import ApprovalDecision, ToolCallOutputs
from .base import ToolContext

__all__ = ["RegistryCalls"]


class _HasTable(Protocol):
    @property
    def tool_table(self) -> ToolTable: ...


@checks_public_keywords
class RegistryCalls:
    """``invoke``, ``invoke_all``, ``invoke_as_completed`` and ``run_tool_calls`` of a
    registry."""

    def invoke(
        self: _HasTable, name: str, args: Mapping[str, Any], ctx: ToolContext | None = None
    ) -> Coroutine[Any, Any, ToolInvocation]:
        """Look up, check permissions, then execute one tool.

        A direct call is the app's own: it asks no one, so a tool that needs approval
        (``needs_approval``, or a permission in ``PermissionConfig.ask``) runs at once,
        with a warning logged the first time for each tool. A permission the checker
        denies still refuses the call. Run a model's tool calls with
        :meth:`ToolRegistry.run_tool_calls` (or :class:`~agcore_tools.LlmCycle`), which
        ask first.

        Raises :class:`ToolNotFoundError` for an unknown name,
        :class:`PermissionDeniedError` when the permission checker refuses, and
        :class:`~agcore_tools.ToolUnavailableError` when the tool's
        :class:`~agcore_tools.ToolPolicy` turns the call away (an open breaker, a rate
        limit that does not wait): the tool never runs.
        Failures during execution are recorded in the returned invocation, not raised;
        so is the tool's own timeout ending while the call waits for a concurrency slot
        (a :class:`ToolTimeoutError`, with ``may_have_run=False``).
        Cancelling the call cancels its context's token (a child of ``ctx``'s, which
        stays as it was), so a sync tool or generator in its worker thread stops too.
        Cancelling ``ctx`` itself (a Stop button: ``ctx.cancellation.cancel()``, from
        any thread) stops the call as it stops an ``LlmCycle`` run: the tool is
        cancelled and :class:`~agcore_tools.RunStoppedError` is raised (at once, with
        nothing run, for a ``ctx`` cancelled already).
        A ``name`` that is not a tool's name as a non-empty string (the tool object
        itself, None) is a mistake in the caller's code, as is a ``ctx`` that is not a
        :class:`ToolContext`: :class:`~agcore_tools.ToolConfigError`.

        Example:
            >>> import asyncio
            >>> from agcore_tools import ToolRegistry
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry()
            >>> entry = registry.register(StaticTool("example"))
            >>> asyncio.run(registry.invoke("example", {})).output
            'ok'
            >>> asyncio.run(registry.invoke(entry, {}))
            Traceback (most recent call last):
            ...
            agcore_tools.error.ToolConfigError: invoke() takes a tool name (a str), got ToolEntry: use invoke('example', ...)
        """
        return execute(self.tool_table, name, args, ctx, callers=True, direct="invoke()")

    async def invoke_all(
        self: _HasTable,
        calls: Iterable[ToolCall | tuple[Any, ...]],
        *,
        ctx: ToolContext | None = None,
        timeout: float | None = 60.0,
    ) -> list[ToolInvocation]:
        """Run many calls concurrently; results come back in input order.

        Direct calls, as for :meth:`ToolRegistry.invoke`: they skip approval (logged once
        per tool), not the permission checker; run a model's calls with
        :meth:`ToolRegistry.run_tool_calls`.

        Each call has its own ``timeout`` (positive seconds, None for none; anything
        else is a :class:`~agcore_tools.ToolConfigError`), after which it is
        cancelled and its invocation holds a :class:`ToolTimeoutError`. The timeout
        works by cancelling the call's task: an async tool that swallows the
        cancellation keeps the batch waiting until it returns (with no bound), and
        its result then counts as a success. Nothing is raised for a call:
        not-found and permission errors are recorded in the invocations too (a call
        with an empty name gets a :class:`~agcore_tools.ToolNotFoundError`, one whose
        name is no str, such as the tool object, a
        :class:`~agcore_tools.ToolConfigError` naming the fix, and does not run).
        Only ``calls`` that is no list of calls, or holds an item that is no call,
        raises (a :class:`~agcore_tools.ToolConfigError`), as do a bad ``timeout``
        or ``ctx``. Cancelling the caller cancels every call still running; so does
        cancelling ``ctx`` (a Stop button, from any thread), which then raises
        :class:`~agcore_tools.RunStoppedError` instead of returning results.

        Example:
            >>> import asyncio
            >>> from agcore_tools import ToolRegistry
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry()
            >>> _ = registry.register(StaticTool("example"))
            >>> results = asyncio.run(registry.invoke_all([("example", {}), ("nope", {})]))
            >>> [r.ok for r in results]
            [True, False]
        """
        check_timeout(timeout, "invoke_all() timeout")
        check_context(ctx, "invoke_all()")
        normalised = listed_calls(calls, "invoke_all()")
        results: list[ToolInvocation | None] = [None] * len(normalised)
        async with contextlib.aclosing(
            as_completed(self.tool_table, normalised, ctx, timeout, caller="invoke_all()")
        ) as finished:
            async for position, invocation in finished:
                results[position] = invocation
        return results  # type: ignore[return-value]  # every position is filled

    def invoke_as_completed(
        self: _HasTable,
        calls: Iterable[ToolCall | tuple[Any, ...]],
        *,
        ctx: ToolContext | None = None,
        timeout: float | None = 60.0,
    ) -> AsyncGenerator[tuple[int, ToolInvocation], None]:
        """Like :meth:`ToolRegistry.invoke_all`, but yield ``(position, invocation)`` as
        each call ends. Direct calls, as for :meth:`ToolRegistry.invoke`: they skip
        approval, not the permission checker.

        For callers that report progress per call (the streaming loop does). Closing
        the iterator early (use ``contextlib.aclosing``), or cancelling its consumer,
        cancels the calls still running and their contexts' cancellation tokens.
        Cancelling ``ctx`` (a Stop button, from any thread) cancels them too, and the
        iteration raises :class:`~agcore_tools.RunStoppedError`.

        Example:
            >>> import asyncio
            >>> from agcore_tools import ToolRegistry
            >>> from agcore_tools.testing import StaticTool
            >>> async def main() -> list[int]:
            ...     registry = ToolRegistry()
            ...     _ = registry.register(StaticTool("example"))
            ...     calls = [("example", {}), ("example", {})]
            ...     return sorted([i async for i, _ in registry.invoke_as_completed(calls)])
            >>> asyncio.run(main())
            [0, 1]
        """
        check_timeout(timeout, "invoke_as_completed() timeout")
        check_context(ctx, "invoke_as_completed()")
        listed = listed_calls(calls, "invoke_as_completed()")
        return as_completed(self.tool_table, listed, ctx, timeout, caller="invoke_as_completed()")

    async def run_tool_calls(
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
        """Run a model's tool calls and return the messages that answer them.

        A drop-in for apps that drive the OpenAI SDK themselves. It takes either:

        - Chat Completions ``message.tool_calls`` (SDK objects or dicts), and returns
          ``{"role": "tool", "tool_call_id", "content"}`` messages to append, followed
          by one user message carrying the images, audio and files the tools returned,
          if any (tool messages carry text only);
        - Responses API ``function_call`` items (``response.output`` is fine: other
          items are skipped), and returns ``function_call_output`` items, whose
          ``output`` is a list of ``input_text``, ``input_image`` and ``input_file``
          parts when a tool returned an image or a file.

        Calls run concurrently, each with ``timeout`` seconds, and the outputs come
        back in the calls' order. Every failure (unknown tool, denied permission,
        arguments that are not a JSON object, exceptions, a Chat Completions call that
        is not a function call, such as a custom tool's) becomes error text for the
        model, as in :class:`~agcore_tools.LlmCycle`; result text past
        ``max_result_bytes`` UTF-8 bytes keeps its head and tail, and an image, sound
        or file over ``max_attachment_bytes`` is left out, with the reason in the text
        (see :mod:`agcore_tools.content`). Both limits are integers (at least 64 and 1,
        as in :class:`~agcore_tools.cycle.Limits`) or None for no limit; another value raises
        :class:`~agcore_tools.ToolConfigError`. With ``repair_arguments``, arguments that are
        not valid JSON get one deterministic repair first, as ``CycleConfig`` describes.

        A call that needs approval (see :mod:`agcore_tools.approval`) does not run and
        gets no message: its :class:`~agcore_tools.ApprovalRequest` is in the result's
        ``pending_approvals`` (a ``needs_approval`` function that runs past ``timeout``
        asks too). Ask the user, then pass the waiting calls again with
        ``approvals=[request.approve(), ...]``: given ``approvals`` (even ``[]``), only
        the answered calls run and get a message, and every other call that needs
        approval is listed again, so pass only the calls still waiting (those of the
        last ``pending_approvals``), never one answered in an earlier round. Leave
        ``approvals`` out on a turn's first call. With ``approval_key`` (non-empty
        bytes, as for ``CycleConfig``), requests are signed and answers must carry the
        signature. On Chat Completions, put the
        tool messages that come back then ahead of the first outputs' attachments
        message, if there was one: a turn's tool messages must follow its calls. When
        calls share one id and one of them needs approval, only the first is asked
        about and can run; the others are answered, with the first, as not run.

        Cancelling ``ctx`` (a Stop button: ``ctx.cancellation.cancel()``, from any
        thread) stops the calls as it stops an ``LlmCycle`` run: running tools and
        ``needs_approval`` checks are cancelled, and :class:`~agcore_tools.RunStoppedError`
        is raised; the calls then have no answers, so drop their assistant message (or
        answer them) before sending the history again.

        Example:
            >>> import asyncio
            >>> from agcore_tools import ToolRegistry
            >>> from agcore_tools.testing import StaticTool
            >>> registry = ToolRegistry()
            >>> _ = registry.register(StaticTool("example"))
            >>> calls = [{"id": "call_1", "type": "function",
            ...           "function": {"name": "example", "arguments": "{}"}}]
            >>> asyncio.run(registry.run_tool_calls(calls))
            [{'role': 'tool', 'tool_call_id': 'call_1', 'content': 'ok'}]
        """
        # Loaded on first use: it brings json and hmac, which `import agcore_tools` skips.
        from .calls import run_tool_calls

        return await run_tool_calls(
            self.tool_table,
            tool_calls,
            ctx=ctx,
            timeout=timeout,
            max_result_bytes=max_result_bytes,
            max_attachment_bytes=max_attachment_bytes,
            repair_arguments=repair_arguments,
            approvals=approvals,
            approval_key=approval_key,
        )
