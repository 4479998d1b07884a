"""MCP tools as :class:`~agcore_tools.BaseTool` adapters, for a :class:`~agcore_tools.ToolRegistry`.

Names: the server's by default; with a prefix, ``prefix__tool``. Either way, accents
are dropped (``löschen`` is ``loschen``), other characters outside ``[a-zA-Z0-9_-]``
become ``_``, and a name longer than 64 characters, or one that lost letters (a name
in Chinese), keeps its first 55 and gets ``_`` plus 8 hex digits of a hash of the full
name, so such names stay distinct whatever other tools the server lists. Two
tools that still end up with the same name fail loudly. A tool whose registry name no
longer reads as the server's (a name in Chinese, a long one) has the server's name
noted at the start of its description.
"""

from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Protocol, cast

from .._names import registered_name, server_prefix, with_digest, with_original_name
from .._ranking import words
from .._returns import UNWRAPS, wraps_plain_value
from ..base import BaseTool, ToolContext
from ..error import McpError, ToolConfigError, ToolError
from ..pending import KEEPER, LEFT_RUNNING, CallPaused
from ..permission import Permission
from ..schema import mend_unambiguous
from ..schema._jsonschema import resolve_ref
from ..schema._validate import check_with, larger_than, schema_check
from ._input_pause import ROUND, InputRound, LiveQuestion, ServerQuestion, new_nonce, responses
from ._progress import CALL_KEY, CALLER
from ._results import CONTENT_FOR_MODEL, READ_BY_MODEL
from ._task_call import TaskCaller, paused_on, run_task
from .models import McpToolInfo
from .policy import PermissionPolicy

__all__ = [
    "McpTool",
    "ToolCaller",
    "adapter_name",
    "adapter_names",
    "make_adapters",
    "prefix_for",
]

logger = logging.getLogger("agcore_tools.mcp")

_CHECKED_ON_THE_LOOP = 1000
"""Values (in lists and maps, all levels) of arguments checked on the event loop at most,
a few ms; larger arguments are checked in a worker thread."""
_COMBINATORS = ("anyOf", "oneOf", "allOf", "$ref")


_RESUMES: ContextVar[dict[tuple[int, str], Mapping[str, Any]] | None] = ContextVar(
    "agcore_mcp_resumes", default=None
)
"""The resumes handed to tools in this context (a run's task, and the tasks it starts
afterwards), by (tool, call id). Not kept on the tool: one tool serves every
conversation sharing its registry, and call ids repeat across them (generated ones are
``call_0_0`` in each), so one conversation's answers could reach another's call."""


