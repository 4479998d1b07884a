"""Structured errors of the tool system and of the LLM loop.

Every error raised by ``agcore_tools`` is an :class:`AgcoreError`: a :class:`ToolError`
(a tool, the registry, MCP) or an :class:`LlmError` (the loop). Each has a one-line message naming what failed and why, and keeps the original
exception as ``__cause__`` when there is one.

Mistakes in the caller's own code (a function that cannot be a tool, a bad option
value) are also a :class:`TypeError` or a :class:`ValueError`, so ordinary ``except``
clauses catch them: :class:`ToolDefinitionError`, :class:`ToolConfigError` and
:class:`LlmConfigError`.

Example:
    >>> err = ToolNotFoundError("get_weather")
    >>> str(err)
    "tool 'get_weather' is not registered"
    >>> err.is_recoverable()
    False
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._usage import ZERO_USAGE, Usage

__all__ = [
    "AgcoreError",
    "ApprovalError",
    "CassetteError",
    "CassetteMismatchError",
    "ClientTypeError",
    "DefinitionBudgetError",
    "InvalidArgumentsError",
    "LlmConfigError",
    "LlmError",
    "LlmUsageError",
    "MaxTurnsExceededError",
    "McpError",
    "McpInputRequiredError",
    "McpNotInitializedError",
    "McpTimeoutError",
    "McpUsageError",
    "OutputValidationError",
    "PermissionDeniedError",
    "ProgramError",
    "RunStoppedError",
    "SyncCallError",
    "ToolConfigError",
    "ToolDefinitionError",
    "ToolDefinitionWarning",
    "ToolError",
    "ToolExecutionError",
    "ToolIOError",
    "ToolNotFoundError",
    "ToolNotOfferedError",
    "ToolRejectedError",
    "ToolTimeoutError",
    "ToolUnavailableError",
]


def _one_line(text: str) -> str:
    return " ".join(text.split())


class AgcoreError(Exception):
    """The root of every exception ``agcore_tools`` raises.

    ``except AgcoreError`` catches a failed tool, registry, MCP or loop call alike; its
    two branches are :class:`ToolError` and :class:`LlmError`, and a third,
    :class:`CassetteError`, is for tests that replay a recorded run.

    Errors survive ``pickle``, ``copy`` and ``deepcopy`` with their type, message and
    attributes (``tool_name``, ``timeout``, ``usage`` ...), so they cross process pools.

    Example:
        >>> issubclass(ToolError, AgcoreError), issubclass(LlmError, AgcoreError)
        (True, True)
        >>> import pickle
        >>> again = pickle.loads(pickle.dumps(ToolTimeoutError("slow", 1.5)))
        >>> type(again).__name__, again.tool_name, again.timeout
        ('ToolTimeoutError', 'slow', 1.5)
    """

    def __reduce__(self) -> tuple[Any, ...]:
        # The default rebuilds with cls(*self.args), but the subclasses' __init__ take
        # their parts (a tool name, a timeout), not the finished message: rebuild from
        # the message and the attributes instead, without calling __init__.
        return (_rebuilt, (type(self), self.args), self.__dict__)


def _rebuilt(kind: type[AgcoreError], args: tuple[Any, ...]) -> AgcoreError:
    """An error of type ``kind`` with ``args``, its attributes set by pickle after."""
    error = kind.__new__(kind, *args)
    BaseException.__init__(error, *args)
    return error


class ToolError(AgcoreError):
    """Base of every tool-system error, and the error for a failure of no finer kind.

    ``tool_name`` names the tool when the error concerns one. Errors of this base
    class are recoverable: the loop sends their text back to the model.

    Example:
        >>> ToolError("registry is frozen").is_recoverable()
        True
    """

    recoverable: bool = True
    may_have_run: bool | None = None
    """Whether the failed call may have taken effect: True once it started (the tool
    raised, timed out, or an MCP request was sent), False when it provably did not run
    (an unknown tool, a refusal, bad arguments, an MCP request never sent); None when
    the error does not say. :attr:`ToolInvocation.may_have_run` records it."""

    def __init__(self, message: str, *, tool_name: str | None = None) -> None:
        super().__init__(_one_line(message))
        self.tool_name = tool_name

    @property
    def message(self) -> str:
        """The one-line message, without the class name.

        Example:
            >>> ToolError("boom").message
            'boom'
        """
        return str(self.args[0]) if self.args else ""

    def is_recoverable(self) -> bool:
        """Whether a model can act on this error.

        Recoverable errors are returned to the model as the tool's result text;
        unrecoverable ones stop the tool loop.

        Example:
            >>> PermissionDeniedError("rm", "shell").is_recoverable()
            False
        """
        return self.recoverable


class ToolNotFoundError(ToolError):
    """No tool of that name is registered, or the run does not offer it (unrecoverable).

    ``registered`` says the registry has the tool, and the run's ``select=`` left it
    out: the message says that it is not available in this conversation.

    Example:
        >>> str(ToolNotFoundError("nope"))
        "tool 'nope' is not registered"
        >>> str(ToolNotFoundError("refund", registered=True))
        "tool 'refund' is not available in this conversation"
    """

    recoverable = False
    may_have_run = False
    registered: bool = False
    """Whether the registry has the tool, which the run does not offer."""

    def __init__(
        self, tool_name: str, detail: str | None = None, *, registered: bool = False
    ) -> None:
        # A nameless call (a server's stream quirk) would read as "tool '' ...".
        if not tool_name:
            message = "the model sent a tool call without a name"
        elif registered:
            message = f"tool '{tool_name}' is not available in this conversation"
        else:
            message = f"tool '{tool_name}' is not registered"
        super().__init__(f"{message}: {detail}" if detail else message, tool_name=tool_name)
        self.registered = registered


class ToolNotOfferedError(ToolNotFoundError):
    """A registered tool this run does not offer, so the model cannot call it yet: tool
    search has not found it. Recoverable: the text tells the model how to reach it, and
    the loop answers the call with it.

    Example:
        >>> err = ToolNotOfferedError("get_weather", "find it with search_tools first")
        >>> str(err), err.is_recoverable()
        ("tool 'get_weather' is not offered in this run: find it with search_tools first", True)
    """

    recoverable = True

    def __init__(self, tool_name: str, detail: str) -> None:
        ToolError.__init__(
            self, f"tool '{tool_name}' is not offered in this run: {detail}", tool_name=tool_name
        )


class ToolExecutionError(ToolError):
    """The tool ran and failed; the model may retry differently (recoverable).

    Example:
        >>> str(ToolExecutionError("div", "ZeroDivisionError: division by zero"))
        "tool 'div' failed: ZeroDivisionError: division by zero"
    """

    may_have_run = True

    def __init__(self, tool_name: str, reason: str) -> None:
        super().__init__(f"tool '{tool_name}' failed: {reason}", tool_name=tool_name)
        self.reason = _one_line(reason)


class ProgramError(ToolExecutionError):
    """A code-mode program raised, or broke a sandbox limit (recoverable: the model reads
    the traceback and may fix the program).

    The message is one line, as every error's is; :attr:`report` keeps the lines the
    model reads instead: what the program printed, its traceback, and the calls that
    ran before it failed (so a fixed program need not repeat them). A program that
    failed on a tool's error raises it with that error's message, which may quote the
    values the program passed; ``redacted`` is the message with the tool error's own
    redacted form instead (see :attr:`InvalidArgumentsError.redacted`), for spans and
    logs that must not record arguments.

    Example:
        >>> error = ProgramError("KeyError: 'id'", "Traceback (most recent call last):\\n  ...")
        >>> str(error)
        "tool 'run_python' failed: KeyError: 'id'"
        >>> error.report.splitlines()[0]
        'Traceback (most recent call last):'
        >>> ProgramError("RuntimeError: bad n (got 'x')", "...",
        ...              redacted_reason="RuntimeError: bad n").redacted
        "tool 'run_python' failed: RuntimeError: bad n"
    """

    def __init__(self, reason: str, report: str, *, redacted_reason: str | None = None) -> None:
        super().__init__("run_python", reason)
        self.report = report
        """The model's text: printed output, traceback and calls made, lines kept."""
        self.redacted = (
            str(self)
            if redacted_reason is None
            else _one_line(f"tool 'run_python' failed: {redacted_reason}")
        )
        """The message without the argument values a tool's error in it may quote."""


