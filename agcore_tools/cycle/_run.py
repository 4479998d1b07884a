"""One ``submit*`` call's loop: request, run the tools the model calls, repeat.

:class:`~agcore_tools.LlmCycle` is the façade: each ``submit*`` method builds a
:class:`Run` and hands its :meth:`Run.events` to an
:class:`~agcore_tools.EventStream`. The loop lives here, below both, so a call goes
down from the cycle through the stream into the loop and never back into the cycle.
What outlives a call (the request counter, the busy flag, the shared state a resumed
run keeps) is the cycle's :class:`Session`, passed in.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
from collections.abc import AsyncGenerator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .. import _otel, _sync
from .._budget import load_counter
from .._run_offer import RunOffer
from .._selection import Selector
from ..base import ToolContext
from ..error import (
    LlmConfigError,
    LlmError,
    LlmUsageError,
    MaxTurnsExceededError,
    OutputValidationError,
    RunStoppedError,
)
from ..registry import ToolInvocation, ToolRegistry
from ._approval import Gate, decline_open, paused_response
from ._call_ids import IDS_PAST_HISTORY, UNIQUE_CALL_IDS, call_ids, first_free_tag
from ._client import FORKED, check_client_loop, loop_misuse
from ._costs import NO_TOOL_COSTS, CostMeter
from ._outcome import Outcome
from ._output import FINAL_TOOL, OutputRun, Verdict, start_output
from ._policy import (
    FREE,
    HistoryMark,
    answer_unanswered,
    answered_id,
    check_open_calls,
    check_open_tools,
    check_tool_choice,
    clean_turn,
    drop_program_states,
    forced_choice_served,
    is_answer,
    mark_history,
    relaxed_tool_choice,
    unanswered_calls,
)
from ._stream import EMPTY_STREAM
from ._tool_stream import run_context
from ._tool_turn import run_tools
from ._trace import RunTrace
from ._wire_responses import ResponsesWire, fold_submitted, to_input, to_tool
from ._wires import wire_for
from .config import CycleConfig
from .events import (
    ZERO_USAGE,
    AssistantTextDelta,
    ChatResponse,
    FinishReason,
    ReasoningDelta,
    StreamEvent,
    TurnComplete,
    Usage,
)
from .output import StructuredOutput
from .profiles import (
    OPENAI,
    Refusal,
    ServerProfile,
    check_tool_count,
    fit_request,
    fit_responses_request,
    read_refusal,
    streams_auto_choice,
)
from .requester import OpenAIRequester, Requester, TurnRequest

__all__ = ["UNOFFERED_CHOICE_REFUSED", "Run", "Session"]

Message = dict[str, Any]

logger = logging.getLogger("agcore_tools.cycle")

_UNREPORTED = Usage(unreported=1)  # a request whose response had no usage


@dataclass
class Session:
    """What an ``LlmCycle`` keeps between its calls, besides the history.

    Example:
        >>> Session()
        Session(requests=0, busy=False, closed=False)
    """

    requests: int = 0
    """Requests sent over the cycle's life, or more: tags the tool call ids it generates
    (``call_{requests}_{n}``), so each run first moves it past the tags its history
    holds (see :func:`first_free_tag`)."""
    busy: bool = False
    """True while a call runs: one cycle runs one call at a time."""
    closed: bool = False
    """True once ``close()`` closed the client the cycle made: a call running then ends."""
    profile: ServerProfile | None = field(default=None, repr=False)
    """The server profile the last call ran with, so a change is logged once."""
    adapted: tuple[ServerProfile | None, ServerProfile] | None = field(default=None, repr=False)
    """The config's profile and what a refusal turned it into, kept for later calls."""
    shared: dict[str, Any] | None = field(default=None, repr=False)
    """The last run's shared state, which a resumed run (``prompt=None``) keeps."""
    loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    """The event loop of the last call: an SDK client's connections belong to it."""
    rejected: tuple[Message, Any] | None = field(default=None, repr=False)
    """The answer an ``OutputValidationError`` left last in the history, with its output
    type: a resume with that type, on that history, tells the model why it failed."""


UNOFFERED_CHOICE_REFUSED: ContextVar[bool] = ContextVar(
    "agcore_tools_unoffered_choice_refused", default=True
)
"""Whether a request whose ``tool_choice`` names a tool it does not offer is refused
before it is sent (:func:`~agcore_tools.cycle._policy.check_tool_choice`). False only in
a Temporal workflow run begun before that (its ``workflow.patched``): such a run sent
the request, and a replay must schedule the same activity."""