class ToolCaller(Protocol):
    """What an adapter needs of its client (:class:`~agcore_tools.McpClient` is one)."""

    @property
    def server_name(self) -> str:
        """Names the server in messages and categories."""
        ...

    async def call_tool(
        self, name: str, args: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> Any:
        """Call the tool ``name`` on the server and return its value."""
        ...


def prefix_for(server_name: str, prefix: bool | str) -> str | None:
    """The prefix of a client's adapter names: ``prefix=True`` is the server's name, a
    string itself, and False (or ``""``) none. A name or a string that would lose its
    letters once made valid gets a stable ASCII one instead (see
    :func:`~agcore_tools._names.server_prefix`).

    Example:
        >>> prefix_for("fs", True), prefix_for("fs", "files"), prefix_for("fs", False)
        ('fs', 'files', None)
        >>> prefix_for("数据库", True), prefix_for("fs", "数据库")
        ('mcp_263200d7', 'mcp_263200d7')
    """
    if prefix is True:
        return server_prefix(server_name)
    return server_prefix(prefix) if prefix else None


def adapter_name(tool_name: str, prefix: str | None = None) -> str:
    """The registry name of an MCP tool (:func:`~agcore_tools._names.registered_name`).

    Example:
        >>> adapter_name("read_file", "fs")
        'fs__read_file'
        >>> adapter_name("files.read")
        'files_read'
        >>> adapter_name("löschen", "de")
        'de__loschen'
        >>> len(adapter_name("x" * 80, "server"))
        64
    """
    return registered_name(tool_name, prefix)


def adapter_names(tool_names: Sequence[str], prefix: str | None, server: str) -> list[str]:
    """The registry names of one server's tools (see :func:`adapter_name`), distinct.

    Two names can come out the same once made valid: ``files.read`` and ``files_read``,
    or ``löschen`` and ``loschen`` (names that lost letters have a digest already, see
    :func:`~agcore_tools._names.registered_name`). Then each one that had
    to change gets a digest of its own name, so each keeps its name from one listing
    to the next whatever the order; a name that needed no change keeps it as it is. A
    name the server lists twice raises :class:`ToolConfigError`.

    Example:
        >>> adapter_names(["files.read", "files_read"], None, "fs")
        ['files_read_601e4eb6', 'files_read']
    """
    names = [adapter_name(tool, prefix) for tool in tool_names]
    clashing = {name for name, count in Counter(names).items() if count > 1}
    distinct = []
    for tool, name in zip(tool_names, names, strict=True):
        full = f"{prefix}__{tool}" if prefix else tool
        if name in clashing and name != full:
            distinct.append(with_digest(name, full))
        else:
            distinct.append(name)
    counts = Counter(distinct)
    for tool, plain, name in zip(tool_names, names, distinct, strict=True):
        if counts[name] > 1:
            raise ToolConfigError(
                f"MCP server '{server}' lists the tool {tool!r} more than once", tool_name=name
            )
        if name != plain:
            logger.info(
                "MCP server '%s': tool %r is registered as %r: another tool's name is %r "
                "once made valid",
                server,
                tool,
                name,
                plain,
            )
    return distinct


def wire_parameters(server: str, info: McpToolInfo) -> dict[str, Any]:
    """The tool's input schema as the model's API will take it: as the server wrote it,
    but with the faults that have one meaning mended (see
    :func:`~agcore_tools.schema.mend_unambiguous`), a root that is only a ``$ref`` to
    a local object definition given that definition's body (its ``$defs`` stay, for the
    other references), an absent root ``type`` read as ``object`` (MCP's input schemas
    are objects), and ``properties`` given to a root that has none. OpenAI refuses a
    request over any one of these ("schema must be a JSON Schema of 'type:
    "object"'"). What was mended is logged at INFO.

    Example:
        >>> wire_parameters("php", McpToolInfo("ping", "", {"properties": []}))
        {'properties': {}, 'type': 'object'}
        >>> wire_parameters("go", McpToolInfo("find", "", {
        ...     "$ref": "#/$defs/Args", "$defs": {"Args": {"type": "object"}}}))
        {'$defs': {'Args': {'type': 'object'}}, 'type': 'object', 'properties': {}}
    """
    parameters, mended = mend_unambiguous(info.input_schema)
    ref = parameters.get("$ref")
    target = resolve_ref(parameters, ref) if isinstance(ref, str) else None
    if "type" not in parameters and target is not None and target.get("type") == "object":
        # Go's invopop/jsonschema and zod-to-json-schema with a `name` write the root so.
        rest = {k: v for k, v in parameters.items() if k != "$ref"}
        body = {k: v for k, v in target.items() if k not in rest}
        parameters = rest | copy.deepcopy(body)  # the definition stays for other refs
        mended.append(f"root $ref {ref!r} inlined")
    if "type" not in parameters and not any(k in parameters for k in _COMBINATORS):
        parameters["type"] = "object"
        mended.append("'type' absent, read as object")
    if parameters.get("type") == "object" and "properties" not in parameters:
        parameters["properties"] = {}
    if mended:
        logger.info(
            "MCP server '%s', tool %r: input schema mended: %s",
            server,
            info.name,
            "; ".join(mended),
        )
    return parameters


class McpTool(BaseTool):
    """A :class:`BaseTool` whose execution is a ``tools/call`` on an :class:`McpClient`.

    Its ``required_permissions`` come from the client's permission policy; the server's
    own description and input schema are passed to the model as the server wrote them
    (only faults with one meaning mended: :func:`wire_parameters`), unless the registry
    has schema transforms (``ToolRegistry(schema_transforms=...)``). When ``name`` no
    longer reads as the server's name (a name in Chinese is all ``_`` and a digest),
    the description starts with a note of the server's name, which the model reads and
    tool search indexes (``[MCP name: 查询天气]``). Its errors name it by its registry
    name.
    :meth:`McpClient.into_tools` makes them.

    Example:
        >>> import asyncio
        >>> from agcore_tools import McpClient, StdioTransport, ToolContext
        >>> client = McpClient("demo", StdioTransport("server"))
        >>> info = McpToolInfo("read_file", "Read a file.", annotations={"readOnlyHint": True})
        >>> adapter = McpTool(client, info, adapter_name(info.name, "demo"), [Permission.READ])
        >>> adapter.name, adapter.category, adapter.required_permissions
        ('demo__read_file', 'mcp:demo', (Permission.READ,))
        >>> adapter.resume_next("c1", {"state": {"keys": {"c1~q": "q"}, "request_state": "s"},
        ...     "answers": {"c1~q": {"action": "decline", "content": None}}})  # the loop does this
        >>> adapter.stopped("c1") is None  # no task of call c1 left running
        True
        >>> asyncio.run(adapter.execute({"path": "a.txt"}, ToolContext()))
        Traceback (most recent call last):
        ...
        agcore_tools.error.McpNotInitializedError: MCP server 'demo': cannot send tools/call for tool 'demo__read_file': not connected; call connect() first; the call was not run
    """

    def __init__(
        self, client: ToolCaller, info: McpToolInfo, name: str, permissions: Sequence[Permission]
    ) -> None:
        self.client = client
        """The client that runs the calls."""
        self.info = info
        """The tool as the server listed it."""
        self.name = name
        self.description = info.description
        if _reads_otherwise(name, info.name):
            self.description = with_original_name(info.description, info.name)
        self.parameters = wire_parameters(client.server_name, info)
        # A call returns the structuredContent this describes (see _results.py), or the
        # plain value it wraps, which code mode wraps again for a program. A tool that
        # renders an app returns its text: the structuredContent is the app's.
        schema = None if info.renders_app else info.output_schema
        self.output_schema = dict(schema) if isinstance(schema, Mapping) and schema else None
        self.required_permissions = tuple(permissions)
        self.tags = ("mcp",)
        self.category = f"mcp:{client.server_name}"
        self.as_task = info.task_support == "required"
        """Whether calls run as MCP tasks (the server requires it, or the app opted in:
        ``into_tools(tasks=...)``)."""
        self.task_wait: float | None = None
        """Seconds a task call waits for its task before it pauses the run (None: the
        client's ``timeout``)."""
        # Live questions by their pause's nonce, not the call id: call ids repeat across
        # the conversations that share this adapter.
        self._live: dict[str, LiveQuestion] = {}
        # The schema last compiled and its validator: compiling costs milliseconds, a
        # check with it a fraction of one. Recompiled if `parameters` is replaced.
        self._check: tuple[object, Any] | None = None

    def stopped(self, call_id: str) -> CallPaused | None:
        """The task call ``call_id`` left running when the run stopped before it ended
        (the loop keeps the call open with it), or None. Only the loop asks, in the
        turn the call was cancelled in (see :data:`~agcore_tools.pending.LEFT_RUNNING`):
        the handle is that turn's, so a call of another conversation with the same id
        never takes it, and a call that timed out leaves nothing in the adapter."""
        left = LEFT_RUNNING.get()
        return paused_on(left, call_id, self.name) if left is not None else None

    def resume_next(self, call_id: str, resume: Mapping[str, Any]) -> None:
        """Make the next run of call ``call_id`` answer the server's question:
        ``resume`` holds the pause's state and the user's answers. Only the loop calls
        this, once it has checked the answers (see :mod:`agcore_tools.pending`), in
        the run that then makes the call: the resume is for that run's call alone."""
        # A new dict, set here: one made earlier in an outer context is shared by every
        # task started from it since, such as two conversations gathered by one caller.
        _RESUMES.set({**(_RESUMES.get() or {}), (id(self), call_id): resume})

    def redefines(self, other: BaseTool) -> bool:
        """True when ``other`` is the same server-side tool of the same client, or of a
        client of the same server name: re-running the notebook cell that registers a
        server's tools (``registry.register_all(client.into_tools())``) replaces them.
        Another server's tool of that name still collides.

        Example:
            >>> from agcore_tools import McpClient, StdioTransport
            >>> def made(server: str) -> McpTool:
            ...     client = McpClient(server, StdioTransport("server"))
            ...     return McpTool(client, McpToolInfo("echo"), "echo", [])
            >>> made("demo").redefines(made("demo")), made("demo").redefines(made("other"))
            (True, False)
        """
        if not isinstance(other, McpTool) or other.info.name != self.info.name:
            return False
        return other.client is self.client or other.client.server_name == self.client.server_name

    def check_arguments(self, args: dict[str, Any]) -> None:
        """Validate ``args`` against the tool's input schema, :attr:`parameters` (the
        server's, with only the faults that have one meaning mended; a registry's
        ``schema_transforms`` change what the model reads, not this) without calling the
        server; raises :class:`~agcore_tools.InvalidArgumentsError` naming the first bad
        field. :meth:`execute` runs the same check before it sends a call. A schema the
        validator cannot read (a broken ``$ref``) leaves the check to the server.

        Example:
            >>> from agcore_tools import McpClient, StdioTransport
            >>> info = McpToolInfo("echo", input_schema={
            ...     "type": "object", "properties": {"text": {"type": "string"}}})
            >>> tool = McpTool(McpClient("demo", StdioTransport("server")), info, "echo", [])
            >>> tool.check_arguments({"text": 12})
            Traceback (most recent call last):
            ...
            agcore_tools.error.InvalidArgumentsError: tool 'echo' got invalid arguments: text: 12 is not of type 'string'
        """
        held = self._check
        if held is None or held[0] is not self.parameters:
            held = self._check = (self.parameters, schema_check(self.parameters))
        check_with(self.name, held[1], args)

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Call the tool on the server; see :meth:`McpClient.call_tool` for results and errors.

        Two differences. Arguments that do not satisfy the tool's input schema
        (:meth:`check_arguments`) are not sent: the call fails with
        :class:`~agcore_tools.InvalidArgumentsError`, recoverable, and did not run. A
        resumed call (the answer to the server's question, a task waited for again) is
        not checked again: the server has its arguments already. And a plain value that
        FastMCP or the MCP Python SDK sends wrapped, as ``structuredContent`` ``{"result":
        v}`` beside a text saying the same, is ``v``, so the model reads a note as its
        text rather than as escaped JSON (a code-mode program still gets the
        ``{"result": v}`` its listing promises). A tool that renders an app
        (:attr:`McpToolInfo.renders_app`) returns its text, not its ``structuredContent``,
        which is its app's data (MCP Apps keeps it out of the model's context).

        Errors name the tool as the model sees it (``server__tool`` with a prefix), not
        as the server does. In the loop, a question from the server that no
        ``elicitation_handler`` answers pauses the call, and so does a task still
        running after the client's timeout (:class:`~agcore_tools.pending.CallPaused`).
        A 2025-11-25 task's question comes inside ``tasks/result``, where nothing can
        hold it: without a handler it is declined."""
        call_id = ctx.call_id
        held = _RESUMES.get()
        resume = held.pop((id(self), call_id), None) if call_id and held else None
        if resume is None:
            if larger_than(args, _CHECKED_ON_THE_LOOP):
                import anyio.to_thread

                # 100,000 values take jsonschema most of a second: not on the loop. The
                # thread is waited for (it ends with the check), cancelled or not.
                await anyio.to_thread.run_sync(self.check_arguments, args)
            else:
                self.check_arguments(args)
        # The server's progress updates reach a listening context as its own reports.
        listened = CALLER.set(ctx) if ctx.listening else None
        keyed = CALL_KEY.set(ctx.idempotency_key) if call_id else None
        # A plain value FastMCP wrapped as {"result": v} comes back as v (see _results).
        unwraps = wraps_plain_value(self.output_schema) and UNWRAPS.get()
        unwrapping = READ_BY_MODEL.set(True) if unwraps else None
        app_data = CONTENT_FOR_MODEL.set(True) if self.info.renders_app else None
        try:
            if call_id and resume is not None and resume["state"].get("live"):
                value = await self._answer_live(resume["state"], resume["answers"])
            elif self.as_task or (resume is not None and "task" in resume["state"]):
                caller = cast("TaskCaller", self.client)
                wait = self.task_wait if self.task_wait is not None else caller_timeout(self.client)
                value = await run_task(caller, self.info.name, self.name, args, ctx, resume, wait)
            else:
                # A call can pause on a question only where the loop can hold it: not
                # in a Temporal activity (a WorkKeeper), where the question is declined.
                pausable = bool(call_id) and KEEPER.get() is None
                round_ = (
                    responses(resume["state"], resume["answers"])
                    if resume is not None
                    else InputRound(True)
                    if pausable
                    else None
                )
                asking = ROUND.set(round_)
                try:
                    value = await self.client.call_tool(self.info.name, args)
                finally:
                    ROUND.reset(asking)
        except ToolError as exc:
            if exc.tool_name is None or exc.tool_name == self.name:
                raise
            raise _renamed(exc, self.info.name, self.name) from exc
        finally:
            if listened is not None:
                CALLER.reset(listened)
            if keyed is not None:
                CALL_KEY.reset(keyed)
            if unwrapping is not None:
                READ_BY_MODEL.reset(unwrapping)
            if app_data is not None:
                CONTENT_FOR_MODEL.reset(app_data)
        if call_id and isinstance(value, ServerQuestion):
            nonce = new_nonce()
            if isinstance(value, LiveQuestion):
                # Nonces never repeat, so questions nobody answered would pile up: those
                # whose call has ended (timed out) go, each time one is added.
                for old in [n for n, q in self._live.items() if q.call.done()]:
                    del self._live[old]
                self._live[nonce] = value
            return value.awaiting(call_id, self.name, self.client.server_name, nonce)
        return value

    async def _answer_live(self, state: Mapping[str, Any], answers: Mapping[str, Any]) -> Any:
        """Send the answer to a question (2025-11-25) this process holds, and go on."""
        # A history saved before pauses had nonces names no question held here.
        nonce = state.get("nonce")
        live = self._live.pop(nonce, None) if isinstance(nonce, str) else None
        server, raw = self.client.server_name, self.info.name
        if live is None:
            raise McpError(
                server,
                f"the question asked during tools/call '{raw}' was lost: on 2025-11-25 a "
                "question lives on the connection, and this process does not hold it (it "
                "was restarted, or the call ended); call the tool again",
                tool_name=raw,
                recoverable=True,
                may_have_run=True,
            )
        [answer] = answers.values()
        return await live.go_on(answer)

    def __repr__(self) -> str:
        return f"<McpTool {self.name!r} on {self.client.server_name!r}>"


def _reads_otherwise(name: str, tool_name: str) -> bool:
    # The registry name, prefix aside, is not made of the server's name's words: its
    # letters were replaced, cut, or a digest added. "files.read" as "files_read" or
    # "löschen" as "loschen" reads the same, and costs no note.
    own = words(tool_name)
    return words(name)[-len(own) :] != own if own else False


def _renamed(error: ToolError, raw: str, name: str) -> ToolError:
    # The same error (same class, same fields), naming the tool by its registry name.
    def rename(text: str) -> str:
        return text.replace(f"tools/call '{raw}'", f"tools/call for tool '{name}'").replace(
            f"tool '{raw}'", f"tool '{name}'"
        )

    renamed = type(error).__new__(type(error))
    renamed.__dict__.update(error.__dict__)
    ToolError.__init__(renamed, rename(error.message), tool_name=name)
    reason = getattr(error, "reason", None)
    if isinstance(reason, str):
        renamed.reason = rename(reason)  # type: ignore[attr-defined]
    return renamed


def caller_timeout(client: ToolCaller) -> float:
    """The client's per-call timeout (30 s for a client that has none)."""
    timeout = getattr(client, "timeout", None)
    return float(timeout) if isinstance(timeout, int | float) else 30.0


def _opted_in(tasks: object, infos: Sequence[McpToolInfo], server: str) -> bool | frozenset[str]:
    """``tasks`` checked: True, False, or server tool names (one string is one name). A
    name the server does not list is refused: a typo would quietly run the tool's calls
    without tasks."""
    if isinstance(tasks, bool):
        return tasks
    if isinstance(tasks, str):
        tasks = [tasks]
    if not isinstance(tasks, Collection) or not all(isinstance(n, str) for n in tasks):
        raise ToolConfigError(
            f"MCP server '{server}': tasks must be True, False or a list of tool names, "
            f"got {tasks!r}"
        )
    unknown = sorted(set(tasks) - {info.name for info in infos})
    if unknown:
        names = sorted(info.name for info in infos)
        listed = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
        raise ToolConfigError(
            f"MCP server '{server}' lists no tool named {', '.join(map(repr, unknown))} "
            f"(tasks= takes the server's own names; it lists: {listed or 'no tools'})"
        )
    return frozenset(tasks)


def make_adapters(
    client: ToolCaller,
    infos: Sequence[McpToolInfo],
    prefix: str | None,
    policy: PermissionPolicy,
    tasks: bool | Collection[str] = False,
    task_wait: float | None = None,
) -> list[BaseTool]:
    """One :class:`McpTool` per tool the model may see, named by :func:`adapter_names`.

    A tool the server offers to its app alone (:attr:`McpToolInfo.app_only`, MCP Apps)
    gets none: it is left out, and an INFO names it.

    A tool whose server requires tasks runs its calls as tasks; so does one the app
    opted in (``tasks``: True for every tool that supports them, or server names of
    tools) unless the server lists it as not supporting them. On 2026-07-28 tools do
    not say (the server decides per call), so an opted-in tool is started as a task and
    may be answered at once.
    """
    adapters: list[BaseTool] = []
    tasks = _opted_in(tasks, infos, client.server_name)
    modern = False
    if tasks:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        modern = getattr(client, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS
    listed: dict[str, McpToolInfo] = {}
    app_only = [info.name for info in infos if info.app_only]
    if app_only:
        logger.info(
            "MCP server '%s': %s left out of the model's tools: the server offers them to "
            "its app alone (MCP Apps _meta.ui.visibility); call_tool() still reaches them",
            client.server_name,
            ", ".join(repr(name) for name in app_only),
        )
    for info in infos:
        if info.app_only:
            continue
        if info.name in listed:
            # A call names its tool, so the server has one tool by that name: the first.
            logger.warning(
                "MCP server '%s' lists the tool %r twice; the first listing is used",
                client.server_name,
                info.name,
            )
        listed.setdefault(info.name, info)
    names = adapter_names(list(listed), prefix, client.server_name)
    for info, name in zip(listed.values(), names, strict=True):
        permissions = Permission.parse_all(policy(info))
        adapter = McpTool(client, info, name, permissions)
        opted = tasks is True or (not isinstance(tasks, bool) and info.name in tasks)
        # A tool saying nothing supports no tasks on 2025-11-25; on 2026-07-28 tools
        # never say, and the server decides per call.
        if opted and (info.task_support == "optional" or (info.task_support is None and modern)):
            adapter.as_task = True
        adapter.task_wait = task_wait
        # McpPermissionPolicy(needs_approval=...), or any policy with an asks() (a
        # subclass may override it: asks() decides); another PermissionPolicy never asks.
        asks = getattr(policy, "asks", None)
        adapter.needs_approval = bool(asks(info)) if asks is not None else False
        if adapter.needs_approval:
            why = getattr(policy, "approval_reason", None)
            reason = why(info) if why is not None else None
            adapter.approval_reason = reason or f"{type(policy).__qualname__}.asks() picked it"
        adapters.append(adapter)
    return adapters
