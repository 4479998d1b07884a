"""The MCP client users hold: connect to one server, list and call its tools, bridge them
into a :class:`~agcore_tools.ToolRegistry`, and reach the rest of the protocol (resources,
prompts, completion, ping, log level, roots).

The protocol itself (JSON-RPC, version negotiation, server-to-client requests) is the
official MCP SDK's. :class:`McpClient` is a façade over the parts that add to it, each
in its own module: the session (``_session``: the connection, its event loop, restarts
and sending), the tool cache (``_tools``: listing), error translation into
:class:`~agcore_tools.ToolError` subclasses (``_recover``), the registry adapters
(``_adapter``, ``_protocol_tools``), and the requests beyond tools (``_resources``,
``_prompts``, ``_utilities``).

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

from collections.abc import Awaitable, Callable, Collection, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import Self, deprecated

from .. import _otel
from .._deprecated import renamed
from ..base import BaseTool
from ..error import McpNotInitializedError, ToolConfigError
from . import _prompts, _protocol_tools, _resources, _task_start, _utilities, models
from ._adapter import make_adapters
from ._requests import offers
from ._session import Session, check_timeout
from ._sync_api import SyncClientMethods
from ._tasks import McpTask
from ._tools import ToolCache, check_arguments, check_ttl, definition
from ._trace import traced_call_tool
from ._utilities import check_log_level
from .models import McpLogMessage, McpProgress, McpToolInfo
from .policy import McpPermissionPolicy, PermissionPolicy
from .recovery import McpRecovery
from .transport import StdioTransport, StreamableHttpTransport

if TYPE_CHECKING:
    from mcp.client.session import ElicitationFnT, ListRootsFnT, SamplingFnT

__all__ = ["McpClient"]

LogCallback = Callable[[McpLogMessage], "Awaitable[None] | None"]
"""Receives each log message a server sends."""
ProgressCallback = Callable[[McpProgress], "Awaitable[None] | None"]
"""Receives each progress update of a tool call."""


class McpClient(SyncClientMethods):
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
    until ``connect()``. A connected client garbage-collected without :meth:`close`
    stops its server, with a ``ResourceWarning``; the adapters of :meth:`into_tools`
    keep their client, so registered tools never lose theirs.

    Server-to-client requests: ``ping`` is answered. Sampling and roots are advertised
    only with a handler, then routed to it (the SDK's callback signatures and types);
    elicitation always is, declined (and logged) without a handler. Log messages go to the
    ``agcore_tools.mcp.server`` logger and ``on_log``; progress updates to the
    ``agcore_tools.mcp.progress`` logger (DEBUG) and ``on_progress``.

    Synchronous code uses :meth:`connect_sync`, :meth:`definitions_sync`,
    :meth:`call_tool_sync` and :meth:`close_sync`, or ``with McpClient(...) as client:``.
    They run on agcore_tools' own event loop, where the session then lives, so it stays
    open from one sync call to the next. An MCP session belongs to the event loop that
    connected it: a call from another loop is refused with an
    :class:`~agcore_tools.McpNotInitializedError` that says so.

    Example:
        >>> client = McpClient("demo", StdioTransport("python", ["examples/mcp_server.py"]))
        >>> client.timeout = 10
        >>> client.timeout
        10.0
        >>> client.connected
        False

        Connected to the bundled example server (run from the repository's root):

        >>> import asyncio, sys
        >>> async def main() -> None:
        ...     demo = McpClient("demo", StdioTransport(sys.executable, ["examples/mcp_server.py"]))
        ...     await demo.connect()
        ...     try:
        ...         print(demo.connected, demo.protocol_version is not None, demo.pid is not None)
        ...         print(demo.server_info["name"], repr(demo.stderr_tail))
        ...         print([tool["function"]["name"] for tool in await demo.definitions()])
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
        >>> [tool["function"]["name"] for tool in demo.definitions_sync()][1]
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
        tasks: bool = False,
    ) -> None:
        """Describe the client; nothing starts until :meth:`connect`.

        Args:
            server_name: Names the server in messages, logs and prefixed tool names.
            transport: A :class:`StdioTransport` or a :class:`StreamableHttpTransport`.
            timeout: Seconds for start-up and for each request.
            tools_ttl: Seconds (0 or more) a tool list stays cached; None keeps it
                until the server says it changed or :meth:`refresh_tools` is called. A
                server's own ``ttlMs`` (2026-07-28) shortens it.
            permission_policy: Maps each tool to the permissions its adapter requires;
                default :class:`McpPermissionPolicy` (see its table).
            sampling_handler: Answers ``sampling/createMessage``; advertised only if given.
            elicitation_handler: Answers ``elicitation/create``; without one, declines.
                A sampling or elicitation handler that raises is logged (its exception
                type) and the server told only that it failed, never the error's text.
            roots_handler: Answers ``roots/list``; advertised only if given.
            on_log: Called with each :class:`McpLogMessage` (sync or async).
            on_progress: Called with each :class:`McpProgress` of a tool call.
            log_level: The lowest level of log messages to ask 2026-07-28 servers for,
                one of MCP's (``"debug"`` to ``"emergency"``, in any case: ``"WARNING"``
                is taken as ``"warning"``), or None to ask for none; older servers
                choose themselves.
            protocol: ``"auto"`` tries 2026-07-28 first; ``"legacy"`` goes straight to
                the ``initialize`` handshake, saving a round trip with older servers.
            recovery: Restarts after a lost connection or session, and the optional
                liveness ping (:class:`McpRecovery`); None turns both off.
            tasks: Opt into the 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``),
                which :meth:`start_task` needs on that protocol. The opt-in goes with
                every request of the session, so the server may then run any call of a
                tool that supports tasks as one; :meth:`call_tool` polls such a task to
                its end and returns its value as usual. Off, plain calls pay nothing for
                tasks. 2025-11-25 tasks need no opt-in (each request asks for its own).
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
        self._timeout = check_timeout(server_name, timeout)
        self.tools_ttl = check_ttl(server_name, tools_ttl)
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
        self.log_level = check_log_level(server_name, log_level)
        """The log level requested from 2026-07-28 servers."""
        self.protocol = protocol
        """``"auto"`` or ``"legacy"``."""
        self.recovery = recovery
        """How lost connections are restarted (None: never)."""
        self.tasks = bool(tasks)
        """Whether 2026-07-28 sessions opt into the tasks extension (read at connect)."""
        self._session = Session(self)
        self._tool_cache = ToolCache(self._session)
        self._session.tools = self._tool_cache

    # -- configuration ----------------------------------------------------------------

    @property
    def timeout(self) -> float:
        """Seconds allowed for start-up and for each request; settable.

        Example:
            >>> client = McpClient("x", StdioTransport("server"))
            >>> client.timeout = 5
            >>> client.timeout
            5.0
        """
        return self._timeout

    @timeout.setter
    def timeout(self, timeout: float) -> None:
        self._timeout = check_timeout(self.server_name, timeout)

    @deprecated(
        "McpClient.with_timeout() is deprecated; use McpClient.timeout = ... (a settable property)",
        category=None,
    )
    def with_timeout(self, secs: float) -> McpClient:
        """Deprecated: set :attr:`timeout` instead (``client.timeout = 5``); this sets it
        too, and returns this same client (not a copy).

        Example:
            >>> import warnings
            >>> with warnings.catch_warnings(record=True) as caught:
            ...     warnings.simplefilter("always")
            ...     client = McpClient("x", StdioTransport("server")).with_timeout(5)
            >>> client.timeout, caught[0].category.__name__
            (5.0, 'DeprecationWarning')
        """
        renamed("McpClient.with_timeout()", "McpClient.timeout = ... (a settable property)")
        self.timeout = secs
        return self

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """True while the client can send requests (False before connect, after close or
        once the server is gone)."""
        return self._session.connected

    @property
    def circuit(self) -> Literal["closed", "open", "half-open"]:
        """The restart circuit (see :class:`McpRecovery`): ``"closed"`` while requests
        are sent, or a lost connection will be restarted by the next one; ``"open"``
        while the connection is lost and its restarts are spent for now (or
        ``recovery=None``): requests fail at once; ``"half-open"`` once the wait is
        over: the next request tries one restart.

        Example:
            >>> McpClient("x", StdioTransport("server")).circuit
            'closed'
        """
        return self._session.circuit

    @property
    def protocol_version(self) -> str | None:
        """The protocol version the SDK negotiated, while connected."""
        client = self._session.client
        return client.protocol_version if client is not None else None

    @property
    def server_info(self) -> dict[str, Any] | None:
        """The server's name and version as it reports them, while connected."""
        client = self._session.client
        info = client.server_info if client is not None else None
        return info.model_dump(mode="json", exclude_none=True) if info is not None else None

    @property
    def notification_stream(self) -> Literal["open", "lost", "none"] | None:
        """The stream the server's notifications (``tools/list_changed``) arrive on.

        ``"open"``; ``"lost"`` while the client opens it again (with a pause that grows
        up to 30 s while that fails; each tool list read meanwhile lists the tools
        afresh, as a change may go unheard); ``"none"`` if the server offers no such
        stream (tool lists are then refreshed by ``tools_ttl`` or :meth:`refresh_tools`);
        None while not connected. Over stdio, it is the connection itself. A WARNING is
        logged when it is lost, an INFO line when it is back.

        Example:
            >>> McpClient("x", StdioTransport("server")).notification_stream is None
            True
        """
        conn = self._session.conn
        return conn.stream.state if conn is not None and conn.usable else None

    @property
    def pid(self) -> int | None:
        """The stdio server's process id (also its process group id), once started."""
        conn = self._session.conn
        return conn.child.pid if conn is not None and conn.child is not None else None

    @property
    def stderr_tail(self) -> str:
        """The last lines the stdio server wrote to stderr ("" if none); after a failed
        ``connect()``, those of the server that failed. The transport's ``env`` values
        and the arguments its ``describe()`` hides (8 characters or more) are shown as
        ``***``."""
        conn = self._session.conn or self._session.failed
        return conn.child.stderr.tail() if conn is not None and conn.child is not None else ""

    async def connect(self) -> None:
        """Start the server (stdio) or reach it (HTTP), and negotiate the protocol.

        Does nothing when already connected; after the server was lost, starts a new
        connection. Raises an :class:`~agcore_tools.McpError` subclass within
        :attr:`timeout` when the command is missing, the server exits during start-up
        or never answers; the server's stderr tail is in the message.

        Example:
            >>> import asyncio, sys
            >>> from agcore_tools import McpError
            >>> crash = "import sys; sys.exit('config.toml not found')"
            >>> broken = McpClient("broken", StdioTransport(sys.executable, ["-c", crash]))
            >>> try:
            ...     asyncio.run(broken.connect())
            ... except McpError as exc:
            ...     print(exc)  # doctest: +ELLIPSIS
            MCP server 'broken': ... exited with code 1 during start-up; stderr: config.toml not found
        """
        await self._session.connect()

    async def close(self) -> None:
        """Close the session and stop the server; idempotent.

        A stdio server has its stdin closed, then gets SIGTERM, then SIGKILL; then any
        process left in its process group gets the same. In a process forked after the
        client connected, it only forgets the connection, which stays the parent's.
        """
        await self._session.close()

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- tools (listed by the tool cache in _tools) -------------------------------------

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
        return make_adapters(self, infos, self._prefix(prefix), chosen, tasks, task_wait)

    # -- resources, prompts, completion, utilities (in _resources, _prompts, _utilities) --

    @property
    def instructions(self) -> str | None:
        """The server's instructions for using it (for a system prompt), while connected."""
        client = self._session.client
        return client.instructions if client is not None else None

    async def list_resources(self) -> list[models.McpResourceInfo]:
        """The server's resources, every page followed (fetched on each call)."""
        return await _resources.list_resources(self._session)

    async def list_resource_templates(self) -> list[models.McpResourceTemplateInfo]:
        """The server's resource templates (URI patterns), every page followed."""
        return await _resources.list_resource_templates(self._session)

    async def read_resource(self, uri: str) -> list[models.McpResourceContents]:
        """The parts (text or blob) of the resource at ``uri``; fails like :meth:`call_tool`."""
        return await _resources.read_resource(self._session, uri)

    def subscribe_resource(self, uri: str) -> _resources.McpResourceSubscription:
        """Updates of the resource at ``uri``: ``async with`` it, then iterate it.

        Example:
            >>> async def watch(client: McpClient) -> None:
            ...     async with client.subscribe_resource("file:///todo.txt") as updates:
            ...         async for uri in updates:  # each time the server says it changed
            ...             print((await client.read_resource(uri))[0].text)
        """
        return _resources.McpResourceSubscription(self, uri, self._session)

    async def list_prompts(self) -> list[models.McpPromptInfo]:
        """The server's prompts, every page followed."""
        return await _prompts.list_prompts(self._session)

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> models.McpPrompt:
        """The prompt ``name``, filled in by the server with ``arguments``."""
        return await _prompts.get_prompt(self._session, name, arguments)

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
        return await _prompts.complete(
            self._session, argument, value, prompt, resource_template, context
        )

    async def ping(self) -> float:
        """Seconds for one round trip (``server/discover`` on 2026-07-28, which has no ping)."""
        return await _utilities.ping(self._session)

    async def set_log_level(self, level: str) -> None:
        """Ask for server log messages at ``level`` and above (``logging/setLevel``; on
        2026-07-28, sent with each later request). Later connections use it too.

        Example:
            >>> async def quiet(client: McpClient) -> None:
            ...     await client.set_log_level("error")
        """
        await _utilities.set_log_level(self._session, level)

    async def notify_roots_changed(self) -> bool:
        """Tell the server ``roots_handler`` now answers differently; False when there is
        nothing to send (2026-07-28 servers ask for the roots each time).

        Example:
            >>> async def moved(client: McpClient) -> None:
            ...     await client.notify_roots_changed()
        """
        return await _utilities.notify_roots_changed(self._session)

    def resource_reader_tool(
        self, *, prefix: bool | str = False, policy: PermissionPolicy | None = None
    ) -> BaseTool:
        """A ``read_resource`` tool, so a model can read resources, such as the
        ``resource_link`` parts tools return (``prefix``, ``policy`` as for :meth:`into_tools`).
        Made for a connected server that offers no resources, it logs a warning."""
        return _protocol_tools.resource_reader_tool(
            self,
            self._prefix(prefix),
            policy or self.permission_policy,
            offered=offers(self._session, "resources"),
        )

    def prompt_tool(
        self, *, prefix: bool | str = False, policy: PermissionPolicy | None = None
    ) -> BaseTool:
        """A ``get_prompt`` tool, so a model can get the server's prompts (``prefix``,
        ``policy`` as for :meth:`into_tools`). Made for a connected server that offers
        no prompts, it logs a warning."""
        return _protocol_tools.prompt_tool(
            self,
            self._prefix(prefix),
            policy or self.permission_policy,
            offered=offers(self._session, "prompts"),
        )

    # -- internals ---------------------------------------------------------------------

    def _prefix(self, prefix: bool | str) -> str | None:
        if prefix is True:
            return self.server_name
        return prefix or None

    @property
    def _tools(self) -> list[McpToolInfo] | None:
        # The cached tool list, as tests that fake a listing set it.
        return self._tool_cache.infos

    @_tools.setter
    def _tools(self, infos: list[McpToolInfo] | None) -> None:
        self._tool_cache.infos = infos

    def _invalidate_tools(self, reason: str | None) -> None:
        self._tool_cache.invalidate(reason)

    def __repr__(self) -> str:
        state = "connected" if self.connected else "not connected"
        return f"<McpClient {self.server_name!r} {self.transport.describe()} {state}>"
