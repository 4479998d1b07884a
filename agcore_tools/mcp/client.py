"""The MCP client users hold: connect to one server, list and call its tools, bridge them
into a :class:`~agcore_tools.ToolRegistry`, and reach the rest of the protocol (resources,
prompts, completion, ping, log level, roots) through thin methods over ``_resources``,
``_prompts``, ``_utilities`` and ``_protocol_tools``.

The protocol itself (JSON-RPC, version negotiation, server-to-client requests) is the
official MCP SDK's; this module adds the lifecycle (see ``_connection``), a tool cache,
error translation into :class:`~agcore_tools.ToolError` subclasses, and the registry
adapters.

Example:
    >>> import asyncio
    >>> from agcore_tools import McpClient, StdioTransport, ToolRegistry
    >>> async def main() -> None:
    ...     async with McpClient("fs", StdioTransport("npx", ["-y",
    ...             "@modelcontextprotocol/server-filesystem", "/tmp"])) as fs:
    ...         print(await fs.call_tool("list_directory", {"path": "/tmp"}))
    ...         registry = ToolRegistry()
    ...         registry.register_all(fs.into_tools(prefix=True))
    >>> asyncio.run(main())  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from .. import _sync
from .._aio import with_timeout
from ..base import BaseTool
from ..error import McpError, McpNotInitializedError, ToolConfigError, ToolError
from . import _prompts, _protocol_tools, _resources, _utilities
from ._exchange import EXCHANGE, HttpExchange
from ._progress import progress_callback
from ._results import result_value
from ._state import State
from ._trace import traced_call_tool
from .models import McpLogMessage, McpProgress, McpToolInfo
from .policy import McpPermissionPolicy, PermissionPolicy
from .recovery import McpRecovery
from .transport import StdioTransport, StreamableHttpTransport

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import ElicitationFnT, ListRootsFnT, SamplingFnT
    from mcp_types import ListToolsResult

    from . import models
    from ._connection import Connection

__all__ = ["McpClient"]

logger = logging.getLogger("agcore_tools.mcp")

_BACKSTOP = 5.0
"""Extra seconds after the request timeout before the caller stops waiting regardless
(the SDK's clock does not run while a request is still being written)."""
_UNTIMED = math.inf
"""The SDK read timeout of a ``tools/call``: none, as the connection's watchdog bounds
it. The SDK's per-request clock arms and cancels a timer for every request (about 4 %
of a stdio call's client CPU, docs/benchmarks.md); a request cancelled by the watchdog
still gets its ``notifications/cancelled``, which the SDK sends for any abandoned
request. ``math.inf``, not None: None would select the session's default timeout."""
_MAX_PAGES = 1000

LogCallback = Callable[[McpLogMessage], "Awaitable[None] | None"]
"""Receives each log message a server sends."""
ProgressCallback = Callable[[McpProgress], "Awaitable[None] | None"]
"""Receives each progress update of a tool call."""


class McpClient:
    """A client for one MCP server, over stdio or Streamable HTTP.

    ``connect()`` starts (or reaches) the server and negotiates the protocol version
    (2026-07-28 servers through ``server/discover``, older ones through the
    ``initialize`` handshake). ``connect()`` and ``close()`` may be called from
    different tasks, and any number of tasks may call tools at once. The client is also
    an async context manager.

    If the server dies, the calls in flight fail at once with an
    :class:`~agcore_tools.McpError` and :attr:`connected` turns False; the next call
    starts it again (see :class:`McpRecovery`, and the table of connection endings in
    ``docs/guides/mcp.md``). ``recovery=None`` turns that off: later calls then fail
    until ``connect()``.

    Server-to-client requests: ``ping`` is answered. Sampling and roots are advertised
    only with a handler, then routed to it (the SDK's callback signatures and types);
    elicitation always is, declined (and logged) without a handler. Log messages go to the
    ``agcore_tools.mcp.server`` logger and ``on_log``; progress updates to the
    ``agcore_tools.mcp.progress`` logger (DEBUG) and ``on_progress``.

    Synchronous code uses :meth:`connect_sync`, :meth:`list_tools_sync`,
    :meth:`call_tool_sync` and :meth:`close_sync`, or ``with McpClient(...) as client:``.
    They run on agcore_tools' own event loop, where the session then lives, so it stays
    open from one sync call to the next. An MCP session belongs to the event loop that
    connected it: a call from another loop is refused with an
    :class:`~agcore_tools.McpNotInitializedError` that says so.

    Example:
        >>> client = McpClient("demo", StdioTransport("python", ["examples/mcp_server.py"]))
        >>> client.with_timeout(10).timeout
        10.0
        >>> client.connected
        False

        Connected to the bundled example server (run from the repository's root):

        >>> import sys
        >>> async def main() -> None:
        ...     demo = McpClient("demo", StdioTransport(sys.executable, ["examples/mcp_server.py"]))
        ...     await demo.connect()
        ...     try:
        ...         print(demo.connected, demo.protocol_version is not None, demo.pid is not None)
        ...         print(demo.server_info["name"], repr(demo.stderr_tail))
        ...         print([tool["function"]["name"] for tool in await demo.list_tools()])
        ...         print((await demo.tool_infos())[1].annotations)
        ...         print(await demo.call_tool("capital_of", {"country": "Japan"}))
        ...         print(len(await demo.refresh_tools()))
        ...         print(demo.instructions)
        ...         print([r.uri for r in await demo.list_resources()],
        ...               [t.uri_template for t in await demo.list_resource_templates()])
        ...         print((await demo.read_resource("demo://capitals/peru"))[0].text)
        ...         print([p.name for p in await demo.list_prompts()])
        ...         prompt = await demo.get_prompt("weekend_trip", {"country": "Peru"})
        ...         print(prompt.messages[0]["content"]["text"])
        ...         print((await demo.complete("country", "Ke", prompt="weekend_trip")).values)
        ...         print(await demo.ping() < 10)
        ...         print([t.name for t in (demo.resource_reader_tool(), demo.prompt_tool())])
        ...     finally:
        ...         await demo.close()
        ...     print(demo.connected)
        >>> asyncio.run(main())
        True True True
        demo-tools ''
        ['text_stats', 'capital_of', 'celsius_to_fahrenheit']
        {'readOnlyHint': True, 'openWorldHint': False}
        Tokyo
        3
        Offline demo tools: capitals, text statistics, temperature conversion.
        ['demo://capitals'] ['demo://capitals/{country}']
        Lima
        ['weekend_trip']
        Plan a weekend in the capital of Peru. Find the capital with capital_of first.
        ('Kenya',)
        True
        ['read_resource', 'get_prompt']
        False

        From synchronous code (``with McpClient(...) as demo:`` connects and closes too):

        >>> demo = McpClient("demo", StdioTransport(sys.executable, ["examples/mcp_server.py"]))
        >>> demo.connect_sync()
        >>> [tool["function"]["name"] for tool in demo.list_tools_sync()][1]
        'capital_of'
        >>> demo.call_tool_sync("capital_of", {"country": "Peru"})
        'Lima'
        >>> demo.close_sync()
    """

    def __init__(
        self,
        server_name: str,
        transport: StdioTransport | StreamableHttpTransport,
        *,
        timeout: float = 30.0,
        tools_ttl: float | None = None,
        permission_policy: PermissionPolicy | None = None,
        sampling_handler: SamplingFnT | None = None,
        elicitation_handler: ElicitationFnT | None = None,
        roots_handler: ListRootsFnT | None = None,
        on_log: LogCallback | None = None,
        on_progress: ProgressCallback | None = None,
        log_level: str | None = "info",
        protocol: Literal["auto", "legacy"] = "auto",
        recovery: McpRecovery | None = McpRecovery(),  # noqa: B008 - frozen, shared safely
    ) -> None:
        """Describe the client; nothing starts until :meth:`connect`.

        Args:
            server_name: Names the server in messages, logs and prefixed tool names.
            transport: A :class:`StdioTransport` or a :class:`StreamableHttpTransport`.
            timeout: Seconds for start-up and for each request.
            tools_ttl: Seconds a tool list stays cached; None keeps it until the server
                says it changed or :meth:`refresh_tools` is called. A server's own
                ``ttlMs`` (2026-07-28) shortens it.
            permission_policy: Maps each tool to the permissions its adapter requires;
                default :class:`McpPermissionPolicy` (see its table).
            sampling_handler: Answers ``sampling/createMessage``; advertised only if given.
            elicitation_handler: Answers ``elicitation/create``; without one, declines.
            roots_handler: Answers ``roots/list``; advertised only if given.
            on_log: Called with each :class:`McpLogMessage` (sync or async).
            on_progress: Called with each :class:`McpProgress` of a tool call.
            log_level: The lowest level of log messages to ask 2026-07-28 servers for
                (None asks for none); older servers choose themselves.
            protocol: ``"auto"`` tries 2026-07-28 first; ``"legacy"`` goes straight to
                the ``initialize`` handshake, saving a round trip with older servers.
            recovery: Restarts after a lost connection or session, and the optional
                liveness ping (:class:`McpRecovery`); None turns both off.
        """
        if not isinstance(server_name, str) or not server_name.strip():
            raise ToolConfigError(
                f"an MCP client needs a non-empty server name, got {server_name!r}"
            )
        if not isinstance(transport, (StdioTransport, StreamableHttpTransport)):
            raise ToolConfigError(
                f"MCP server '{server_name}': transport must be a StdioTransport or a "
                f"StreamableHttpTransport, got {type(transport).__name__}"
            )
        if protocol not in ("auto", "legacy"):
            raise ToolConfigError(
                f"MCP server '{server_name}': protocol must be 'auto' or 'legacy'"
            )
        if recovery is not None and not isinstance(recovery, McpRecovery):
            raise ToolConfigError(
                f"MCP server '{server_name}': recovery must be an McpRecovery or None, "
                f"got {type(recovery).__name__}"
            )
        self.server_name = server_name
        """The name given at construction."""
        self.transport = transport
        """How the server is reached."""
        self._timeout = _check_timeout(server_name, timeout)
        self.tools_ttl = tools_ttl
        """Seconds a fetched tool list stays fresh (None: until invalidated)."""
        self.permission_policy: PermissionPolicy = permission_policy or McpPermissionPolicy()
        """Decides each adapter's ``required_permissions``."""
        self.sampling_handler = sampling_handler
        """The SDK sampling callback, or None (sampling not advertised)."""
        self.elicitation_handler = elicitation_handler
        """The SDK elicitation callback, or None (every request is declined)."""
        self.roots_handler = roots_handler
        """The SDK roots callback, or None (roots not advertised)."""
        self.on_log = on_log
        """Receives server log messages, or None."""
        self.on_progress = on_progress
        """Receives progress updates, or None."""
        self.log_level = log_level
        """The log level requested from 2026-07-28 servers."""
        self.protocol = protocol
        """``"auto"`` or ``"legacy"``."""
        self.recovery = recovery
        """How lost connections are restarted (None: never)."""
        self._restarts = 0
        """Restarts in a row without a request succeeding in between."""
        self._conn: Connection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The event loop the connection lives in (an MCP session cannot leave it)."""
        self._failed: Connection | None = None
        """The last connection that failed to start, kept for :attr:`stderr_tail`."""
        self._connect_lock = asyncio.Lock()
        self._tools_lock = asyncio.Lock()
        self._tools: list[McpToolInfo] | None = None
        self._tools_fresh_until = -1.0
        self._tools_generation = 0

    # -- configuration ----------------------------------------------------------------

    @property
    def timeout(self) -> float:
        """Seconds allowed for start-up and for each request."""
        return self._timeout

    def with_timeout(self, secs: float) -> McpClient:
        """Set :attr:`timeout` and return this client, for chaining.

        Example:
            >>> McpClient("x", StdioTransport("server")).with_timeout(5).timeout
            5.0
        """
        self._timeout = _check_timeout(self.server_name, secs)
        return self

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True while the client can send requests (False before connect, after close or
        once the server is gone)."""
        conn = self._conn
        return conn is not None and conn.usable

    @property
    def protocol_version(self) -> str | None:
        """The protocol version the SDK negotiated, while connected."""
        client = self._client_or_none()
        return client.protocol_version if client is not None else None

    @property
    def server_info(self) -> dict[str, Any] | None:
        """The server's name and version as it reports them, while connected."""
        client = self._client_or_none()
        info = client.server_info if client is not None else None
        return info.model_dump(mode="json", exclude_none=True) if info is not None else None

    @property
    def pid(self) -> int | None:
        """The stdio server's process id (also its process group id), once started."""
        conn = self._conn
        return conn.child.pid if conn is not None and conn.child is not None else None

    @property
    def stderr_tail(self) -> str:
        """The last lines the stdio server wrote to stderr ("" if none); after a failed
        ``connect()``, those of the server that failed."""
        conn = self._conn or self._failed
        return conn.child.stderr.tail() if conn is not None and conn.child is not None else ""

    async def connect(self) -> None:
        """Start the server (stdio) or reach it (HTTP), and negotiate the protocol.

        Does nothing when already connected; after the server was lost, starts a new
        connection. Raises an :class:`~agcore_tools.McpError` subclass within
        :attr:`timeout` when the command is missing, the server exits during start-up
        or never answers; the server's stderr tail is in the message.

        Example:
            >>> import sys
            >>> from agcore_tools import McpError
            >>> crash = "import sys; sys.exit('config.toml not found')"
            >>> broken = McpClient("broken", StdioTransport(sys.executable, ["-c", crash]))
            >>> try:
            ...     asyncio.run(broken.connect())
            ... except McpError as exc:
            ...     print(exc)  # doctest: +ELLIPSIS
            MCP server 'broken': ... exited with code 1 during start-up; stderr: config.toml not found
        """
        self._use_loop("connect")
        async with self._connect_lock:
            old = self._conn
            if old is not None and old.usable:
                return
            self._restarts = 0
            await self._start_locked(restarting=False)

    async def _start_locked(self, *, restarting: bool) -> Connection:
        """Replace the connection with a new one (the connect lock is held)."""
        old = self._conn
        if old is not None:
            self._conn = None
            await old.stop()
        from ._connection import Connection

        conn = Connection(self)
        self._conn, self._failed = conn, None
        try:
            await conn.start()
            self._invalidate_tools(None)
            if self._has_tools(conn):
                # One tools/list now: into_tools() can then work without awaiting, and the
                # SDK learns the tools' output schemas before the first call.
                await self._fetch_tools(conn)
        except BaseException as exc:
            if self._conn is conn:
                if restarting and isinstance(exc, ToolError):
                    # Stay lost: the next request tries again, after its backoff.
                    conn.failed_restart(exc.message)
                else:
                    self._conn, self._failed = None, conn
            await conn.stop()
            raise
        return conn

    async def _restart(self, conn: Connection, action: str, tool_name: str | None) -> Connection:
        """A usable connection in place of ``conn``, which was lost (see :class:`McpRecovery`)."""
        async with self._connect_lock:
            current = self._conn
            if current is not conn:
                # Another task restarted it meanwhile, or close() ran.
                if current is not None and current.usable:
                    return current
                raise self._not_usable(current, tool_name, action)
            policy = self.recovery
            attempt = self._restarts + 1
            if policy is None or attempt > policy.max_restarts:
                raise self._not_usable(conn, tool_name, action)
            wait = policy.delay(attempt) - (time.monotonic() - conn.lost_at)
            if wait > 0:
                await asyncio.sleep(wait)
                if self._conn is not conn:
                    raise self._not_usable(self._conn, tool_name, action)
            self._restarts = attempt
            logger.info(
                "MCP server '%s': starting it again (restart %d of %d) after: %s",
                self.server_name,
                attempt,
                policy.max_restarts,
                conn.lost_reason,
            )
            return await self._start_locked(restarting=True)

    def _can_restart(self) -> bool:
        policy = self.recovery
        return policy is not None and self._restarts < policy.max_restarts

    async def _usable(
        self, conn: Connection | None, action: str, tool_name: str | None
    ) -> Connection:
        """``conn`` if requests can be sent on it; else the connection that replaces it."""
        if conn is not None and conn.usable:
            return conn
        if conn is not None and self.recovery is not None:
            if conn.state is State.STARTING:
                async with self._connect_lock:  # let the connect or restart in progress finish
                    pass
                current = self._conn
                if current is not None and current.usable:
                    return current
                conn = current
            if conn is not None and conn.state is State.LOST and self._can_restart():
                return await self._restart(conn, action, tool_name)
        raise self._not_usable(conn, tool_name, action)

    async def _ready(self, what: str) -> Connection:
        """The connection to send ``what`` on: restarted if it was lost (see
        :class:`McpRecovery`), and in this event loop."""
        conn = self._conn
        if conn is None or not conn.usable:
            conn = await self._usable(conn, what, None)
        if self._loop is not asyncio.get_running_loop():
            raise self._wrong_loop(what, None)
        return conn

    async def close(self) -> None:
        """Close the session and stop the server; idempotent.

        A stdio server has its stdin closed, then gets SIGTERM, then SIGKILL; then any
        process left in its process group gets the same.
        """
        conn = self._conn
        if conn is not None and self._loop is not asyncio.get_running_loop():
            if self._alive_elsewhere(conn):
                raise self._wrong_loop("close", None)
            self._conn = None  # it ended with its event loop, or on its own
            return
        self._conn = None
        if conn is not None:
            await conn.stop()

    async def __aenter__(self) -> McpClient:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- tools -------------------------------------------------------------------------

    async def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools as Chat Completions tool params, like
        :meth:`ToolRegistry.definitions`, with the server's own names.

        The list is cached: pages are followed once, then served from the cache until
        the server reports a change, :attr:`tools_ttl` (or the server's ``ttlMs``)
        expires, or :meth:`refresh_tools` is called.
        """
        return [_definition(info) for info in await self.tool_infos()]

    async def refresh_tools(self) -> list[dict[str, Any]]:
        """Re-read the tool list from the server and return it like :meth:`list_tools`."""
        self._invalidate_tools(None)
        return await self.list_tools()

    async def tool_infos(self) -> list[McpToolInfo]:
        """The server's tools with their schemas and annotations (cached like :meth:`list_tools`)."""
        conn = await self._ready("tools/list")
        if self._tools is not None and time.monotonic() < self._tools_fresh_until:
            return list(self._tools)
        async with self._tools_lock:
            # Another task may have fetched while this one waited for the lock.
            if self._tools is not None and time.monotonic() < self._tools_fresh_until:
                return list(self._tools)
            return list(await self._fetch_tools(conn, recover=True))

    @traced_call_tool
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
                (``notifications/cancelled``).
            McpNotInitializedError: Not connected (never, closed, or the server is gone).
            McpError: The server answered with a protocol error, or went away.

        Example:
            >>> async def weather(client: McpClient) -> Any:
            ...     return await client.call_tool("get_weather", {"city": "Paris"})
        """
        conn = self._conn
        if conn is None or conn.state is not State.READY:
            conn = await self._usable(conn, f"tools/call '{name}'", name)
        if self._loop is not asyncio.get_running_loop():
            raise self._wrong_loop(f"tools/call '{name}'", name)
        limit = self._timeout if timeout is None else _check_timeout(self.server_name, timeout)
        progress = progress_callback(self.on_progress, self.server_name, name)
        arguments = dict(args) if args else {}
        started = time.monotonic()
        # Over HTTP, the guard in _http reports what the server answered into this.
        exchange = HttpExchange() if conn.http else None
        token = EXCHANGE.set(exchange)
        try:
            result = await conn.watchdog.bound(
                conn.call_tool(
                    name,
                    arguments,
                    read_timeout_seconds=_UNTIMED,
                    progress_callback=progress,
                    meta=conn.request_meta,
                ),
                limit,
            )
        except Exception as exc:  # noqa: BLE001 - send_again raises it translated, or retries
            from ._recover import send_again

            async def send(conn: Connection, remaining: float) -> Any:
                return await conn.watchdog.bound(
                    conn.call_tool(
                        name,
                        arguments,
                        read_timeout_seconds=_UNTIMED,
                        progress_callback=progress,
                        meta=conn.request_meta,
                    ),
                    remaining,
                )

            result = await send_again(
                self,
                conn,
                exc,
                exchange,
                action=f"tools/call '{name}'",
                tool_name=name,
                limit=limit,
                started=started,
                safe=lambda: self._safe_to_repeat(name),
                send=send,
            )
        finally:
            EXCHANGE.reset(token)
        self._restarts = 0
        return result_value(result, name)

    def into_tools(
        self, *, prefix: bool | str = False, policy: PermissionPolicy | None = None
    ) -> list[BaseTool]:
        """Adapters for the server's tools, to register in a :class:`ToolRegistry`.

        Uses the tool list fetched by ``connect()`` (or the last ``list_tools()``).
        Each adapter's ``execute`` calls :meth:`call_tool` on this client, so it keeps
        working across reconnects.

        Args:
            prefix: False keeps the server's names; True prefixes them with the server
                name (``server__tool``); a string prefixes them with that string. Names
                are cut to the 64-character ``[a-zA-Z0-9_-]`` limit of model APIs.
            policy: Overrides :attr:`permission_policy` for these adapters.

        Raises:
            McpNotInitializedError: No tool list has been fetched yet.
            ToolError: Two tools would get the same name.

        Example:
            >>> from agcore_tools import ToolRegistry
            >>> async def bridge(client: McpClient, registry: ToolRegistry) -> None:
            ...     await client.connect()
            ...     registry.register_all(client.into_tools(prefix=True))
        """
        from ._adapter import make_adapters

        if self._tools is None:
            raise McpNotInitializedError(
                self.server_name, "no tool list yet; call connect() or list_tools() first"
            )
        return make_adapters(
            self, self._tools, self._prefix(prefix), policy or self.permission_policy
        )

    # -- resources, prompts, completion, utilities (in _resources, _prompts, _utilities) --

    @property
    def instructions(self) -> str | None:
        """The server's instructions for using it (for a system prompt), while connected."""
        client = self._client_or_none()
        return client.instructions if client is not None else None

    async def list_resources(self) -> list[models.McpResourceInfo]:
        """The server's resources, every page followed (fetched on each call)."""
        return await _resources.list_resources(self)

    async def list_resource_templates(self) -> list[models.McpResourceTemplateInfo]:
        """The server's resource templates (URI patterns), every page followed."""
        return await _resources.list_resource_templates(self)

    async def read_resource(self, uri: str) -> list[models.McpResourceContents]:
        """The parts (text or blob) of the resource at ``uri``; fails like :meth:`call_tool`."""
        return await _resources.read_resource(self, uri)

    def subscribe_resource(self, uri: str) -> _resources.McpResourceSubscription:
        """Updates of the resource at ``uri``: ``async with`` it, then iterate it.

        Example:
            >>> async def watch(client: McpClient) -> None:
            ...     async with client.subscribe_resource("file:///todo.txt") as updates:
            ...         async for uri in updates:  # each time the server says it changed
            ...             print((await client.read_resource(uri))[0].text)
        """
        return _resources.McpResourceSubscription(self, uri)

    async def list_prompts(self) -> list[models.McpPromptInfo]:
        """The server's prompts, every page followed."""
        return await _prompts.list_prompts(self)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> models.McpPrompt:
        """The prompt ``name``, filled in by the server with ``arguments``."""
        return await _prompts.get_prompt(self, name, arguments)

    async def complete(
        self,
        argument: str,
        value: str,
        *,
        prompt: str | None = None,
        resource_template: str | None = None,
        context: Mapping[str, str] | None = None,
    ) -> models.McpCompletion:
        """Suggestions for ``argument`` of a ``prompt`` or a ``resource_template`` (give
        one), given its ``value`` so far and the arguments already chosen (``context``)."""
        return await _prompts.complete(self, argument, value, prompt, resource_template, context)

    async def ping(self) -> float:
        """Seconds for one round trip (``server/discover`` on 2026-07-28, which has no ping)."""
        return await _utilities.ping(self)

    async def set_log_level(self, level: str) -> None:
        """Ask for server log messages at ``level`` and above (``logging/setLevel``; on
        2026-07-28, sent with each later request). Later connections use it too.

        Example:
            >>> async def quiet(client: McpClient) -> None:
            ...     await client.set_log_level("error")
        """
        await _utilities.set_log_level(self, level)

    async def notify_roots_changed(self) -> bool:
        """Tell the server ``roots_handler`` now answers differently; False when there is
        nothing to send (2026-07-28 servers ask for the roots each time).

        Example:
            >>> async def moved(client: McpClient) -> None:
            ...     await client.notify_roots_changed()
        """
        return await _utilities.notify_roots_changed(self)

    def resource_reader_tool(
        self, *, prefix: bool | str = False, policy: PermissionPolicy | None = None
    ) -> BaseTool:
        """A ``read_resource`` tool, so a model can read resources, such as the
        ``resource_link`` parts tools return (``prefix``, ``policy`` as for :meth:`into_tools`)."""
        return _protocol_tools.resource_reader_tool(
            self, self._prefix(prefix), policy or self.permission_policy
        )

    def prompt_tool(
        self, *, prefix: bool | str = False, policy: PermissionPolicy | None = None
    ) -> BaseTool:
        """A ``get_prompt`` tool, so a model can get the server's prompts (``prefix``,
        ``policy`` as for :meth:`into_tools`)."""
        return _protocol_tools.prompt_tool(
            self, self._prefix(prefix), policy or self.permission_policy
        )

    # -- sync entry points ---------------------------------------------------------------
    # Each runs the async method on agcore_tools' own event loop (see _sync.py), where
    # the session then lives: use one client either with these or with await, not both.

    def connect_sync(self) -> None:
        """:meth:`connect` for synchronous code; the session stays open across sync calls."""
        _sync.run(self.connect())

    def list_tools_sync(self) -> list[dict[str, Any]]:
        """:meth:`list_tools` for synchronous code."""
        return _sync.run(self.list_tools())

    def call_tool_sync(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """:meth:`call_tool` for synchronous code; Ctrl-C cancels the request on the server."""
        return _sync.run(self.call_tool(name, dict(args) if args else None, timeout=timeout))

    def close_sync(self) -> None:
        """:meth:`close` for synchronous code (also called when a ``with`` block ends)."""
        _sync.run(self.close())

    def __enter__(self) -> McpClient:
        self.connect_sync()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close_sync()

    # -- internals ---------------------------------------------------------------------

    def _prefix(self, prefix: bool | str) -> str | None:
        if prefix is True:
            return self.server_name
        return prefix or None

    def _client_or_none(self) -> Client | None:
        conn = self._conn
        return conn.client if conn is not None else None

    def _require(self, what: str) -> Connection:
        conn = self._conn
        if conn is None or not conn.usable:
            raise self._not_usable(conn, None, what)
        if self._loop is not asyncio.get_running_loop():
            raise self._wrong_loop(what, None)
        return conn

    def _not_usable(
        self, conn: Connection | None, tool_name: str | None, what: str | None = None
    ) -> McpNotInitializedError:
        action = what or f"tools/call '{tool_name}'"
        if conn is not None and conn.state is State.LOST:
            policy = self.recovery
            gave_up = (
                f", and {self._restarts} restarts in a row failed"
                if policy is not None and policy.max_restarts and not self._can_restart()
                else ""
            )
            reason = (
                f"cannot send {action}: the connection was lost "
                f"({conn.lost_reason}){gave_up}; call connect() to start it again"
            )
        elif conn is not None and conn.state is State.STARTING:
            reason = f"cannot send {action}: still connecting"
        elif conn is not None and self._loop is not None and self._loop.is_closed():
            return self._wrong_loop(action, tool_name)
        else:
            reason = f"cannot send {action}: not connected; call connect() first"
        return McpNotInitializedError(self.server_name, reason, tool_name=tool_name)

    async def _translate(
        self,
        conn: Connection | None,
        exc: Exception,
        action: str,
        limit: float,
        tool_name: str | None,
    ) -> ToolError:
        """The :class:`ToolError` for a request that failed with ``exc``, sent with an
        :class:`HttpExchange` set in ``EXCHANGE`` (for HTTP status details)."""
        from ._recover import classify

        verdict = await classify(
            self, conn, exc, EXCHANGE.get(), action, limit, tool_name, time.monotonic()
        )
        return verdict.error

    def _safe_to_repeat(self, tool_name: str) -> bool:
        from ._recover import is_safe_to_repeat

        infos = self._tools or []
        return any(i.name == tool_name and is_safe_to_repeat(i.annotations) for i in infos)

    def _has_tools(self, conn: Connection) -> bool:
        client = conn.client
        return client is not None and client.server_capabilities.tools is not None

    def _invalidate_tools(self, reason: str | None) -> None:
        self._tools_generation += 1
        self._tools_fresh_until = -1.0
        if reason is not None:
            logger.info("MCP server '%s': %s; tool list cache cleared", self.server_name, reason)

    async def _fetch_tools(self, conn: Connection, *, recover: bool = False) -> list[McpToolInfo]:
        client = conn.client
        if client is None:
            raise self._not_usable(conn, None, "tools/list")
        generation = self._tools_generation
        started = time.monotonic()
        ttl = self.tools_ttl
        infos: list[McpToolInfo] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            exchange = HttpExchange() if conn.http else None
            token = EXCHANGE.set(exchange)
            try:
                page = await with_timeout(
                    client.list_tools(cursor=cursor), self._timeout + _BACKSTOP
                )
            except Exception as exc:
                if not recover:
                    raise await self._translate(
                        conn, exc, "tools/list", self._timeout, None
                    ) from exc
                from ._recover import send_again

                # A restart fetches the whole list itself (cursors need not survive it).
                async def fetch_again(new: Connection, remaining: float) -> list[McpToolInfo]:
                    if new is not conn:
                        return list(self._tools or [])
                    return await self._fetch_tools(conn)

                return await send_again(
                    self,
                    conn,
                    exc,
                    exchange,
                    action="tools/list",
                    tool_name=None,
                    limit=self._timeout,
                    started=started,
                    safe=lambda: True,
                    send=fetch_again,
                )
            finally:
                EXCHANGE.reset(token)
            infos.extend(_info(tool) for tool in page.tools)
            ttl = _shorter(ttl, _server_ttl(page))
            cursor = page.next_cursor
            if cursor is None:
                break
            if cursor in seen:
                raise McpError(self.server_name, f"tools/list repeated the cursor {cursor!r}")
            seen.add(cursor)
        else:
            raise McpError(self.server_name, f"tools/list returned more than {_MAX_PAGES} pages")
        self._tools = infos
        if generation == self._tools_generation:
            # A change notice that arrived during the fetch leaves the list stale.
            self._tools_fresh_until = started + ttl if ttl is not None else float("inf")
        return infos

    def _use_loop(self, action: str) -> None:
        """Make the running loop this client's, unless a live session belongs to another."""
        running = asyncio.get_running_loop()
        bound = self._loop
        if bound is running:
            return
        conn = self._conn
        if conn is not None and self._alive_elsewhere(conn):
            raise self._wrong_loop(action, None)
        if bound is not None:
            # A session of another loop has ended (with its loop, or on its own); the
            # locks may belong to that loop, so this one gets fresh ones.
            self._conn = None
            self._connect_lock = asyncio.Lock()
            self._tools_lock = asyncio.Lock()
        self._loop = running

    def _alive_elsewhere(self, conn: Connection) -> bool:
        bound = self._loop
        return (
            bound is not None
            and not bound.is_closed()
            and conn.state in (State.STARTING, State.READY)
        )

    def _wrong_loop(self, action: str, tool_name: str | None) -> McpNotInitializedError:
        bound = self._loop
        if bound is None or bound.is_closed():
            reason = (
                f"cannot send {action}: the connection was made in an event loop that has "
                "since ended (as with asyncio.run(client.connect())); connect again in this "
                "loop, or use connect_sync() and the *_sync methods, whose connection stays "
                "open on agcore_tools' own loop"
            )
        elif _sync.is_library_loop(bound):
            reason = (
                f"cannot send {action} from this event loop: the client was connected with "
                "connect_sync(), on agcore_tools' own loop, where its session must stay; use "
                "the *_sync methods"
            )
        else:
            reason = (
                f"cannot send {action} from this event loop: the client was connected in "
                "another one, where its session must stay (a *_sync method runs on "
                "agcore_tools' own loop); await it in that loop, or close() it there first"
            )
        return McpNotInitializedError(self.server_name, reason, tool_name=tool_name)

    def __repr__(self) -> str:
        state = "connected" if self.connected else "not connected"
        return f"<McpClient {self.server_name!r} {self.transport.describe()} {state}>"


def _check_timeout(server_name: str, value: float) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not seconds > 0:
        raise ToolConfigError(
            f"MCP server '{server_name}': timeout must be a positive number of seconds"
        )
    return seconds


def _server_ttl(page: ListToolsResult) -> float | None:
    # Only 2026-07-28 sessions carry ttlMs; the SDK strips it from older ones, so a
    # field never set on the model means "no hint".
    if "ttl_ms" not in page.model_fields_set:
        return None
    return page.ttl_ms / 1000.0


def _shorter(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def _info(tool: Any) -> McpToolInfo:
    annotations = (
        tool.annotations.model_dump(by_alias=True, mode="json", exclude_none=True)
        if tool.annotations is not None
        else {}
    )
    return McpToolInfo(
        name=tool.name,
        description=tool.description or "",
        input_schema=tool.input_schema,
        output_schema=tool.output_schema,
        annotations=annotations,
        title=tool.title,
        task_support=tool.execution.task_support if tool.execution is not None else None,
    )


def _definition(info: McpToolInfo) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": info.name,
            "description": info.description,
            "parameters": dict(info.input_schema),
        },
    }