class ToolTimeoutError(ToolExecutionError):
    """A tool ran past its time limit and was cancelled (recoverable).

    It was cancelled while running (an MCP tool's request was already sent), so the
    message tells the model not to assume nothing happened.

    A call that timed out while it waited for its turn (its tool's concurrency cap)
    never started: ``started=False`` says so, to the model and in ``may_have_run``.

    Example:
        >>> str(ToolTimeoutError("slow", 1.5))
        "tool 'slow' failed: timed out after 1.5 s; it may have run in part, so do not assume it had no effect"
        >>> waited = ToolTimeoutError("slow", 1.5, started=False)
        >>> str(waited), waited.may_have_run
        ("tool 'slow' failed: timed out after 1.5 s waiting for its turn; it never started", False)
    """

    def __init__(self, tool_name: str, timeout: float, *, started: bool = True) -> None:
        note = f"; {_TIMED_OUT_NOTE}" if started else " waiting for its turn; it never started"
        super().__init__(tool_name, f"timed out after {timeout:g} s{note}")
        self.timeout = timeout
        if not started:
            self.may_have_run = False


_TIMED_OUT_NOTE = "it may have run in part, so do not assume it had no effect"


class InvalidArgumentsError(ToolError):
    """The arguments did not match the tool's schema (recoverable).

    ``errors`` lists one ``(field, problem)`` pair per bad field, so a model can
    correct itself: the first :attr:`LISTED` of them, then one pair counting the rest
    (an array of 100,000 bad items is not 100,000 pairs); ``complete=False`` says that
    ``errors`` are the first problems found and that there are more, not looked for:
    the rest are counted as "at least". The message may quote the bad values (the model
    needs them); ``redacted`` is the message without them, for spans and logs that must
    not record arguments: give ``redacted_reason`` when ``reason`` quotes a value.

    Example:
        >>> e = InvalidArgumentsError("add", "b: Field required", errors=[("b", "Field required")])
        >>> str(e)
        "tool 'add' got invalid arguments: b: Field required"
        >>> InvalidArgumentsError("add", "b: not an integer (got 'x')",
        ...                       redacted_reason="b: not an integer").redacted
        "tool 'add' got invalid arguments: b: not an integer"
        >>> bad = [(f"items/{i}", "not an integer") for i in range(1000)]
        >>> InvalidArgumentsError("total", "items/0: not an integer", errors=bad).errors[-2:]
        [('items/19', 'not an integer'), ('...', '980 more problems not listed')]
        >>> InvalidArgumentsError("total", "items/0: not an integer", errors=bad,
        ...                       complete=False).errors[-1]
        ('...', 'at least 980 more problems not listed')
    """

    may_have_run = False
    LISTED = 20
    """The ``(field, problem)`` pairs listed in :attr:`errors` at most, besides the one
    that counts the rest."""

    def __init__(
        self,
        tool_name: str,
        reason: str,
        *,
        errors: list[tuple[str, str]] | None = None,
        redacted_reason: str | None = None,
        complete: bool = True,
    ) -> None:
        super().__init__(f"tool '{tool_name}' got invalid arguments: {reason}", tool_name=tool_name)
        self.reason = _one_line(reason)
        listed = list(errors or [])
        if len(listed) > self.LISTED:
            more = len(listed) - self.LISTED
            at_least = "" if complete else "at least "
            listed[self.LISTED :] = [
                ("...", f"{at_least}{more} more problem{'s' if more > 1 else ''} not listed")
            ]
        self.errors = listed
        self.redacted = (
            str(self)
            if redacted_reason is None
            else _one_line(f"tool '{tool_name}' got invalid arguments: {redacted_reason}")
        )
        """The message without the argument values it may quote."""