def _refuse_open_given(calls: list[Any]) -> None:
    """Refuse, before anything is sent, messages given to a run that end with tool calls
    no tool message answers: OpenAI's APIs refuse such a request (a 400), others answer
    as if the calls had failed, and no tool would run them (``submit_messages`` offers
    none).

    Example:
        >>> from agcore_tools.calls import parse_call
        >>> _refuse_open_given([parse_call("add", "c1", "{}")])
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmUsageError: the messages given end with tool calls that no tool message answers (c1 to add), which OpenAI's APIs refuse, so nothing was sent: append their answers (registry.run_tool_calls() of the calls gives them), or put the messages in cycle.messages as dicts and call submit_with_tools(None, registry), which runs the calls
    """
    if not calls:
        return
    raise LlmUsageError(
        "the messages given end with tool calls that no tool message answers "
        f"({_named(calls)}), which OpenAI's APIs refuse, so nothing was sent: append "
        "their answers (registry.run_tool_calls() of the calls gives them), or put the "
        "messages in cycle.messages as dicts and call submit_with_tools(None, registry), "
        "which runs the calls"
    )


def _refuse_open_history(calls: list[Any]) -> None:
    """Refuse, before anything is sent, a run given no message and no tools
    (``submit_messages([])``) on a history that ends with tool calls no tool message
    answers: it would send them unanswered, which OpenAI's APIs refuse (a 400).

    Example:
        >>> from agcore_tools.calls import parse_call
        >>> _refuse_open_history([parse_call("add", "c1", "{}")])
        Traceback (most recent call last):
        ...
        agcore_tools.error.LlmUsageError: the history ends with tool calls that no tool message answers (c1 to add), which OpenAI's APIs refuse, so nothing was sent: append their answers to cycle.messages (registry.run_tool_calls() of the calls gives them), or call submit_with_tools(None, registry), which runs the calls
    """
    if not calls:
        return
    raise LlmUsageError(
        f"the history ends with tool calls that no tool message answers ({_named(calls)}), "
        "which OpenAI's APIs refuse, so nothing was sent: append their answers to "
        "cycle.messages (registry.run_tool_calls() of the calls gives them), or call "
        "submit_with_tools(None, registry), which runs the calls"
    )


def _named(calls: list[Any]) -> str:
    """The first calls as ``id to name``, and how many more there are."""
    named = ", ".join(f"{call.call_id} to {call.name}" for call in calls[:5])
    return named + (f" and {len(calls) - 5} more" if len(calls) > 5 else "")


def _check_stop(ctx: ToolContext, usage: Usage) -> None:
    """End the run once the app cancelled its context (a Stop button, from any thread).

    The event stream cancels the step under way as soon as its loop learns of the
    cancel; this keeps a request or a tool turn from starting before that, as the flag
    is set at once in the cancelling thread.
    """
    if ctx.cancelled:
        raise RunStoppedError(usage)


