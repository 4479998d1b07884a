"""``LlmCycle``: a thin conversation loop over the official OpenAI SDK (Chat Completions,
or the Responses API with ``CycleConfig(api="responses")``; see ``_wires.py``).

Every ``submit*`` method runs the same loop (``_run.Run.events``); the streaming
ones hand its events to the caller, the others drain them and return the
:class:`ChatResponse`. A request is one turn; a turn whose assistant message has tool
calls runs them through the registry and sends their results back in the next turn.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from typing_extensions import Self, deprecated

from .. import _sync
from .._deprecated import renamed
from .._keywords import checks_public_keywords
from .._selection import Selector, check_selector
from .._unicode import scrub
from ..approval import ApprovalDecision
from ..base import ToolContext
from ..error import LlmUsageError
from ..pending import InputAnswer
from ..registry import ToolRegistry
from ._approval import Gate, answer_list
from ._client import ClientTypeError, accept_client, client_from_env
from ._event_stream import EventStream
from ._given import check_history, given_messages, kind
from ._outcome import Outcome
from ._output import start_output
from ._run import Run, Session
from ._submit_args import Tools, as_registry, prompt_messages, user_message
from ._trace import run_trace
from ._transcript import TranscriptViews
from .config import CycleConfig
from .events import ChatResponse
from .profiles import OPENAI
from .requester import OpenAIRequester, Requester, checked_requester
from .sync import SyncEventStream

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

__all__ = ["EventStream", "LlmCycle"]

logger = logging.getLogger("agcore_tools.cycle")

Message = dict[str, Any]


@checks_public_keywords
class LlmCycle(TranscriptViews):
    """A conversation with a model, with an automatic tool loop.

    It drives ``AsyncOpenAI().chat.completions``, so it works with OpenAI and every
    OpenAI-compatible server; ``CycleConfig(api="responses")`` drives
    ``responses.create`` instead, with the same events, errors and history. Without
    ``client``, one is created from the usual environment variables
    (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``). The cycle's requests use a copy of the
    client with the SDK's own retries turned off; the cycle retries by itself (see
    :class:`CycleConfig`).

    ``client`` is an ``AsyncOpenAI`` (or a subclass such as ``AsyncAzureOpenAI``),
    used as given, or a sync ``OpenAI``: the cycle then builds and owns its async twin,
    with the same API key, organization, project, base URL, timeout, retries, default
    headers and default query (one built with a custom ``http_client`` is refused, as
    it cannot carry over: pass your own ``AsyncOpenAI`` for that). Anything else raises
    ``TypeError``. Synchronous code
    calls the ``*_sync`` methods, which run the same loop on agcore_tools' own event
    loop (see the second example).

    The cycle reaches the model only through its :attr:`requester`: an
    :class:`~agcore_tools.cycle.OpenAIRequester` over ``client``, or the
    :class:`~agcore_tools.cycle.Requester` given as ``requester=`` instead of a client
    (a Temporal activity, a test's canned answers; see
    :mod:`agcore_tools.cycle.requester`).

    The history is :attr:`messages`: plain dicts in the Chat Completions request
    format, ready to send again or to serialise as JSON. On the Responses API each
    assistant message also keeps its ``response`` (id and output items, reasoning
    included), so a saved history resumes on that API; Chat Completions requests leave
    that key out. One cycle runs one ``submit*`` call at a time: a second one started
    while the first runs raises :class:`~agcore_tools.error.LlmUsageError`, so give each
    concurrent conversation (each thread of a threaded app) its own cycle.

    Example:
        >>> import asyncio
        >>> from agcore_tools import CycleConfig, LlmCycle, ToolRegistry
        >>> from agcore_tools.testing import ScriptedChatServer as Scripted
        >>> registry = ToolRegistry()
        >>> @registry.tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> async def main(server: Scripted) -> str:
        ...     async with server.client() as client:  # any AsyncOpenAI client works here
        ...         cycle = LlmCycle(CycleConfig("gpt-4o-mini"), client=client)
        ...         response = await cycle.submit_with_tools("What is 2 + 3?", registry)
        ...         print([message["role"] for message in cycle.messages])
        ...         return response.text
        >>> script = [Scripted.reply_tool_calls([("add", {"a": 2, "b": 3})]), Scripted.reply_text("5")]
        >>> with Scripted(script) as server:  # an offline model, for the example
        ...     asyncio.run(main(server))
        ['user', 'assistant', 'tool', 'assistant']
        '5'

        The same from synchronous code, with the sync client; the streaming methods
        return a plain iterator (:class:`~agcore_tools.SyncEventStream`):

        >>> from openai import OpenAI
        >>> script += [Scripted.reply_text(text) for text in ("Yes.", "Welcome.", "Bye!")]
        >>> with Scripted(script) as server:
        ...     cycle = LlmCycle(CycleConfig("m"), client=OpenAI(base_url=server.base_url, api_key="-"))
        ...     print(cycle.submit_with_tools_sync("What is 2 + 3?", registry).text)
        ...     print(cycle.submit_messages_sync([{"role": "user", "content": "Sure?"}]).text)
        ...     print([type(e).__name__ for e in cycle.submit_stream_sync("Thanks")])
        ...     print(cycle.submit_stream_with_tools_sync("Bye", registry).collect().text)
        ...     cycle.close_sync()  # or use `with LlmCycle(...) as cycle:`
        5
        Yes.
        ['AssistantTextDelta', 'TurnComplete']
        Bye!
    """

    def __init__(
        self,
        config: CycleConfig,
        *,
        client: AsyncOpenAI | OpenAI | None = None,
        system_prompt: str | None = None,
        requester: Requester | None = None,
    ) -> None:
        if not isinstance(config, CycleConfig):
            raise _config_type_error(config)
        if system_prompt is not None and not isinstance(system_prompt, str):
            # Sent as is, it would stay in the history, and servers refuse it.
            raise LlmUsageError(
                f"LlmCycle's system_prompt is a string or None, got {kind(system_prompt)}"
            )
        self.config = config
        """The cycle's settings; replace it to change them:
        ``dataclasses.replace(config, limits=replace(config.limits, max_turns=5))``
        (see :class:`CycleConfig`)."""
        owned = False
        if requester is None:
            driven, owned = accept_client(client) if client is not None else (None, True)
            requester = OpenAIRequester(driven if driven is not None else client_from_env())
        elif client is not None:
            raise ClientTypeError("LlmCycle takes client= or requester=, not both")
        self.requester: Requester = checked_requester(requester)
        """What the cycle sends its requests through (see :class:`Requester`): the one
        given, or an :class:`OpenAIRequester` over ``client``."""
        self.client: AsyncOpenAI | None = (
            requester.client if isinstance(requester, OpenAIRequester) else None
        )
        """The SDK client given (or created, or a sync client's async twin); requests use
        a retry-less copy of it. None when the requester given sends through no SDK
        client."""
        self.messages: list[Message] = []
        """The conversation so far, in the Chat Completions request format."""
        if system_prompt is not None:
            # A lone surrogate (a file name os.listdir decoded) would fail every request.
            self.messages.append({"role": "system", "content": scrub(system_prompt)})
        self._owns_client = owned
        self._session = Session()  # request count, busy and closed flags, a resumed run's state

    # -- public API ----------------------------------------------------------------

    async def submit(self, prompt: str, *, output_type: Any = None) -> ChatResponse:
        """Send a user message and return the model's answer (no tools).

        Example:
            >>> async def main(cycle):  # doctest: +SKIP
            ...     return (await cycle.submit("Say hi")).text
        """
        return await self._start(
            [user_message(prompt)], None, None, None, False, output_type
        ).collect()

    async def submit_messages(
        self, messages: Iterable[Mapping[str, Any] | BaseModel], *, output_type: Any = None
    ) -> ChatResponse:
        """Append ``messages`` to the history as they are (no user message is added),
        then ask the model (no tools).

        ``messages`` is a list (any iterable) of dicts, each with a ``role`` (system,
        developer, user, assistant, tool or function; on the Responses API a typed
        input item may have none), or the OpenAI SDK's message objects, read as their
        ``to_dict()``. Anything else raises an
        :class:`~agcore_tools.error.LlmUsageError` (a ``TypeError``) before the history
        changes, as do messages that end with tool calls no tool message answers (no
        tool runs here, and the API refuses an unanswered call): answer them first, or
        go on with ``submit_with_tools(None, registry)``, which runs them.

        ``submit_messages([])`` resends the history as it is, without tools, for example
        after a failed request; one that ends with unanswered tool calls is refused
        the same way, unsent. To go on with a tool loop that stopped (an error,
        ``max_turns``), use ``submit_with_tools(None, registry)``.

        Example:
            >>> import asyncio
            >>> from agcore_tools.testing import ScriptedChatServer
            >>> async def main(server: ScriptedChatServer) -> tuple[str, int]:
            ...     async with server.client() as client:
            ...         cycle = LlmCycle(CycleConfig("m"), client=client)
            ...         response = await cycle.submit_messages([
            ...             {"role": "system", "content": "Answer in French."},
            ...             {"role": "user", "content": "Hello"},
            ...         ])
            ...         return response.text, len(cycle.messages)
            >>> with ScriptedChatServer([ScriptedChatServer.reply_text("Bonjour")]) as server:
            ...     asyncio.run(main(server))
            ('Bonjour', 3)
        """
        added = given_messages(messages, self.config.api, "submit_messages")
        return await self._start(added, None, None, None, False, output_type).collect()

    def submit_stream(self, prompt: str, *, output_type: Any = None) -> EventStream:
        """Like :meth:`submit`, streaming text deltas and a final ``TurnComplete``.

        Example:
            >>> async def main(cycle):  # doctest: +SKIP
            ...     async for event in cycle.submit_stream("Tell me a joke"):
            ...         if isinstance(event, AssistantTextDelta):
            ...             print(event.text, end="")
        """
        return self._start([user_message(prompt)], None, None, None, True, output_type)

    async def submit_with_tools(
        self,
        prompt: str | None,
        registry: Tools,
        *,
        ctx: ToolContext | None = None,
        select: Selector | None = None,
        approvals: Iterable[ApprovalDecision | InputAnswer] | None = None,
        output_type: Any = None,
    ) -> ChatResponse:
        """Send a user message, run the tools the model calls, and repeat until it answers.

        ``registry`` is a :class:`~agcore_tools.ToolRegistry`, or one tool (a function
        decorated with ``@tool``, any :class:`~agcore_tools.BaseTool`) or a list or tuple
        of them: the call then puts them in a fresh ``ToolRegistry()`` of its own, with
        the default settings (no permission checker, not strict). ``None`` and anything
        else raise a ``TypeError`` naming what is accepted: call :meth:`submit` to chat
        without tools, or pass ``ToolRegistry()`` for an empty tool set.

        Recoverable tool errors go back to the model as text. Unrecoverable ones
        (unknown tool, denied permission, MCP and I/O failures) stop the loop with an
        :class:`LlmError` whose ``__cause__`` is the :class:`ToolError`; the history
        stays valid (every call gets a tool message). A request past
        ``config.max_turns`` raises :class:`MaxTurnsExceededError` unsent.
        ``CycleConfig(unknown_tool="tell_model")`` sends an unknown tool's error to the
        model instead of stopping.

        With ``prompt=None`` no user message is added and the loop goes on from the
        history as it is: it first runs the calls of the last assistant message that no
        tool message answers yet, then asks the model, with the registry's tools. That
        resumes a loop that stopped, or runs tool calls that came from :meth:`submit`.

        ``ctx`` is the context every tool call derives its own from (session id,
        metadata, cancellation, ``on_event`` for progress reports and preliminary
        results); a fresh one by default. Each run gets a fresh ``shared_state``; a run
        with ``prompt=None`` keeps the one of the run it resumes. Cancelling it
        (``ctx.cancellation.cancel()``, from any thread: a Stop button) stops the run:
        no request is sent after that, the one in flight is closed, running tools are
        cancelled, the history stays valid, and the call raises
        :class:`~agcore_tools.RunStoppedError` (a stream's iteration ends instead, as
        after ``aclose()``). A cancelled context stops every later run it is given. A ``ctx`` or ``select``
        of the wrong type raises a ``TypeError`` before the prompt joins the history.

        ``select`` chooses the tools each request offers (names, a
        :class:`~agcore_tools.ToolSelection`, a :class:`~agcore_tools.ToolSearch`, or a
        callable ``(history, registry) -> names`` asked before each request); every
        tool by default. A call to a tool that was not offered is an unknown tool's,
        unless the permission checker refuses the tool: that stops the loop, as without
        ``select``.
        (Calls a resumed history left open, with ``prompt=None``, were offered by an
        earlier request: they run against the whole registry.)
        ``CycleConfig(max_definition_tokens=...)`` refuses, unsent, a request whose
        definitions cost more (:class:`~agcore_tools.DefinitionBudgetError`).

        ``output_type`` (every ``submit*`` method takes it) validates the final answer
        into a type, as ``ChatResponse.output``: see :class:`~agcore_tools.StructuredOutput`.

        A call to a tool that needs approval pauses the run: ``ChatResponse.pending_approvals``
        lists the waiting calls; resume with ``prompt=None`` and ``approvals`` (see
        :mod:`agcore_tools.approval`). A call that asks the user something (an MCP
        server's input request) pauses the same way: ``ChatResponse.pending`` lists
        every waiting item, and ``approvals`` takes the answers to both kinds (see
        :mod:`agcore_tools.pending`).
        """
        tools = as_registry(registry, "submit_with_tools")
        return await self._start(
            prompt_messages(prompt), tools, ctx, select, False, output_type, approvals
        ).collect()

    def submit_stream_with_tools(
        self,
        prompt: str | None,
        registry: Tools,
        *,
        ctx: ToolContext | None = None,
        select: Selector | None = None,
        approvals: Iterable[ApprovalDecision | InputAnswer] | None = None,
        output_type: Any = None,
    ) -> EventStream:
        """Like :meth:`submit_with_tools` (``prompt=None`` too, and a tool or a list of
        tools in place of a registry), streaming events as they happen.

        The stream is for ``async for``; a plain ``for`` raises a ``TypeError``: from
        synchronous code, call :meth:`submit_stream_with_tools_sync`.

        Per turn: ``AssistantTextDelta`` (and ``ReasoningDelta``) events, then
        ``TurnComplete``; for a tool turn, a ``ToolExecutionStarted`` per call, then a
        ``ToolExecutionCompleted`` as each call ends (after its ``ToolProgress`` and
        ``ToolPartialResult`` events, if any); then the next turn. The last
        event is the final turn's ``TurnComplete``.

        Example:
            >>> import asyncio
            >>> from agcore_tools.testing import ScriptedChatServer as Scripted
            >>> registry = ToolRegistry()
            >>> @registry.tool
            ... def add(a: int, b: int) -> int:
            ...     '''Add two integers.'''
            ...     return a + b
            >>> async def main(server: Scripted) -> None:
            ...     async with server.client() as client:
            ...         cycle = LlmCycle(CycleConfig("m"), client=client)
            ...         async with cycle.submit_stream_with_tools("2 + 3?", registry) as events:
            ...             async for event in events:
            ...                 print(type(event).__name__)
            >>> script = [Scripted.reply_tool_calls([("add", {"a": 2, "b": 3})]), Scripted.reply_text("5")]
            >>> with Scripted(script) as server:
            ...     asyncio.run(main(server))
            TurnComplete
            ToolExecutionStarted
            ToolExecutionCompleted
            AssistantTextDelta
            TurnComplete
        """
        tools = as_registry(registry, "submit_stream_with_tools")
        return self._start(
            prompt_messages(prompt), tools, ctx, select, True, output_type, approvals
        )

    async def close(self) -> None:
        """Close the SDK client if this cycle created it.

        A client passed as ``client=`` (or a requester passed as ``requester=``)
        belongs to the caller, who closes it. A call still running when the cycle closes
        its own client raises :class:`~agcore_tools.LlmUsageError` at its next request, or
        at once if a response was being received (the request is not retried).

        Example:
            >>> async def main() -> None:
            ...     async with LlmCycle(CycleConfig("gpt-4o-mini")) as cycle:  # close() on exit
            ...         print((await cycle.submit("Hi")).text)
        """
        if self._owns_client and self.client is not None:
            self._session.closed = True
            await self.client.close()

    @deprecated("LlmCycle.aclose() is deprecated; use LlmCycle.close()", category=None)
    async def aclose(self) -> None:
        """Deprecated: use :meth:`close`.

        Example:
            >>> async def main(cycle: LlmCycle) -> None:  # doctest: +SKIP
            ...     await cycle.aclose()  # a DeprecationWarning; await cycle.close()
        """
        renamed("LlmCycle.aclose()", "LlmCycle.close()")
        await self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- sync entry points -----------------------------------------------------------
    # Each runs the async method on agcore_tools' own event loop (see _sync.py).

    def submit_sync(self, prompt: str, *, output_type: Any = None) -> ChatResponse:
        """:meth:`submit` for synchronous code.

        Example:
            >>> from openai import OpenAI
            >>> from agcore_tools.testing import ScriptedChatServer
            >>> with ScriptedChatServer([ScriptedChatServer.reply_text("Hi!")]) as server:
            ...     with LlmCycle(CycleConfig("m"), client=OpenAI(base_url=server.base_url,
            ...                                                   api_key="-")) as cycle:
            ...         print(cycle.submit_sync("Hello").text)
            Hi!
        """
        return self._run_sync(self.submit(prompt, output_type=output_type))

    def submit_messages_sync(
        self, messages: Iterable[Mapping[str, Any] | BaseModel], *, output_type: Any = None
    ) -> ChatResponse:
        """:meth:`submit_messages` for synchronous code."""
        added = given_messages(messages, self.config.api, "submit_messages_sync")
        return self._run_sync(self.submit_messages(added, output_type=output_type))

    def submit_with_tools_sync(
        self,
        prompt: str | None,
        registry: Tools,
        *,
        ctx: ToolContext | None = None,
        select: Selector | None = None,
        approvals: Iterable[ApprovalDecision | InputAnswer] | None = None,
        output_type: Any = None,
    ) -> ChatResponse:
        """:meth:`submit_with_tools` for synchronous code; Ctrl-C stops the loop and its tools.

        So does ``ctx.cancellation.cancel()`` from another thread (a Stop button): the
        call then raises :class:`~agcore_tools.RunStoppedError`.

        ``registry`` is a ``ToolRegistry``, a tool or a list of tools, as for
        :meth:`submit_with_tools`; a wrong one raises ``TypeError`` here, unsent.
        """
        answers = answer_list(approvals)  # read in this thread
        tools = as_registry(registry, "submit_with_tools_sync")  # raises in this thread
        run = self.submit_with_tools(
            prompt, tools, ctx=ctx, select=select, approvals=answers, output_type=output_type
        )
        return self._run_sync(run)

    def submit_stream_sync(self, prompt: str, *, output_type: Any = None) -> SyncEventStream:
        """:meth:`submit_stream` for synchronous code: a plain iterator of the same events."""
        self._owned_at_exit()
        return SyncEventStream(self.submit_stream(prompt, output_type=output_type))

    def submit_stream_with_tools_sync(
        self,
        prompt: str | None,
        registry: Tools,
        *,
        ctx: ToolContext | None = None,
        select: Selector | None = None,
        approvals: Iterable[ApprovalDecision | InputAnswer] | None = None,
        output_type: Any = None,
    ) -> SyncEventStream:
        """:meth:`submit_stream_with_tools` for synchronous code: a plain iterator of the
        same events (see :class:`~agcore_tools.SyncEventStream`).

        ``registry`` is a ``ToolRegistry``, a tool or a list of tools, as for
        :meth:`submit_with_tools`; a wrong one raises ``TypeError`` here, unsent.
        """

        tools = as_registry(registry, "submit_stream_with_tools_sync")
        events = self.submit_stream_with_tools(
            prompt, tools, ctx=ctx, select=select, approvals=approvals, output_type=output_type
        )
        self._owned_at_exit()
        return SyncEventStream(events)

    def close_sync(self) -> None:
        """:meth:`close` for synchronous code (also called by ``with``); at interpreter
        exit, after the library's wind-down closed what the cycle held, it returns
        quietly."""
        _sync.run_close(self.close())

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close_sync()

    def _run_sync(self, call: Coroutine[Any, Any, ChatResponse]) -> ChatResponse:
        self._owned_at_exit()
        return _sync.run(call)

    def _owned_at_exit(self) -> None:
        # A client the cycle built, about to open connections on the library's loop: a
        # script that never calls close_sync() has it closed at exit, as a sync
        # OpenAI's sockets are, not left to warn of an unclosed transport. A client of
        # the app's stays the app's.
        if self._owns_client and self.client is not None:
            _sync.close_at_exit(self.client)

    # -- the loop --------------------------------------------------------------------

    def _start(
        self,
        added: list[Message],
        registry: ToolRegistry | None,
        ctx: ToolContext | None,
        select: Selector | None,
        stream: bool,
        output_type: Any = None,
        approvals: Iterable[ApprovalDecision | InputAnswer] | None = None,
    ) -> EventStream:
        if self._session.closed:
            raise LlmUsageError(
                "this LlmCycle is closed: close() closed the client it made; make a new LlmCycle"
            )
        check_history(self.messages)  # the app may have put anything in it
        # Checked here, before the run adds the prompt to the history.
        if ctx is not None and not isinstance(ctx, ToolContext):
            raise LlmUsageError(
                f"ctx must be a ToolContext or None, got {type(ctx).__name__}: for a "
                "session id, pass ctx=ToolContext(session_id=...)"
            )
        check_selector(select)
        config = self.config
        # A type pydantic cannot handle raises here, in the caller's frame; the run
        # plans it again if the server's profile asks for another mode.
        known = config.profile or self._session.profile or OPENAI
        output = (
            start_output(output_type, config.request_options, registry, known, config.api)
            if output_type is not None
            else None
        )
        gate = Gate(approvals, config.approval_key)
        outcome = Outcome()
        trace = run_trace(config, self.requester, outcome)
        run = Run(
            self._session,
            config,
            self.requester,
            self.messages,
            added,
            registry,
            ctx,
            select,
            stream,
            outcome,
            trace,
            output,
            output_type,
            gate,
        )
        stop = ctx.cancellation if ctx is not None else None  # the app's Stop button
        return EventStream(run.events(), outcome, trace, stop)


def _config_type_error(config: object) -> LlmUsageError:
    model = repr(config) if isinstance(config, str) else '"gpt-4o-mini"'
    return LlmUsageError(
        f"LlmCycle takes a CycleConfig, got {type(config).__name__}: "
        f"use LlmCycle(CycleConfig({model}), ...)"
    )