class PermissionDeniedError(ToolError):
    """The permission policy forbids the tool; it never ran (unrecoverable).

    Example:
        >>> str(PermissionDeniedError("rm", "shell", "is denied"))
        "permission denied: tool 'rm' needs 'shell', which is denied"
    """

    recoverable = False
    may_have_run = False

    def __init__(
        self, tool_name: str, permission: str | None, rule: str = "is not allowed"
    ) -> None:
        needs = f"needs '{permission}'" if permission else "declares no permissions"
        super().__init__(
            f"permission denied: tool '{tool_name}' {needs}, which {rule}", tool_name=tool_name
        )
        self.permission = permission
        """The refused permission's name, or None when the tool declared none."""


class ToolUnavailableError(ToolError):
    """A tool's policy turned a call away before it ran (recoverable): its circuit
    breaker is open, it is over its rate limit (set not to wait, or with no turn before
    its timeout), or its rate limit's store could not be reached.

    ``retry_after`` says in how many seconds a call may be let through, when known.

    Example:
        >>> error = ToolUnavailableError("search", "over its rate limit", retry_after=0.5)
        >>> str(error), error.may_have_run
        ("tool 'search' is unavailable: over its rate limit; try again in 0.5 s", False)
        >>> str(ToolUnavailableError("report", "over its rate limit", retry_after=3600.0))
        "tool 'report' is unavailable: over its rate limit; try again in 3600 s"
    """

    may_have_run = False

    def __init__(self, tool_name: str, reason: str, *, retry_after: float | None = None) -> None:
        message = f"tool '{tool_name}' is unavailable: {reason}"
        if retry_after is not None:
            # Whole seconds from 10 on: a model misreads "3.6e+03 s" (.3g's form of an hour).
            seconds = f"{retry_after:.3g}" if retry_after < 10 else f"{retry_after:.0f}"
            message += f"; try again in {seconds} s"
        super().__init__(message, tool_name=tool_name)
        self.retry_after = retry_after


class ToolRejectedError(ToolError):
    """The app's user declined a call that needed approval; it never ran (recoverable:
    the model reads why and may try something else).

    Example:
        >>> str(ToolRejectedError("refund", "ask the manager first"))
        "the user declined the call to tool 'refund': ask the manager first"
    """

    may_have_run = False

    def __init__(self, tool_name: str, message: str | None = None) -> None:
        declined = f"the user declined the call to tool '{tool_name}'"
        super().__init__(f"{declined}: {message}" if message else declined, tool_name=tool_name)
        self.user_message = message
        """The app's message to the model, or None."""


