"""The MCP client users hold: connect to one server, list and call its tools, bridge them
into a :class:`~agcore_tools.ToolRegistry`, and reach the rest of the protocol (resources,
prompts, completion, ping, log level, roots).

The protocol itself (JSON-RPC, version negotiation, server-to-client requests) is the
official MCP SDK's. :class:`McpClient` is a façade over the parts that add to it, each
in its own module: the session (``_session``: the connection, its event loop, restarts;
``_sending``: sending requests), the tool cache (``_tools``: listing), error translation into
:class:`~agcore_tools.ToolError` subclasses (``_recover``), the registry adapters
(``_adapter``, ``_protocol_tools``), and the requests beyond tools (``_resources``,
``_prompts``, ``_utilities``). This module holds the client's settings and lifecycle;
its methods are in mixins by job: the tool surface (``_tools_api``), the requests
beyond tools (``_protocol_api``) and the synchronous entry points (``_sync_api``).

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

import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import Self, deprecated

from .._deprecated import renamed
from .._keywords import checks_public_keywords
from ..error import ToolConfigError
from ._callbacks import check_callback
from ._protocol import is_modern
from ._protocol_api import ProtocolClientMethods
from ._session import Session, check_timeout
from ._sync_api import SyncClientMethods
from ._tools import ToolCache, check_ttl
from ._tools_api import ToolClientMethods
from ._utilities import check_log_level
from .models import McpLogMessage, McpProgress
from .policy import PermissionPolicy, check_permission_policy
from .recovery import McpRecovery
from .transport import StdioTransport, StreamableHttpTransport

if TYPE_CHECKING:
    from mcp.client.session import ElicitationFnT, ListRootsFnT, SamplingFnT

__all__ = ["McpClient"]

logger = logging.getLogger("agcore_tools.mcp")

LogCallback = Callable[[McpLogMessage], "Awaitable[None] | None"]
"""Receives each log message a server sends."""
ProgressCallback = Callable[[McpProgress], "Awaitable[None] | None"]
"""Receives each progress update of a tool call."""


@checks_public_keywords
class McpClient(ToolClientMethods, ProtocolClientMethods, SyncClientMethods):
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
    only with a handler, then routed to it (the SDK's callback signatures and types; a
    sync handler runs in a worker thread; one that has not answered within
    :attr:`timeout`, or the deadline of a later call in flight, is given up on, and the
    server told so); elicitation always is, declined (and logged) without a handler. Log messages go to the
    ``agcore_tools.mcp.server`` logger and ``on_log``; progress updates to the
    ``agcore_tools.mcp.progress`` logger (DEBUG) and ``on_progress``.

    Synchronous code uses :meth:`connect_sync`, :meth:`definitions_sync`,
    :meth:`call_tool_sync` and :meth:`close_sync`, or ``with McpClient(...) as client:``.
    They run on agcore_tools' own event loop, where the session then lives, so it stays
    open from one sync call to the next. An MCP session belongs to the event loop that
    connected it: a call from another loop is refused with an
    :class:`~agcore_tools.McpNotInitializedError` that says so.

    A keyword a method does not take (``call_tool(..., timout=5)``) raises a
    :class:`~agcore_tools.ToolConfigError` that is also a ``TypeError``, naming the
    keyword meant, before anything is sent.

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
            timeout: Seconds for start-up (``connect()`` as a whole) and for each request.
            tools_ttl: Seconds (0 or more) a tool list stays cached; None keeps it
                until the server says it changed or :meth:`refresh_tools` is called. A
                server's own ``ttlMs`` (2026-07-28) shortens it.
            permission_policy: Maps each tool to the permissions its adapter requires;
                default :class:`McpPermissionPolicy` (see its table).
            sampling_handler: Answers ``sampling/createMessage``; advertised only if given.
            elicitation_handler: Answers ``elicitation/create``; without one, declines.
            roots_handler: Answers ``roots/list``; advertised only if given. Each
                handler may be sync or async: a sync one runs in a worker thread, off
                the event loop, as a sync tool does. One that raises is logged (its
                exception type) and the server told only that it failed, never the
                error's text; one that has not answered within ``timeout`` (or a
                later call's deadline) is given up on, its thread left to run on.
            on_log: Called with each :class:`McpLogMessage` (sync or async).
            on_progress: Called with each :class:`McpProgress` of a tool call.
            log_level: The lowest level of log messages to ask 2026-07-28 servers for,
                one of MCP's (``"debug"`` to ``"emergency"``, in any case: ``"WARNING"``
                is taken as ``"warning"``), or None to ask for none; older servers
                choose themselves.
            protocol: ``"auto"`` tries 2026-07-28 first (and connects again with the
                ``initialize`` handshake when the server then refuses requests for want
                of it); ``"legacy"`` goes straight to the handshake, saving a round trip
                with older servers.
            recovery: Restarts after a lost connection or session, and the optional
                liveness ping (:class:`McpRecovery`); None turns both off.
            tasks: Opt into the 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``),
                which :meth:`start_task` needs on that protocol. The opt-in goes with
                every request of the session, so the server may then run any call of a
                tool that supports tasks as one; :meth:`call_tool` polls such a task to
                its end and returns its value as usual (cut short by its timeout or
                cancelled, it cancels the task: ``tasks/cancel``, best effort). Off,
                plain calls pay nothing for tasks. 2025-11-25 tasks need no opt-in
                (each request asks for its own).

        A setting of the wrong kind (a callback or handler that is no function, a
        :class:`~agcore_tools.PermissionConfig` as ``permission_policy``, ``tasks`` that
        is not a bool...) is refused here with a :class:`~agcore_tools.ToolConfigError`,
        and a misspelt keyword with the library's error for it (a ``TypeError`` too),
        naming the keyword meant.
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
        if not isinstance(tasks, bool):  # "no" would be read as True
            raise ToolConfigError(
                f"MCP server '{server_name}': tasks must be True or False, got "
                f"{type(tasks).__name__} {tasks!r:.40}"
            )
        policy = check_permission_policy(server_name, permission_policy)
        for what, callback in (
            ("sampling_handler", sampling_handler),
            ("elicitation_handler", elicitation_handler),
            ("roots_handler", roots_handler),
            ("on_log", on_log),
            ("on_progress", on_progress),
        ):
            check_callback(server_name, what, callback)
        self.server_name = server_name
        """The name given at construction."""
        self.transport = transport
        """How the server is reached."""
        self._timeout = check_timeout(server_name, timeout)
        self.tools_ttl = check_ttl(server_name, tools_ttl)
        """Seconds a fetched tool list stays fresh (None: until invalidated)."""
        self.permission_policy: PermissionPolicy = policy
        """Decides each adapter's ``required_permissions``."""
        self._sampling_handler = sampling_handler
        self._elicitation_handler = elicitation_handler
        self._roots_handler = roots_handler
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
        self.tasks = tasks
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

    @property
    def sampling_handler(self) -> SamplingFnT | None:
        """Answers ``sampling/createMessage``, or None; settable. Sampling is advertised
        when connecting, and only if there is one then: one set while connected
        without one takes effect at the next connection (with a WARNING saying so);
        one replacing another answers the next request.

        Example:
            >>> client = McpClient("x", StdioTransport("server"))
            >>> def model(context, params): ...
            >>> client.sampling_handler = model
            >>> client.sampling_handler is model
            True
        """
        return self._sampling_handler

    @sampling_handler.setter
    def sampling_handler(self, handler: SamplingFnT | None) -> None:
        self._sampling_handler = self._new_handler("sampling_handler", handler)

    @property
    def elicitation_handler(self) -> ElicitationFnT | None:
        """Answers ``elicitation/create``, or None (a question pauses a call the loop
        made, any other is declined); settable, taking effect at the next request.

        Example:
            >>> client = McpClient("x", StdioTransport("server"))
            >>> def person(context, params): ...
            >>> client.elicitation_handler = person
            >>> client.elicitation_handler = None  # questions pause a loop's call again
        """
        return self._elicitation_handler

    @elicitation_handler.setter
    def elicitation_handler(self, handler: ElicitationFnT | None) -> None:
        self._elicitation_handler = self._new_handler("elicitation_handler", handler)

    @property
    def roots_handler(self) -> ListRootsFnT | None:
        """Answers ``roots/list``, or None; settable, as :attr:`sampling_handler` is
        (roots are advertised when connecting, only if there is one then).

        Example:
            >>> client = McpClient("x", StdioTransport("server"))
            >>> def roots(context): ...
            >>> client.roots_handler = roots
            >>> client.roots_handler is roots
            True
        """
        return self._roots_handler

    @roots_handler.setter
    def roots_handler(self, handler: ListRootsFnT | None) -> None:
        self._roots_handler = self._new_handler("roots_handler", handler)

    def _new_handler(self, what: str, handler: Any) -> Any:
        """``handler``, once checked; a WARNING when the server, told when connecting
        that the client has no such handler, will not ask it before the next connection."""
        check_callback(self.server_name, what, handler)
        conn = self._session.conn
        # Elicitation is always advertised: conn.answers has it.
        if handler is not None and conn is not None and conn.usable and what not in conn.answers:
            logger.warning(
                "MCP server '%s': %s set while connected without one; the server was "
                "told when connecting that this client answers no %s, so it takes "
                "effect at the next connection (close() and connect())",
                self.server_name,
                what,
                "sampling/createMessage" if what == "sampling_handler" else "roots/list",
            )
        return handler

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
        """The server's name and version as it reports them, while connected.

        On 2026-07-28 from the ``server/discover`` answer's ``_meta``, or else from its
        top-level ``serverInfo`` (the C# SDK's servers send it there)."""
        conn = self._session.conn
        client = conn.client if conn is not None else None
        if conn is None or client is None:
            return None
        info = client.server_info
        if info is not None:
            return info.model_dump(mode="json", exclude_none=True)
        return conn.discovered.server_info if is_modern(client) else None

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
        """The first 10 and the last 20 lines the stdio server wrote to stderr ("" if
        none), with the count of those between and the last of them that looks like an
        error (``Error: ...``); after a failed ``connect()``, those of the server that
        failed. For a server that refused the ``server/discover`` probe and then took
        the handshake, the report it wrote for the probe (an MCP Python SDK 1.x server
        logs a long validation error, naming ``server/discover``) is only counted, from
        its first line to the handshake; the lines before it are kept. The transport's
        ``env`` values (but a plain file path, and of a URL only its secrets, unless
        the variable's name marks a secret) and the arguments its ``describe()`` hides
        (8 characters or more) are shown as ``***``."""
        conn = self._session.conn or self._session.failed
        return conn.child.stderr.tail() if conn is not None and conn.child is not None else ""

    @property
    def sent_credentials(self) -> frozenset[str]:
        """The credentials the HTTP requests of this client carried, whatever put them
        there (a header named for a secret, the token of an ``auth=`` flow, a header your
        ``http_client_factory``'s client adds), each with the token after its scheme:
        what the client masks as ``***`` in what the server sends back, as it does its
        transport's secrets, and what a :class:`~agcore_tools.testing.Cassette` scrubs
        from its file. The last 64 distinct values (one sent again counts as recent
        again), not all: an auth that signs each request sends a new one every time.
        Empty over stdio.

        Example:
            >>> McpClient("web", StreamableHttpTransport("https://x/mcp")).sent_credentials
            frozenset()
        """
        return self._session.secrets.carried()

    async def connect(self) -> None:
        """Start the server (stdio) or reach it (HTTP), and negotiate the protocol.

        Does nothing when already connected; after the server was lost, starts a new
        connection. Raises an :class:`~agcore_tools.McpError` subclass within
        :attr:`timeout` when the command is missing, the server exits during start-up
        or never answers; the server's stderr tail is in the message. The whole of it
        keeps to :attr:`timeout`: the ``tools/list`` it sends once connected, and a
        second connection with the ``initialize`` handshake when the server wants one
        (see ``docs/guides/mcp.md``), count against it too; stopping what a start that
        timed out started comes on top, and the first connect of a process imports
        the MCP SDK first, outside it.

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

    def __repr__(self) -> str:
        state = "connected" if self.connected else "not connected"
        return f"<McpClient {self.server_name!r} {self.transport.describe()} {state}>"
