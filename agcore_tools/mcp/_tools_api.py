"""The tool surface of :class:`~agcore_tools.McpClient`, as a mixin: its tool list, tool
calls (plain and as tasks) and the adapters that bring its tools into a
:class:`~agcore_tools.ToolRegistry`.

Kept out of :mod:`agcore_tools.mcp.client`, which holds the client's settings and its
lifecycle, so each module reads as one job: these methods only hand their work to the
session (``_session``, ``_sending``: sending, recovery), the tool cache (``_tools``), the task calls
(``_task_start``) and the adapters (``_adapter``). The mixin reaches the client through
the attributes it declares, which :class:`~agcore_tools.McpClient` sets.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from typing_extensions import deprecated

from .. import _otel
from .._deprecated import renamed
from .._keywords import checks_public_keywords
from ..base import BaseTool
from ..error import McpNotInitializedError
from . import _task_start
from ._adapter import make_adapters, prefix_for
from ._session import Session, check_timeout
from ._tasks import McpTask
from ._tools import ToolCache, check_arguments, definition
from ._trace import traced_call_tool
from .models import McpToolInfo
from .policy import PermissionPolicy

__all__ = ["ToolClientMethods"]


@checks_public_keywords
class ToolClientMethods:
    """``definitions``, ``tool_infos``, ``refresh_tools``, ``malformed_tools``,
    ``call_tool``, ``start_task``, ``task`` and ``into_tools`` of
    :class:`~agcore_tools.McpClient`."""

    server_name: str
    permission_policy: PermissionPolicy
    _session: Session
    _tool_cache: ToolCache

    async def definitions(self) -> list[dict[str, Any]]:
        """The server's tools as Chat Completions tool params, like
        :meth:`ToolRegistry.definitions`, with the server's own names; not those it
        offers to its app alone (:attr:`McpToolInfo.app_only`).

        The list is cached: pages are followed once, then served from the cache until
        the server reports a change, :attr:`tools_ttl` (or the server's ``ttlMs``)
        expires, or :meth:`refresh_tools` is called.

        Example:
            >>> async def names(client: McpClient) -> list[str]:
            ...     return [d["function"]["name"] for d in await client.definitions()]
        """
        return [definition(i) for i in await self._tool_cache.current() if not i.app_only]

    @deprecated("McpClient.list_tools() is deprecated; use McpClient.definitions()", category=None)
    async def list_tools(self) -> list[dict[str, Any]]:
        """Deprecated: use :meth:`definitions` (same result; ``ToolRegistry.list_tools()``
        returns names, this returned definitions).

        Example:
            >>> async def old_and_new(client: McpClient) -> bool:
            ...     return await client.list_tools() == await client.definitions()  # warns
        """
        renamed("McpClient.list_tools()", "McpClient.definitions()")
        return await self.definitions()

    async def refresh_tools(self) -> list[dict[str, Any]]:
        """Re-read the tool list from the server and return it like :meth:`definitions`."""
        self._tool_cache.invalidate(None)
        return await self.definitions()

    async def tool_infos(self) -> list[McpToolInfo]:
        """The server's tools with their schemas and annotations (cached like :meth:`definitions`)."""
        return await self._tool_cache.current()

    @property
    def malformed_tools(self) -> tuple[str, ...]:
        """The tools the last tool list left out as malformed, one line each: the tool's
        name, where its listing is wrong and how, as the WARNING logged for it said
        (``"'search' (tools[1].inputSchema: Input should be a valid dictionary)"``).

        A server's tool whose listing breaks the protocol's schema (an ``inputSchema``
        that is no object, an annotation of the wrong type) is left out, so that its
        other tools stay usable; a list with no valid tool fails. Empty when none was
        left out, or before the first list. To refuse such a server, check it after
        ``connect()``.

        Example:
            >>> from agcore_tools import McpClient, StdioTransport
            >>> McpClient("x", StdioTransport("server")).malformed_tools
            ()
        """
        return tuple(str(tool) for tool in self._tool_cache.malformed)

    async def call_tool(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """Call a tool and return its value.

        Returns ``structuredContent`` when the server sends it, else the text content
        (several text parts joined with newlines); when other parts are present, the
        list of all parts in order: text as strings, image and audio parts as
        :class:`~agcore_tools.Image` and :class:`~agcore_tools.Audio`, resource and
        resource_link parts as typed JSON.

        Raises:
            ToolExecutionError: The server answered ``isError: true``; the message is
                its text (a model can read it and try again).
            McpTimeoutError: No answer within ``timeout`` (default :attr:`timeout`),
                which covers the whole call, any sampling or elicitation the server asks
                for during it included; the request is cancelled on the server
                (``notifications/cancelled`` on a legacy session; on 2026-07-28, its
                response stream is closed, which a server answering in JSON mode
                may not notice).
            McpNotInitializedError: Not connected (never, closed, or the server is gone).
            McpError: The server answered with a JSON-RPC error (recoverable, as a
                model's wrong argument is often refused this way; ``may_have_run`` is
                False when its code refuses the request unrun, such as -32602), or
                went away.

        Example:
            >>> async def weather(client: McpClient) -> Any:
            ...     return await client.call_tool("get_weather", {"city": "Paris"})
        """
        check_arguments("call_tool", name, args)
        tracer = _otel.tracer()
        if tracer is None:
            return await self._session.call_tool(name, args, timeout)
        return await traced_call_tool(tracer, self._session, name, args, timeout)

    async def start_task(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        ttl: float | None = None,
        timeout: float | None = None,
    ) -> McpTask:
        """Call a tool as a task (MCP Tasks) and return its handle at once.

        The server runs the tool on after this returns; :meth:`McpTask.result` waits for
        its value, :meth:`McpTask.status` and :meth:`McpTask.cancel` follow and stop it,
        and :meth:`McpTask.to_json` saves it, for :meth:`task` to pick up in another
        client or process. The ``tools/call`` is sent once: never again after a
        restart, as the task may exist.

        On 2025-11-25 the server must offer tasks for ``tools/call``; ``ttl`` asks it to
        keep the task that many seconds. On 2026-07-28 the client must be created with
        ``tasks=True`` and the server must offer the tasks extension; ``ttl`` is not
        sent (the server decides), and the server may answer a tool whose task support
        is "optional" at once: the handle is then already complete (``task_id`` None,
        ``result()`` returns the value, ``to_json()`` refuses).

        Raises:
            McpError: The server offers no tasks (the message says which opt-in or
                capability is missing), or the request failed as in :meth:`call_tool`.
            McpTimeoutError: The server did not answer within ``timeout`` (default
                :attr:`timeout`); this bounds creating the task, not running it.

        Example:
            >>> async def build(client: McpClient) -> Any:
            ...     task = await client.start_task("build", {"seconds": 5, "label": "x"})
            ...     return await task.result(timeout=60)
        """
        check_arguments("start_task", name, args)
        return await _task_start.start_task(self._session, name, args, ttl, timeout)

    def task(self, saved: Mapping[str, Any] | str) -> McpTask:
        """The handle of a task started earlier, from :meth:`McpTask.to_json` or its id.

        Nothing is sent: :meth:`McpTask.status` or :meth:`McpTask.result` asks the
        server, and raises :class:`~agcore_tools.McpError` if it no longer knows the
        task (expired, or forgotten in a restart).

        Raises:
            McpUsageError: ``saved`` was started on another server (by name), or has no
                task id. It is a ``ValueError``.

        Example:
            >>> from agcore_tools import McpClient, StdioTransport
            >>> client = McpClient("ci", StdioTransport("server"))
            >>> client.task("t-42").task_id
            't-42'
            >>> client.task({"server": "other", "task_id": "t-1"})
            Traceback (most recent call last):
            ...
            agcore_tools.error.McpUsageError: task 't-1' was started on MCP server 'other', not on 'ci'
        """
        return _task_start.attach(self._session, saved)

    def into_tools(
        self,
        *,
        prefix: bool | str = False,
        policy: PermissionPolicy | None = None,
        tasks: bool | Collection[str] = False,
        task_wait: float | None = None,
    ) -> list[BaseTool]:
        """Adapters for the server's tools, to register in a :class:`ToolRegistry`.

        Uses the tool list fetched by ``connect()`` (or the last ``definitions()``).
        Each adapter's ``execute`` calls :meth:`call_tool` on this client, so it keeps
        working across reconnects.

        Args:
            prefix: False keeps the server's names; True prefixes them with the server
                name (``server__tool``); a string prefixes them with that string. Names
                are cut to the 64-character ``[a-zA-Z0-9_-]`` limit of model APIs.
            policy: Overrides :attr:`permission_policy` for these adapters.
            tasks: Run calls as MCP tasks for these tools (server names), or True for
                every tool that supports them; a tool whose server requires tasks
                always does. On 2026-07-28 the client needs ``tasks=True``.
            task_wait: Seconds a task call waits for its task (default
                :attr:`timeout`); still running then, it pauses the loop
                (``response.pending`` lists a :class:`~agcore_tools.RunningTask`),
                and a resume waits for the same task.

        Raises:
            McpNotInitializedError: No tool list has been fetched yet.
            ToolError: Two tools would get the same name.
            ToolConfigError: ``tasks`` names a tool the server does not list.

        Example:
            >>> from agcore_tools import ToolRegistry
            >>> async def bridge(client: McpClient, registry: ToolRegistry) -> None:
            ...     await client.connect()
            ...     registry.register_all(client.into_tools(prefix=True))
        """
        infos = self._tool_cache.infos
        if infos is None:
            raise McpNotInitializedError(
                self.server_name, "no tool list yet; call connect() or definitions() first"
            )
        chosen = policy or self.permission_policy
        if task_wait is not None:
            task_wait = check_timeout(self.server_name, task_wait)
        return make_adapters(
            self, infos, prefix_for(self.server_name, prefix), chosen, tasks, task_wait
        )

    # -- internals ---------------------------------------------------------------------

    @property
    def _tools(self) -> list[McpToolInfo] | None:
        # The cached tool list, as tests that fake a listing set it.
        return self._tool_cache.infos

    @_tools.setter
    def _tools(self, infos: list[McpToolInfo] | None) -> None:
        self._tool_cache.infos = infos

    def _invalidate_tools(self, reason: str | None) -> None:
        self._tool_cache.invalidate(reason)