class ApprovalError(ToolError, ValueError):
    """An approval cannot apply: its call id, tool name or arguments do not match a
    call awaiting approval, its signature is wrong, or its edited arguments are invalid.
    Also an answer to an input request that does not fit its schema or names no open
    question, and a paused call's state that was changed in the history.

    A mistake in the app's own answer, so it is also a :class:`ValueError`; nothing ran.

    The message may quote the arguments or answers concerned (the app needs them);
    ``redacted`` is the message without them, for spans and logs that must not record
    content: give it when ``message`` quotes a value.

    Example:
        >>> try:
        ...     raise ApprovalError("no call 'c9' is awaiting approval")
        ... except ValueError as exc:
        ...     print(exc)
        no call 'c9' is awaiting approval
        >>> ApprovalError("approved {'pin': 1234}", redacted="approved other 'pin'").redacted
        "approved other 'pin'"
    """

    def __init__(
        self, message: str, *, tool_name: str | None = None, redacted: str | None = None
    ) -> None:
        super().__init__(message, tool_name=tool_name)
        self.redacted = str(self) if redacted is None else _one_line(redacted)
        """The message without the argument values or answers it may quote."""


class McpError(ToolError):
    """The MCP server or the link to it failed.

    Unrecoverable by default. The failure of one request that leaves the connection
    up (an HTTP error other than 401 and 403, one response stream that broke, the
    server's JSON-RPC error answer to a ``tools/call``) is created recoverable, so a
    model can read it and try again.

    Over Streamable HTTP, ``status_code`` is the HTTP status of the failed request and
    ``retry_after`` the seconds its ``Retry-After`` header asked for (both None
    otherwise).

    A failed ``tools/call`` says whether the tool may have run (``may_have_run``): True
    when it failed after its request was sent (a lost connection, a timeout, a broken
    stream), as the server may have run it all the same; False when it was not sent
    (not connected, restarts spent) or the server refused it unrun (an HTTP 401, 403
    or 429; a JSON-RPC error such as -32602 invalid params). The message then
    ends with what a model must know: "the call may have run on the server, so do not
    assume it had no effect", or "the call was not run".

    Example:
        >>> str(McpError("fs", "server exited with code 1"))
        "MCP server 'fs': server exited with code 1"
        >>> err = McpError("api", "tools/call 'q' failed: HTTP 429 Too Many Requests",
        ...                status_code=429, retry_after=30.0, recoverable=True)
        >>> err.status_code, err.retry_after, err.is_recoverable()
        (429, 30.0, True)
        >>> print(McpError("pay", "tools/call 'send' failed: connection lost (exited with "
        ...                "code 1)", tool_name="send", may_have_run=True))
        MCP server 'pay': tools/call 'send' failed: connection lost (exited with code 1); the call may have run on the server, so do not assume it had no effect
    """

    recoverable = False
    elicitations: tuple[dict[str, Any], ...] = ()
    """The links the server asks the user to open before it runs the request (its
    2025-11-25 ``URLElicitationRequiredError``, code -32042), as it sent them: each with
    its ``url``, ``message`` and ``elicitationId``. Empty for any other failure. Such an
    error is recoverable, and its message names only the links' hosts (a link may carry
    a one-time token)."""

    def __init__(
        self,
        server_name: str,
        reason: str,
        *,
        tool_name: str | None = None,
        status_code: int | None = None,
        retry_after: float | None = None,
        recoverable: bool | None = None,
        may_have_run: bool | None = None,
    ) -> None:
        note = "" if may_have_run is None else f"; {_RAN[may_have_run]}"
        super().__init__(f"MCP server '{server_name}': {reason}{note}", tool_name=tool_name)
        self.may_have_run = may_have_run
        self.server_name = server_name
        self.reason = _one_line(reason)
        self.status_code = status_code
        """The HTTP status of the failed request (Streamable HTTP), or None."""
        self.retry_after = retry_after
        """Seconds the server's ``Retry-After`` asked to wait, or None."""
        if recoverable is not None:
            self.recoverable = recoverable


_RAN = {
    True: "the call may have run on the server, so do not assume it had no effect",
    False: "the call was not run",
}
"""What an MCP error says of its call, by ``may_have_run``."""