@dataclass
class Run:
    """Everything one ``submit*`` call's loop reads, and the holders it writes.

    ``messages`` is the cycle's history, appended to in place; ``outcome`` receives the
    :class:`~agcore_tools.ChatResponse`.
    """

    session: Session
    config: CycleConfig
    requester: Requester
    messages: list[Message]
    added: list[Message]
    registry: ToolRegistry | None
    ctx: ToolContext | None
    select: Selector | None
    stream: bool
    outcome: Outcome
    trace: RunTrace | None
    output: OutputRun | None
    output_type: Any
    gate: Gate

    async def _profile(self) -> ServerProfile:
        """The server's profile: the config's, else the requester's, else OpenAI's;
        logged at INFO when it differs from the cycle's last call's."""
        given = self.config.profile
        session = self.session
        if session.adapted is not None and session.adapted[0] is given:
            return session.adapted[1]  # what a refusal taught this cycle, for this config
        profile = given or await self.requester.server_profile() or OPENAI
        if profile is not session.profile:
            source = (
                "CycleConfig.profile"
                if given is not None
                else "the default"
                if profile is OPENAI
                else "the server"
            )
            logger.info("LlmCycle: server profile %r (from %s)", profile.name, source)
            session.profile = profile
        return profile

    def _adapt(self, refused: Refusal) -> ServerProfile:
        """Take up the profile a refusal calls for, for this cycle and the requester's
        client, and say so once, at WARNING."""
        server = self.requester.trace_attributes().get("server.address", "the server")
        logger.warning(
            "%s refused %s: falling back to %s, for this client from now on "
            "(CycleConfig(adapt=False) turns this off)",
            server,
            refused.capability,
            refused.fallback,
        )
        self.session.profile = refused.profile
        self.session.adapted = (self.config.profile, refused.profile)
        self.requester.remember_profile(refused.profile)
        return refused.profile

    async def events(self) -> AsyncGenerator[StreamEvent, None]:
        """The call's events, as the loop makes them; the response goes to ``outcome``."""
        session, messages, registry = self.session, self.messages, self.registry
        added, output, gate, outcome, trace = (
            self.added,
            self.output,
            self.gate,
            self.outcome,
            self.trace,
        )
        if session.busy:
            # A caller's mistake (two calls sharing a cycle), not a failed request.
            raise LlmUsageError(
                "this LlmCycle is already running a submit call, and runs one at a time: "
                "wait for that call to end (a stream left unfinished: close it, `await "
                "events.aclose()`, or iterate it in an `async with events:` block; a sync "
                "stream: `events.close()` or `with events:`), or give each concurrent "
                "conversation (each thread or request) its own LlmCycle"
            )
        forked = _sync.inherited(session.loop)
        loop = asyncio.get_running_loop()
        if isinstance(self.requester, OpenAIRequester):
            if forked:
                # Refused unsent: the SDK client would send on the parent's connections.
                raise LlmUsageError(FORKED)
            # A client shared by cycles on two loops: refused unsent, not failed after.
            check_client_loop(self.requester.client, loop)
        session.busy = True
        moved, session.loop = session.loop is not None and session.loop is not loop, loop
        if self.config.api == "responses":
            # A history the app built from its own response.output: its open calls as
            # the loop's own, found, run or declined as a Chat history's are.
            fold_submitted(messages, added)
        start = len(messages)
        unsent: tuple[HistoryMark, dict[str, Any] | None] | None = None
        meter: CostMeter | None = None
        usage = ZERO_USAGE
        invocations: list[ToolInvocation] = []
        try:
            if self.ctx is not None:  # a context cancelled before the run began
                _check_stop(self.ctx, usage)
            config = self.config
            profile = await self._profile()
            bare = not isinstance(self.output_type, StructuredOutput)
            mode = profile.output_mode(config.api)
            if output is not None and bare and output.plan.spec.mode != mode:
                # A bare output type asks the way this server's profile says.
                output = start_output(
                    self.output_type, config.request_options, registry, profile, config.api
                )
            if config.api == "responses" and not profile.responses_api:
                raise LlmConfigError(
                    f"the {profile.name} server has no Responses API (its server profile "
                    "says so): use CycleConfig(api='chat')"
                )
            limits = config.limits
            wire = wire_for(config)
            # Each API's request is fitted to the profile by its own function.
            fit = fit_request if config.api == "chat" else fit_responses_request
            if registry is not None:  # tiktoken's data, read or fetched off the loop
                await load_counter(config.model)
            offer = (
                await RunOffer.start(registry, self.select, config.model)
                if registry is not None
                else None
            )
            if registry is not None:  # what each tool costs: counted once, when the run ends
                meter = CostMeter(
                    config.model,
                    registry,
                    (to_input, to_tool) if config.api == "responses" else None,
                    self.requester.trace_attributes,
                )
            relaxed = (
                relaxed_tool_choice(config.request_options, profile)
                if config.reset_tool_choice
                else None
            )
            # Until the first request is sent, a refusal (the definitions' budget, the
            # server's tool limit) gives the history back as it was: the errors say to
            # submit the prompt again with fewer tools, and it must join the history once.
            unsent = (mark_history(messages), session.shared) if added else None
            ctx = run_context(
                self.ctx, None if added else session.shared, self.stream and registry is not None
            )
            session.shared = ctx.shared_state
            if added:
                # A paused run the app moved on from, with or without tools (the API needs
                # every call answered), but for the calls the app answers itself.
                # Only the answers heading the added messages answer the open calls: a
                # later turn in them may reuse an id.
                leading = itertools.takewhile(is_answer, added)
                decline_open(messages, {answered_id(m) for m in leading})
            messages.extend(added)
            drop_program_states(messages)  # open calls the app answered itself
            if added:
                _refuse_open_given(unanswered_calls(messages[start:]))
            elif registry is None:  # submit_messages([]): nothing moves on from them
                _refuse_open_history(unanswered_calls(messages))
            served = forced_choice_served(messages)
            # A history made by another cycle (saved, resumed) has ids of its own.
            if IDS_PAST_HISTORY.get():
                session.requests = first_free_tag(messages, session.requests)
            # 0. Resuming (no new message): first run the calls the history left open.
            pending = unanswered_calls(messages) if registry is not None and not added else []
            gate.check_resume(not added, pending)
            if pending:
                check_open_calls(messages, config.approval_key)
            if registry is not None and pending:
                runner = offer.for_open_calls() if offer is not None else registry
                check_open_tools(runner, pending)
                async for event in run_tools(
                    config, messages, runner, pending, ctx, invocations, gate, profile
                ):
                    yield event
                if gate.waiting:  # still paused: answer the requests to go on
                    outcome.response = dataclasses.replace(
                        paused_response(messages, usage, 0, invocations, gate.waiting),
                        tool_costs=meter.settle(messages, start, invocations)
                        if meter is not None
                        else NO_TOOL_COSTS,
                    )
                    return
            if output is not None and not added and not pending:
                # A resume after OutputValidationError: the model reads why its last
                # answer failed. Taken back if no request goes out, so that a new prompt
                # never follows it.
                mark = mark_history(messages)
                if output.resume(messages, session.rejected) and unsent is None:
                    unsent = (mark, session.shared)
            turn = 0
            while True:
                # 1. Refuse a turn past the limit before sending anything.
                if limits.max_turns is not None and turn >= limits.max_turns:
                    raise MaxTurnsExceededError(
                        limits.max_turns,
                        invocations=invocations,
                        usage=usage,
                        history_length=len(messages),
                    )
                turn += 1
                # 2. The tools this request offers (see _run_offer.py), within the budget.
                tools, offered = await offer.turn(messages) if offer else (None, registry)
                if offer is not None:
                    offer.check_budget(tools, config.model, limits.max_definition_tokens)
                check_tool_count(tools or (), profile)
                # 3. One request; streamed text events pass straight through. A forced
                #    tool_choice serves the prompt's first request only, or a forced loop
                #    could end at max_turns alone; a resume continues the same prompt.
                # A request the server refuses, naming a capability (see profiles.py),
                # is sent once more in the next mode, unless it had started streaming; one
                # whose stream brought nothing, once more unstreamed, for the server's reason.
                refused: Refusal | None = None
                unstreamed = False  # an empty stream's request, sent again unstreamed
                while True:
                    _check_stop(ctx, usage)
                    builder = wire.builder(str(session.requests), config.repair_arguments, trace)
                    if UNIQUE_CALL_IDS.get():
                        builder.avoid_ids(call_ids(messages))
                    if output is not None and output.mode == "tool":
                        builder.show_arguments(FINAL_TOOL)  # the answer streams as text
                    session.requests += 1
                    stream = self.stream and not unstreamed
                    params = wire.params(config, messages, tools, stream)
                    if relaxed is not None and (turn > 1 or served):
                        if relaxed is FREE:
                            params.pop("tool_choice", None)
                        else:
                            params["tool_choice"] = relaxed
                    if output is not None:
                        output.plan.prepare(params)
                    if UNOFFERED_CHOICE_REFUSED.get():
                        check_tool_choice(params)
                    streamed = stream
                    stream, changed = fit(params, profile, stream)
                    if config.api == "responses" and isinstance(self.requester, OpenAIRequester):
                        # After fit: a profile may send a streamed tool turn unstreamed.
                        # A requester of the app's own may poll a background response.
                        fitted = profile.name if streamed and not stream else None
                        ResponsesWire.check_background(params, stream, fitted)
                    if changed:
                        logger.debug("request fitted to %s: %s", profile.name, "; ".join(changed))
                    request = self.requester.request(
                        TurnRequest(config, wire, params, stream, builder)
                    )
                    if trace is not None:
                        request = trace.chat(request, params, builder)
                    unsent = None
                    began = False
                    try:
                        async with contextlib.aclosing(request):  # a consumer may leave
                            async for event in request:
                                began = True
                                yield event
                    except LlmError as exc:
                        if began or refused is not None or unstreamed:
                            raise
                        empty = stream and str(exc).startswith(EMPTY_STREAM)
                        if not config.adapt:
                            if empty and streams_auto_choice(params, stream):
                                raise LlmError(
                                    f'{exc}; llama-cpp-python fails a streamed tool_choice "auto" '
                                    "so: CycleConfig(adapt=True) sends it unstreamed"
                                ) from exc
                            raise
                        refused = read_refusal(str(exc), profile, params, stream)
                        if refused is None:
                            if not empty:
                                raise
                            # The server failed after its 200 and said nothing: unstreamed,
                            # the same request brings back its error (or the lost answer).
                            logger.warning("%s: sending it again unstreamed, once", exc)
                            unstreamed = True
                            continue
                        asked = profile.output_mode(config.api)
                        profile = self._adapt(refused)
                        # Only a refused output mode changes it: another refusal (of
                        # "required", say) leaves a StructuredOutput's own mode alone.
                        if output is not None and profile.output_mode(config.api) != asked:
                            output = output.in_mode(profile.output_mode(config.api))
                        relaxed = (
                            relaxed_tool_choice(config.request_options, profile)
                            if config.reset_tool_choice
                            else None
                        )
                        continue
                    break
                result = clean_turn(builder.build())
                if result.usage is not None:  # once per answered request, tools or not
                    _otel.record_tokens(result.usage, config.model, self.requester.trace_attributes)
                # Structured output's tool mode: a final_result call is the answer.
                answer = (
                    next((call for call in result.calls if call.name == FINAL_TOOL), None)
                    if output is not None and output.mode == "tool"
                    else None
                )
                if self.stream and not began:
                    # A turn sent unstreamed (the profile said so, or the requester
                    # answers whole): its consumer still sees its reasoning and text.
                    if result.reasoning:
                        yield ReasoningDelta(result.reasoning)
                    if result.text:
                        yield AssistantTextDelta(result.text)
                    if answer is not None and answer.arguments:
                        yield AssistantTextDelta(answer.arguments)
                # An answer ends the turn as text would, whatever the calls it came in.
                reason = FinishReason.STOP if answer is not None else result.reason
                if meter is not None:
                    meter.sent(params.get("messages") or (), params.get("tools"))
                    meter.answered(result.usage)
                messages.append(result.message)
                usage = usage + (result.usage if result.usage is not None else _UNREPORTED)
                outcome.usage = usage  # the trace reads it however the run ends
                # 4. A tool turn is one with tool calls, whatever finish_reason says. With
                #    output_type, a turn may also be an answer to check (see _output.py).
                #    Told before the turn's TurnComplete, so that a consumer leaving at
                #    the last one still finds the response; an answer that failed is
                #    raised after it, as before.
                verdict, failed = None, None
                if output is not None:
                    try:
                        verdict = output.end_turn(result, messages, offered is not None)
                    except OutputValidationError as exc:
                        exc.usage = usage  # what the failed call's requests cost
                        failed = exc
                        if output.spent and messages[-1] is result.message:
                            session.rejected = (result.message, output.plan.spec.output_type)
                last = verdict is Verdict.DONE or (
                    verdict is None and failed is None and (not result.calls or offered is None)
                )
                if last:
                    outcome.response = ChatResponse(
                        result.message,
                        result.text,
                        reason,
                        usage,
                        turn,
                        tuple(invocations),
                        output.value if output is not None else None,
                        tool_costs=meter.settle(messages, start, invocations)
                        if meter is not None
                        else NO_TOOL_COSTS,
                        refusal=result.refusal,
                    )
                yield TurnComplete(reason, turn, result.message, result.usage, result.raw_reason)
                if failed is not None:
                    raise failed
                if verdict is Verdict.RETRY:
                    continue
                if last:
                    return
                assert offered is not None  # not the last turn: one with tools to run
                _check_stop(ctx, usage)
                # aclosing: a consumer leaving mid-turn must stop the running calls and
                # answer every call (attachments last) before the finally below runs.
                running = run_tools(
                    config, messages, offered, result.calls, ctx, invocations, gate, profile
                )
                async with contextlib.aclosing(running):
                    async for event in running:
                        yield event
                if gate.waiting:  # pause: the history is the state to resume from
                    outcome.response = dataclasses.replace(
                        paused_response(messages, usage, turn, invocations, gate.waiting),
                        tool_costs=meter.settle(messages, start, invocations)
                        if meter is not None
                        else NO_TOOL_COSTS,
                    )
                    return
        except RuntimeError as exc:
            sdk = isinstance(self.requester, OpenAIRequester)
            misuse = loop_misuse(exc, moved=moved, forked=forked, sdk_client=sdk)
            if misuse is not None:
                raise misuse from exc
            raise
        finally:
            if unsent is not None:
                unsent[0].restore(messages)
                session.shared = unsent[1]
            if registry is not None or output is not None:
                # A consumer that left at a TurnComplete or a ToolExecutionStarted event
                # closed the loop between a tool turn and its results. Calls waiting for
                # approval stay open: a resume answers them.
                answer_unanswered(
                    messages,
                    start,
                    "the tool loop was stopped before it ran",
                    gate.keep,
                    self.config.approval_key,
                )
            if meter is not None:  # a run that failed or was left still cost its tools
                meter.settle(messages, start, invocations)
            session.busy = False