class McpInputRequiredError(McpError):
    """An MCP task waits for the user's answers to its input requests (2026-07-28).

    ``input_requests`` holds them by the server's keys, as it sent them; answer with
    :meth:`~agcore_tools.mcp.McpTask.answer` (``tasks/update``) and wait again. The
    task waits on the server meanwhile. ``task`` is its saved handle: a caller that has
    no :class:`~agcore_tools.mcp.McpTask` (a registry call of a tool run as a task)
    gets one with ``McpClient.task(error.task)``. Not raised when the client has a
    handler for each request (``elicitation_handler``...): they answer. In the loop,
    with no ``elicitation_handler``, a form question pauses the run instead (see
    :mod:`agcore_tools.pending`).

    Example:
        >>> err = McpInputRequiredError("ci", "task 't1' waits for input (q1)",
        ...                             {"q1": {"method": "elicitation/create"}},
        ...                             task={"server": "ci", "task_id": "t1"})
        >>> sorted(err.input_requests), err.task["task_id"], isinstance(err, McpError)
        (['q1'], 't1', True)
    """

    def __init__(
        self,
        server_name: str,
        reason: str,
        input_requests: Mapping[str, Any],
        *,
        tool_name: str | None = None,
        task: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(server_name, reason, tool_name=tool_name)
        self.input_requests = dict(input_requests)
        """The task's questions by the server's keys (``{"method": ..., "params": ...}``)."""
        self.task = dict(task) if task is not None else None
        """The waiting task's saved handle (:meth:`~agcore_tools.mcp.McpTask.to_json`):
        ``McpClient.task(error.task)`` re-attaches to it, to answer or cancel it."""


class McpUsageError(ToolError, ValueError):
    """An MCP call the client cannot make as asked (a mistake in the calling code).

    Example:
        >>> isinstance(McpUsageError("cursor must be a string"), ValueError)
        True
    """


class McpNotInitializedError(McpError):
    """An MCP client was used before ``connect()`` or after it became unusable.

    ``by_caller`` tells the app's own mistake (a client never connected, or still in
    its first ``connect()``, or closed, or used from another event loop or process) from
    a server that is down (its connection lost, its start-up failed, or a new start
    after a loss or a failed start under way): a tool's circuit breaker counts only
    the second.

    Example:
        >>> str(McpNotInitializedError("fs"))
        "MCP server 'fs': not connected; call connect() first"
        >>> McpNotInitializedError("fs", by_caller=True).by_caller
        True
    """

    def __init__(
        self,
        server_name: str,
        reason: str = "not connected; call connect() first",
        *,
        tool_name: str | None = None,
        recoverable: bool | None = None,
        by_caller: bool = False,
    ) -> None:
        super().__init__(server_name, reason, tool_name=tool_name, recoverable=recoverable)
        self.by_caller = by_caller
        """Whether the app's own use of the client is at fault (never connected, closed,
        another event loop or process), not the server: no failure of its tools."""


class McpTimeoutError(McpError):
    """An MCP request got no answer within the client's timeout (unrecoverable).

    Example:
        >>> str(McpTimeoutError("fs", "tools/call 'read' timed out after 30 s"))
        "MCP server 'fs': tools/call 'read' timed out after 30 s"
    """


class ToolIOError(ToolError):
    """An I/O failure in the tool's environment (unrecoverable).

    Example:
        >>> ToolIOError("cannot open /tmp/x", tool_name="read").is_recoverable()
        False
    """

    recoverable = False


class ToolDefinitionError(ToolError, TypeError):
    """Something cannot be a tool: a signature without annotations, a lambda with
    parameters, an unbound method, an object that is not a :class:`BaseTool`.

    A mistake in the caller's code, so it is also a :class:`TypeError`.

    Example:
        >>> from agcore_tools import FunctionTool
        >>> try:
        ...     FunctionTool(lambda city: city)
        ... except TypeError as exc:
        ...     print(type(exc).__name__, isinstance(exc, ToolError))
        ToolDefinitionError True
    """


class ToolConfigError(ToolError, ValueError):
    """A value the caller gave is wrong: a timeout, a tool name (malformed or taken), a
    permission name, a transport or MCP configuration.

    A mistake in the caller's code or configuration, so it is also a :class:`ValueError`.

    Example:
        >>> from agcore_tools import Permission
        >>> try:
        ...     Permission.custom("")
        ... except ValueError as exc:
        ...     print(type(exc).__name__)
        ToolConfigError
    """


class ToolDefinitionWarning(UserWarning):
    """A tool was made, but something about it will hurt the model: for example a
    function without a docstring, so the model gets no description.

    Silence it like any warning:
    ``warnings.filterwarnings("ignore", category=ToolDefinitionWarning)``.

    Example:
        >>> issubclass(ToolDefinitionWarning, UserWarning)
        True
    """


class LlmError(AgcoreError):
    """The LLM loop failed: an API error that survived retries, or a stopped loop.

    The original exception (an OpenAI SDK error, or the unrecoverable
    :class:`ToolError` that stopped the loop) is kept as ``__cause__``.

    Example:
        >>> str(LlmError("chat completion failed: 500 Internal Server Error"))
        'chat completion failed: 500 Internal Server Error'
    """

    def __init__(self, message: str) -> None:
        super().__init__(_one_line(message))


class LlmConfigError(LlmError, ValueError):
    """A loop setting has a bad value, such as ``CycleConfig(max_turns=0)``.

    A mistake in the caller's code, so it is also a :class:`ValueError`.

    Example:
        >>> from agcore_tools import CycleConfig
        >>> try:
        ...     CycleConfig(model="")
        ... except ValueError as exc:
        ...     print(type(exc).__name__)
        LlmConfigError
    """


class DefinitionBudgetError(LlmError):
    """A request's tool definitions cost more tokens than ``CycleConfig.max_definition_tokens``;
    it was not sent.

    ``costs`` lists every offered tool with its token count, costliest first.

    Example:
        >>> err = DefinitionBudgetError(120, 100, [("notion", 90), ("time", 30)])
        >>> str(err)
        'tool definitions cost 120 tokens, over max_definition_tokens=100; the costliest: notion (90), time (30); offer fewer tools (submit_with_tools(select=...)) or a ToolSearch'
        >>> err.costs[0]
        ('notion', 90)
    """

    def __init__(self, tokens: int, budget: int, costs: Sequence[tuple[str, int]]) -> None:
        ranked = sorted(costs, key=lambda cost: -cost[1])
        top = ", ".join(f"{name} ({count})" for name, count in ranked[:5])
        super().__init__(
            f"tool definitions cost {tokens} tokens, over max_definition_tokens={budget}; "
            f"the costliest: {top}; offer fewer tools (submit_with_tools(select=...)) or a "
            "ToolSearch"
        )
        self.tokens = tokens
        """What the definitions cost together."""
        self.budget = budget
        """The budget they passed."""
        self.costs: tuple[tuple[str, int], ...] = tuple(ranked)
        """``(tool name, tokens)`` of each offered tool, costliest first."""


class ClientTypeError(LlmError, TypeError):
    """``LlmCycle(client=...)`` got something it cannot drive (a mistake in the caller's code).

    Example:
        >>> isinstance(ClientTypeError("client must be an OpenAI client"), TypeError)
        True
    """


class LlmUsageError(LlmError, TypeError):
    """An :class:`~agcore_tools.LlmCycle` or :class:`~agcore_tools.CycleConfig` call made
    with an argument of the wrong kind: a string where a ``CycleConfig`` goes, tools that
    are not a ``ToolRegistry`` nor :class:`~agcore_tools.BaseTool` values, a misspelt
    keyword, ``for`` over an ``EventStream``, or a second ``submit*`` call on a cycle
    still running one (one cycle per concurrent conversation); or a
    :class:`~agcore_tools.testing.ScriptedChatServer` script made wrong.

    A mistake in the caller's code, so it is also a :class:`TypeError`; the message
    names the fix.

    Example:
        >>> from agcore_tools import CycleConfig, LlmCycle
        >>> try:
        ...     LlmCycle("gpt-4o-mini")  # type: ignore[arg-type]
        ... except TypeError as exc:
        ...     print(type(exc).__name__, exc)
        LlmUsageError LlmCycle takes a CycleConfig, got str: use LlmCycle(CycleConfig('gpt-4o-mini'), ...)
    """


class MaxTurnsExceededError(LlmError):
    """A new request would exceed ``CycleConfig.max_turns``; it was not sent.

    It carries what the stopped call did: ``invocations`` (every tool call it ran),
    ``usage`` (token counts of its requests) and ``history_length`` (how many messages
    the cycle's history held when it stopped; every tool call there is answered). To
    go on from there, call ``submit_with_tools(None, registry)``.

    Example:
        >>> err = MaxTurnsExceededError(3)
        >>> str(err)
        'tool loop stopped: a new request would exceed max_turns=3'
        >>> err.invocations, err.usage.requests, err.history_length
        ((), 0, 0)
    """

    def __init__(
        self,
        max_turns: int,
        *,
        invocations: Sequence[Any] = (),
        usage: Usage | None = None,
        history_length: int = 0,
    ) -> None:
        super().__init__(f"tool loop stopped: a new request would exceed max_turns={max_turns}")
        self.max_turns = max_turns
        """The limit that was reached."""
        self.invocations: tuple[Any, ...] = tuple(invocations)
        """The tool calls the stopped ``submit*`` call ran (each a
        :class:`~agcore_tools.ToolInvocation`), turn by turn, in the model's call order
        (not the order they ended), as :attr:`ChatResponse.invocations
        <agcore_tools.ChatResponse.invocations>` lists them."""
        self.usage: Usage = usage if usage is not None else ZERO_USAGE
        """Token counts summed over the stopped call's requests."""
        self.history_length = history_length
        """How many messages ``LlmCycle.messages`` held when the call stopped."""


class RunStoppedError(LlmError):
    """A ``submit*`` call was stopped by its ``ToolContext``: the app called
    ``ctx.cancellation.cancel()`` (a Stop button, a watchdog; from any thread).

    The run sent no request after that: the one in flight was closed, the running tools
    were cancelled, and the history stays valid (every tool call is answered; a turn
    cut short is not recorded). ``usage`` sums the requests answered before the stop. A
    later call needs a new ``ToolContext``: this one stays cancelled. A streamed call's
    iteration simply ends, as after ``aclose()``; its ``collect()`` raises this.

    A registry's direct call (``invoke``, ``invoke_all``, ``invoke_as_completed``,
    ``run_tool_calls`` and their ``_sync`` forms) stopped the same way raises it too,
    with ``call`` naming the method: no tool call started after the stop, and those
    running were cancelled (they may have taken effect); their results are dropped.

    Example:
        >>> err = RunStoppedError()
        >>> str(err)
        'the run was stopped by its ToolContext (ctx.cancellation.cancel()): no request was sent after that, and the history is valid; pass a new ToolContext to go on'
        >>> err.usage.requests
        0
        >>> str(RunStoppedError(call="invoke_sync()"))
        'invoke_sync() was stopped by its ToolContext (ctx.cancellation.cancel()): no tool call started after that, and those running were cancelled (they may have taken effect); pass a new ToolContext to go on'
    """

    def __init__(self, usage: Usage | None = None, *, call: str | None = None) -> None:
        if call is None:
            super().__init__(
                "the run was stopped by its ToolContext (ctx.cancellation.cancel()): no "
                "request was sent after that, and the history is valid; pass a new "
                "ToolContext to go on"
            )
        else:
            super().__init__(
                f"{call} was stopped by its ToolContext (ctx.cancellation.cancel()): no "
                "tool call started after that, and those running were cancelled (they may "
                "have taken effect); pass a new ToolContext to go on"
            )
        self.usage: Usage = usage if usage is not None else ZERO_USAGE
        """Token counts summed over the requests answered before the stop."""
        self.call = call
        """The registry method that was stopped (``"invoke()"``), or None for a
        ``submit*`` call."""


class OutputValidationError(LlmError):
    """The model's final answer did not validate into the call's ``output_type``, and
    its retries (``StructuredOutput.retries``) were spent.

    ``raw_text`` is the last answer as the model gave it (the JSON text, or the
    ``final_result`` call's arguments); ``problems`` lists its errors, one
    ``"field: message"`` string each; ``attempts`` counts the answers checked;
    ``usage`` sums the failed call's requests (its tool turns and retries too).

    Example:
        >>> err = OutputValidationError("City", '{"name": 3}', ["name: Input should be a valid string"], 2)
        >>> str(err)
        "the model's answer is not a valid City after 2 attempt(s): name: Input should be a valid string"
        >>> err.raw_text, err.usage.requests
        ('{"name": 3}', 0)
    """

    def __init__(
        self,
        label: str,
        raw_text: str,
        problems: Sequence[str],
        attempts: int,
        *,
        usage: Usage | None = None,
    ) -> None:
        listed = "; ".join(problems) if problems else "no reason given"
        super().__init__(
            f"the model's answer is not a valid {label} after {attempts} attempt(s): {listed}"
        )
        self.raw_text = raw_text
        """The last answer's raw text."""
        self.problems: tuple[str, ...] = tuple(problems)
        """What was wrong with it, one ``"field: message"`` string per error."""
        self.attempts = attempts
        """How many answers were checked."""
        self.usage: Usage = usage if usage is not None else ZERO_USAGE
        """Token counts summed over the failed call's requests."""


class SyncCallError(ToolError, LlmError, RuntimeError):
    """A ``*_sync`` method was called where it cannot run (a mistake in the caller's code).

    It is a :class:`ToolError` and an :class:`LlmError` so that the ``except`` a caller
    already has around a registry or a loop call catches it, and a ``RuntimeError`` as
    ``asyncio.run()`` raises in the same situation.

    Example:
        >>> issubclass(SyncCallError, RuntimeError)
        True
    """

    recoverable = False


class CassetteError(AgcoreError):
    """A recorded run (a :class:`~agcore_tools.testing.Cassette`) cannot be used: it is
    missing where only replaying is allowed, unreadable, or a socket was opened while the
    network was blocked for a replay.

    Example:
        >>> str(CassetteError("cassette tests/cassettes/run.json is missing (record mode 'none')"))
        "cassette tests/cassettes/run.json is missing (record mode 'none')"
    """

    def __init__(self, message: str) -> None:
        super().__init__(_one_line(message))


class CassetteMismatchError(CassetteError, AssertionError):
    """A replayed run asked for something the cassette did not record: the first
    difference, by request index (from 0, in the cassette's order) and JSON path.

    It is an ``AssertionError`` too, so a test reports it as a failed expectation, and
    the loop passes it on as it is instead of retrying it or wrapping it.

    Example:
        >>> err = CassetteMismatchError(2, "messages[3].content", "x", "y")
        >>> str(err)
        "request 2 differs at messages[3].content: recorded 'x', got 'y'"
        >>> err.index, err.path, err.recorded, err.got
        (2, 'messages[3].content', 'x', 'y')

        Two long texts are shown around their first difference, with its offset:

        >>> prompt = "You are a helpful assistant for ACME Corp. " * 3
        >>> print(CassetteMismatchError(0, "messages[0].content", prompt + "Answer in English.",
        ...                             prompt + "Answer in French."))
        request 0 differs at messages[0].content, character 139: recorded ...'tant for ACME Corp. Answer in English.', got ...'tant for ACME Corp. Answer in French.'
    """

    def __init__(
        self,
        index: int,
        path: str,
        recorded: Any,
        got: Any,
        *,
        subject: str = "request",
        message: str | None = None,
    ) -> None:
        self.index = index
        """Which recorded request (or MCP call), from 0."""
        self.path = path
        """The JSON path of the first difference (``messages[3].content``)."""
        self.recorded = recorded
        """The value the cassette holds there (``None`` when it has none)."""
        self.got = got
        """The value the replayed run sent there (``None`` when it sent none)."""
        super().__init__(
            message or f"{subject} {index} differs at {path}{_contrast(recorded, got)}"
        )


_SHOWN = 80  # characters of a value's repr shown whole
_AROUND = 30  # characters shown either side of the first difference of two long values


def _contrast(recorded: Any, got: Any) -> str:
    """``: recorded X, got Y``, with two long values shown around their first difference
    (two strings with its offset), as cutting both at the start may show the same text."""
    mine, theirs = repr(recorded), repr(got)
    if len(mine) <= _SHOWN and len(theirs) <= _SHOWN:
        return f": recorded {mine}, got {theirs}"
    if isinstance(recorded, str) and isinstance(got, str):
        at = _first_change(recorded, got)
        return f", character {at}: recorded {_around(recorded, at)}, got {_around(got, at)}"
    if type(recorded) is type(got):  # two lists, say: around the first change of their reprs
        at = _first_change(mine, theirs)
        old, new = _around(mine, at, quote=False), _around(theirs, at, quote=False)
        return f": recorded {old}, got {new}"
    return f": recorded {_short(recorded)}, got {_short(got)}"


def _first_change(a: str, b: str) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def _around(text: str, at: int, *, quote: bool = True) -> str:
    start, end = max(0, at - _AROUND), at + _AROUND
    piece = repr(text[start:end]) if quote else text[start:end]
    return f"{'...' if start else ''}{piece}{'...' if end < len(text) else ''}"


def _short(value: Any) -> str:
    if isinstance(value, str) and len(value) > _SHOWN:
        return f"{value[: _SHOWN - 10]!r}..."
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 3]}..."


class _BadContent(ToolError, ValueError):
    """A binary value that cannot be sent as given (a mistake in the tool's code)."""


class _NotJson(ToolError, TypeError):
    """A value in a tool's result that no rule makes JSON (a mistake in the tool's code);
    ``value`` is that value, for the message to say where it is."""

    def __init__(self, message: str, value: Any) -> None:
        super().__init__(message)
        self.value = value

    def __reduce__(self) -> tuple[Any, ...]:
        # The value may not pickle, and only the message tells a reader anything.
        return (_rebuilt, (type(self), self.args), {**self.__dict__, "value": None})


class _BadContentType(ToolError, TypeError):
    """A binary value built from something that is not bytes."""


class _AuthTypeError(ToolError, TypeError):
    """A transport's ``auth`` is not an ``httpx2.Auth`` (a mistake in the caller's code)."""


class _ListenerTypeError(ToolError, TypeError):
    """An ``on_event`` listener that is not a plain function (a mistake in the caller's
    code): an async one's coroutines would never be awaited."""


class _CassetteTypeError(CassetteError, TypeError):
    """A :class:`~agcore_tools.testing.Cassette` option of the wrong type (a mistake in
    the caller's code), such as one string where a list of secrets goes."""


class _CassetteConfigError(CassetteError, ValueError):
    """A :class:`~agcore_tools.testing.Cassette` set up so that it cannot work: an unknown
    record mode, or an OpenAI SDK it cannot plug into (a mistake in the caller's setup)."""


class _ScriptedServerError(AgcoreError, RuntimeError):
    """A :class:`~agcore_tools.testing.ScriptedChatServer` used in the wrong state (its
    URL asked for before it started, started twice) or that did not start or stop in
    time."""


class _OptionTypeError(ToolError, TypeError):
    """An option or argument of the wrong type given to the library (a mistake in the
    caller's code), such as ``configure_tracing(capture_content="yes")``."""


class _UnknownKeywordError(ToolConfigError, LlmUsageError):
    """A keyword the function called does not take, such as ``tool(timout=5)``: a
    mistake in the caller's code. One type for every entry point, so one ``except``
    catches ``tool()`` and ``registry.tool()`` alike: a :class:`TypeError`, as Python's
    own error for it is, and a :class:`ToolConfigError` and an :class:`LlmUsageError`,
    as the tool options' and the loop's errors for it were."""
