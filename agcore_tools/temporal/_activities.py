"""The activities a worker runs: describe its tools, call one tool, make one model request.

One :class:`ToolActivities` per worker holds the registry (and through it every tool's
dependencies: connections, clients, caches) and the model client, so nothing of them
is ever serialised into a call: an activity's input is the call itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic_core import to_json
from temporalio import activity
from temporalio.converter import PayloadConverter
from temporalio.exceptions import ApplicationError

from .._execute import run_one
from .._masked_error import masked_error
from .._returns import UNWRAPS
from .._sandbox import MontySandbox
from .._unicode import scrub_json
from ..base import ToolContext
from ..calls import rule_verdict
from ..cycle._requester import retryless
from ..cycle._stream import malformed
from ..cycle._wire_responses import ResponsesWire
from ..cycle._wires import wire_for
from ..cycle.config import CycleConfig
from ..cycle.requester import OpenAIRequester
from ..error import (
    ApprovalError,
    ClientTypeError,
    LlmConfigError,
    ProgramError,
    ToolConfigError,
    ToolExecutionError,
    ToolTimeoutError,
)
from ..pending import KEEPER
from ..registry import ToolCall, ToolInvocation, ToolRegistry
from ._activity_options import ToolActivityOptions
from ._payloads import (
    APPROVAL_RULE_RAISED,
    CATALOGUE_TOO_LARGE,
    CONFIG_REFUSED,
    MODEL_REFUSED,
    PAYLOAD_LIMIT,
    PROGRAM_TOO_LARGE,
    RESPONSE_TOO_LARGE,
    RESULT_NOT_RETURNED,
    RESULT_TOO_LARGE,
    TOOL_TIMED_OUT,
    Catalogue,
    ModelRequest,
    ProgramStepInput,
    ProgramStepOutput,
    ToolCallInput,
    ToolCallOutput,
    ToolSpec,
    payload_size,
    permission_names,
    portable,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["ToolActivities"]

logger = logging.getLogger("agcore_tools.temporal")

# 4xx answers a retry cannot change (408, 409 and 429 can).
_RETRYABLE_STATUS = frozenset({408, 409, 429})


MIN_RESULT_BYTES = 1024
"""The least ``ToolActivities(max_result_bytes=...)`` takes: the payload of an empty
result alone is about 100 bytes."""

HEARTBEAT_TIMEOUT = 5.0
"""Seconds without a heartbeat after which Temporal retries a call waiting for work on
a server (an MCP task), as its worker is taken for lost."""


class HeartbeatKeeper:
    """The :class:`~agcore_tools.pending.WorkKeeper` of one ``agcore.call_tool`` attempt:
    it keeps the handle of the work the call started in the activity's heartbeats, and
    recalls the one an earlier attempt kept. The activity's own timeout bounds the wait.
    """

    wait: float | None = None

    def __init__(self, recalled: Mapping[str, Any] | None) -> None:
        self._recalled = recalled
        self._kept: dict[str, Any] | None = None

    @classmethod
    def of_this_attempt(cls) -> HeartbeatKeeper:
        """The keeper of the running activity, with what its last attempt kept."""
        details = activity.info().heartbeat_details
        recalled = None
        if details:
            value = details[0]
            if not isinstance(value, Mapping):
                value = activity.payload_converter().from_payload(value, dict)
            recalled = value if value else None
        return cls(recalled)

    def recall(self) -> Mapping[str, Any] | None:
        """The handle an earlier attempt kept, or None."""
        return self._recalled

    def given_up(self) -> bool:
        """Whether this attempt was cancelled for good: its run cancelled the call, or
        the server no longer knows the attempt (the run ended: cancelled, terminated).
        Not when its worker shuts down: a retry recalls the work then. The server
        answers an attempt it timed out the same way (heartbeats held up longer than
        the heartbeat timeout by a stalled worker or network, its retry started): that
        attempt cancels the task its retry waits for, whose call then fails."""
        details = activity.cancellation_details()
        return details is not None and (details.cancel_requested or details.not_found)

    def keep(self, handle: Mapping[str, Any]) -> None:
        """Keep ``handle`` in this attempt's heartbeats, starting now."""
        self._kept = dict(handle)
        activity.heartbeat(self._kept)

    async def beat(self) -> None:
        """Heartbeat the kept handle until cancelled (the SDK throttles the sends).

        An attempt with a heartbeat timeout heartbeats before it keeps a handle too:
        the one an earlier attempt kept (or none). Temporal counts the timeout from the
        attempt's start, and a server slow to start the work would otherwise time the
        attempt out, its retry starting the work again while it still ran. The first
        beat waits a while: the SDK sends an attempt's first heartbeat at once and
        holds the next ones back, and a handle kept soon should be that first one."""
        needed = activity.info().heartbeat_timeout is not None
        while True:
            await asyncio.sleep(HEARTBEAT_TIMEOUT / 5)
            if self._kept is not None:
                activity.heartbeat(self._kept)
            elif needed:
                activity.heartbeat(dict(self._recalled or {}))


def _check_client(client: object) -> None:
    from openai import AsyncOpenAI  # given a client, the caller has imported openai already

    if not isinstance(client, AsyncOpenAI):
        # Not shown: a str here is likely an API key.
        raise ClientTypeError(
            f"ToolActivities(client=...) takes an openai.AsyncOpenAI client or None, got "
            f"{type(client).__name__}: use ToolActivities(registry, AsyncOpenAI(api_key=...))"
        )


class ToolActivities:
    """A worker's activities, built from a :class:`~agcore_tools.ToolRegistry` and (for
    the model requests) an ``AsyncOpenAI`` client.

    Every tool of the registry becomes callable as an activity, with no code per tool.
    ``options`` overrides a tool's activity options by name (see
    :class:`ToolActivityOptions`). A result whose payload (its JSON as Temporal's
    converter writes it, non-ASCII text as ``\\uXXXX`` escapes) is over
    ``max_result_bytes`` fails its call with a non-retryable error that the model
    reads, rather than a payload Temporal refuses again on every retry; so does a
    result that cannot be made into a payload at all (the tool ran: a retry would run
    it again). ``max_result_bytes`` is an int from :data:`MIN_RESULT_BYTES` to
    Temporal's 2 MiB payload limit, else :class:`~agcore_tools.ToolConfigError`. A
    worker without ``client`` runs tools only (for instance the workers that hold an
    MCP connection).

    Example:
        >>> from agcore_tools import ToolRegistry
        >>> registry = ToolRegistry()
        >>> @registry.tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> [fn.__name__ for fn in ToolActivities(registry).activities()]
        ['describe_tools', 'call_tool', 'needs_approval', 'program_step']

        The activities are plain async methods; a worker calls them, and so can a test:

        >>> import asyncio
        >>> from agcore_tools.temporal._payloads import ModelRequest, ToolCallInput
        >>> from agcore_tools.testing import ScriptedChatServer
        >>> call = ToolCallInput("add", {"a": 2, "b": 3}, "c1", "session", "trace")
        >>> async def main(server: ScriptedChatServer) -> None:
        ...     async with server.client() as client:
        ...         activities = ToolActivities(registry, client)
        ...         catalogue = await activities.describe_tools()
        ...         print([spec.name for spec in catalogue.tools])
        ...         print((await activities.call_tool(call)).value())
        ...         print(await activities.needs_approval(call))
        ...         request = ModelRequest("chat", False, {"model": "m", "messages": []})
        ...         completion = await activities.model_request(request)
        ...         print(completion["choices"][0]["message"]["content"])
        >>> with ScriptedChatServer([ScriptedChatServer.reply_text("Hi")]) as server:
        ...     asyncio.run(main(server))
        ['add']
        5
        False
        Hi

        A code-mode program runs until it waits for calls (``program_step``, with the
        ``code`` extra); the workflow runs the calls, then resumes the snapshot:

        >>> from agcore_tools.temporal._payloads import ProgramStepInput
        >>> functions = {"add": ["add", ["a", "b"], ["a", "b"]]}
        >>> step = ProgramStepInput("(await add(2, 3)) * 10", functions, {})
        >>> waiting = asyncio.run(ToolActivities(registry).program_step(step))
        >>> waiting.calls, waiting.pending
        ([[0, 'add', {'a': 2, 'b': 3}]], [0])
        >>> resume = ProgramStepInput(step.code, functions, {}, waiting.snapshot, [0],
        ...                           {"0": {"return_value": 5}})
        >>> asyncio.run(ToolActivities(registry).program_step(resume)).output
        50
    """

    def __init__(
        self,
        registry: ToolRegistry,
        client: AsyncOpenAI | None = None,
        *,
        options: Mapping[str, ToolActivityOptions] | None = None,
        max_result_bytes: int = 1024 * 1024,
    ) -> None:
        if not isinstance(registry, ToolRegistry):
            raise ToolConfigError(
                f"ToolActivities takes a ToolRegistry, got {type(registry).__name__}: use "
                "ToolActivities(registry, client)"
            )
        if client is not None:
            _check_client(client)
        unknown = sorted(set(options or ()) - set(registry.list_tools()))
        if unknown:
            raise ToolConfigError(
                f"ToolActivities(options=...) names tools the registry lacks: {', '.join(unknown)}"
            )
        if (
            isinstance(max_result_bytes, bool)
            or not isinstance(max_result_bytes, int)
            or not MIN_RESULT_BYTES <= max_result_bytes <= PAYLOAD_LIMIT
        ):
            # Checked here: a bad one failed every call after its tool ran (None, a
            # string), refused every result (under the payload of an empty one), or let
            # through payloads the server refuses (over its limit): each retried,
            # running the tool again.
            raise ToolConfigError(
                f"ToolActivities max_result_bytes must be an int from {MIN_RESULT_BYTES} to "
                f"{PAYLOAD_LIMIT} (Temporal's payload limit), got {max_result_bytes!r}"
            )
        self.registry = registry
        """The tools this worker runs."""
        # Masks what a server echoes of the client's secrets (a proxy's 401 quoting the
        # bearer token): an activity's failure, its causes too, is stored in the history.
        self._secrets = OpenAIRequester(client) if client is not None else None
        # Sent through the retry-less copy the masking reads: with an api_key provider
        # the SDK sets the key it returns on the copy that sends.
        self._requester = retryless(client) if client is not None else None
        self._options = dict(options or {})
        self.max_result_bytes = max_result_bytes
        """Most bytes of a tool result's payload an activity returns (its JSON as the
        payload converter writes it)."""

    def activities(self) -> list[Callable[..., Any]]:
        """The activity functions to give a ``temporalio.worker.Worker``."""
        found: list[Callable[..., Any]] = [
            self.describe_tools,
            self.call_tool,
            self.needs_approval,
            self.program_step,
        ]
        if self._requester is not None:
            found.append(self.model_request)
        return found

    @activity.defn(name="agcore.describe_tools")
    async def describe_tools(self) -> Catalogue:
        """The registry's tools and policy, for the workflow's stand-in registry."""
        checker = self.registry.permission_checker
        permissions = None
        if checker is not None:
            config = checker.config
            permissions = {
                "allowed": sorted(permission_names(config.allowed)),
                "denied": sorted(permission_names(config.denied)),
                "ask": sorted(permission_names(config.ask)),
                "allow_unspecified": config.allow_unspecified,
            }
        tools = []
        for entry in self.registry.entries():
            tool = entry.tool
            rule = getattr(tool, "needs_approval", False)
            # A call that waits for work on a server heartbeats (see HeartbeatKeeper).
            beats = HEARTBEAT_TIMEOUT if getattr(tool, "as_task", False) else None
            approval = "never" if rule is False else "always" if rule is True else "per_call"
            option = self._options.get(entry.name, ToolActivityOptions())
            returns = tool.output_schema
            tools.append(
                ToolSpec(
                    entry.name,
                    tool.description,
                    tool.parameters,  # for a workflow of an earlier version
                    tool.strict,
                    permission_names(entry.declared_permissions()),
                    approval,
                    list(entry.tags),
                    entry.category,
                    entry.version,
                    option.task_queue,
                    option.timeout,
                    option.max_attempts,
                    beats,
                    returns,
                    # Read in preference: as values, the converter sorts the properties.
                    _text(tool.parameters),
                    _text(returns) if returns is not None else None,
                )
            )
        catalogue = Catalogue(tools, self.registry.strict, permissions)
        size = payload_size(_converter(), catalogue)
        if size > PAYLOAD_LIMIT:
            # Past the limit the run's workflow task fails on every retry, silently,
            # until the run times out: refuse it here, once, by name.
            raise ApplicationError(
                f"this worker's {len(tools)} tools describe to {size} bytes, over the "
                f"{PAYLOAD_LIMIT}-byte payload limit of a Temporal workflow's history; "
                "serve some of them from workers of another task queue "
                "(ToolLoopInput.of(..., tool_task_queues=[...])), or register fewer",
                type=CATALOGUE_TOO_LARGE,
                non_retryable=True,
            )
        return catalogue

    @activity.defn(name="agcore.call_tool")
    async def call_tool(self, call: ToolCallInput) -> ToolCallOutput:
        """Run one call through the registry (permissions, argument plan, errors)."""
        # The run id is the workflow's: a retried attempt sends the same idempotency key.
        ctx = ToolContext(
            session_id=call.session_id,
            trace_id=call.trace_id,
            call_id=call.call_id,
            metadata=call.metadata,
            run_id=activity.info().workflow_id if activity.in_activity() else None,
        )
        # Work a call starts on a server (an MCP task) is kept in the heartbeats, so an
        # attempt retried after a lost worker waits for it instead of starting it again.
        keeper = HeartbeatKeeper.of_this_attempt() if activity.in_activity() else None
        kept = KEEPER.set(keeper)
        unwrapping = UNWRAPS.set(call.unwraps)  # False: the workflow cannot wrap it again
        beating = asyncio.ensure_future(keeper.beat()) if keeper is not None else None
        # The attempt ends by itself at its start-to-close timeout: Temporal only tells a
        # worker of a timed-out attempt through heartbeats, and without this the retry
        # would run while the timed-out attempt still did its work.
        limit = activity.info().start_to_close_timeout if activity.in_activity() else None
        timeout = limit.total_seconds() if limit is not None else None
        try:
            # Not registered here, or refused: recorded in the invocation, as an error no
            # retry changes. Not through invoke_all(): the workflow asked for approval
            # before it scheduled the call, so this is no direct call that skips it.
            invocation = await run_one(
                self.registry.tool_table,
                ToolCall(call.name, call.arguments, call.call_id),
                ctx,
                timeout,
            )
        finally:
            KEEPER.reset(kept)
            UNWRAPS.reset(unwrapping)
            if beating is not None:
                beating.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beating
        try:
            return self._output(call, invocation, timeout)
        except ApplicationError:
            raise
        except Exception as exc:
            # Not retryable: the tool ran, and a retry would run it again.
            raise ApplicationError(
                f"tool '{call.name}' ran, but its result could not be returned: "
                f"{type(exc).__name__}: {exc}",
                type=RESULT_NOT_RETURNED,
                non_retryable=True,
            ) from exc

    def _output(
        self, call: ToolCallInput, invocation: ToolInvocation, limit: float | None
    ) -> ToolCallOutput:
        error = invocation.error
        if isinstance(error, ToolTimeoutError) and limit is not None and error.timeout == limit:
            # The activity's time limit: retryable, as the server's own timeout is; the
            # workflow reads it as one. A tool's own shorter timeout (its policy's)
            # names its own seconds, and is its error, as in LlmCycle: the model's to
            # read, not a run of the tool again on each attempt.
            raise ApplicationError(str(error), error.may_have_run, type=TOOL_TIMED_OUT)
        if error is not None:
            return ToolCallOutput(error=str(error), recoverable=error.is_recoverable())
        text = _text(portable(invocation.output))
        # As text when the workflow asks: the converter would sort the keys of the
        # result's objects. A workflow of an earlier version reads ``output`` only; a
        # result can be large, so it is written one way, not both.
        done = (
            ToolCallOutput(output_json=text) if call.as_text else ToolCallOutput(json.loads(text))
        )
        # Measured as sent: the converter writes non-ASCII text as \uXXXX escapes, up to
        # three times its UTF-8 bytes, and a payload the server refuses is retried,
        # running the tool again.
        size = payload_size(_converter(), done)
        if size > self.max_result_bytes:
            # Not retryable: the same call would make the same result again.
            raise ApplicationError(
                f"result of tool '{call.name}' is {size} bytes, over the "
                f"{self.max_result_bytes}-byte limit of a Temporal activity result; return "
                "less (a page, a summary, a reference to where the data is)",
                type=RESULT_TOO_LARGE,
                non_retryable=True,
            )
        return done

    @activity.defn(name="agcore.needs_approval")
    async def needs_approval(self, call: ToolCallInput) -> bool:
        """Whether a call waits for approval, by the tool's own ``needs_approval``."""
        entry = self.registry.entry(call.name)
        rule = getattr(entry.tool, "needs_approval", False) if entry is not None else False
        if not callable(rule):
            return bool(rule)
        ctx = ToolContext(
            session_id=call.session_id,
            trace_id=call.trace_id,
            call_id=call.call_id,
            metadata=call.metadata,
        )
        # As the loop asks it: an async callable object awaited, an awaitable that a
        # sync function returns awaited (its truth was that of a coroutine: True).
        verdict, failure = await rule_verdict(rule, call.name, call.arguments, ctx)
        if failure is not None:  # any: the workflow then asks (fail closed)
            # Not retried: a retry would ask the same function again, and Temporal's
            # default policy would do so forever while the run waits.
            raise ApplicationError(
                f"{type(failure).__name__}: {failure}",
                type=APPROVAL_RULE_RAISED,
                non_retryable=True,
            ) from failure
        return bool(verdict)

    @activity.defn(name="agcore.program_step")
    async def program_step(self, step: ProgramStepInput) -> ProgramStepOutput:
        """Run a code-mode program until it waits for calls or ends, in a Monty worker
        of its own; the snapshot of a waiting program goes back to the workflow."""
        functions = {
            name: (str(spec[0]), list(spec[1]), list(spec[2]))
            for name, spec in step.functions.items()
        }
        try:
            async with MontySandbox(functions, step.limits) as sandbox:
                if step.snapshot is None:
                    segment = await sandbox.start(step.code)
                else:
                    await sandbox.restore(step.code, step.snapshot, step.pending)
                    results = {int(n): r for n, r in step.results.items()}
                    segment = await sandbox.resume(results)
                snapshot = None if segment.finished else await self._dumped(sandbox)
        except ProgramError as exc:  # the program's own failure: the model's to fix
            return self._fitting(ProgramStepOutput(error=exc.reason, report=exc.report))
        except ToolExecutionError as exc:
            return ProgramStepOutput(error=exc.reason)
        except ApprovalError as exc:  # a snapshot this worker's Monty cannot load
            raise ApplicationError(str(exc), type="ApprovalError", non_retryable=True) from exc
        except LlmConfigError as exc:  # no pydantic-monty on this worker
            raise ApplicationError(
                str(exc), type="CodeModeUnavailable", non_retryable=True
            ) from exc
        return self._fitting(
            ProgramStepOutput(
                [list(call) for call in segment.calls],
                segment.pending,
                segment.output,
                segment.printed,
                segment.dropped,
                snapshot,
            )
        )

    @staticmethod
    async def _dumped(sandbox: MontySandbox) -> str:
        """The waiting program's snapshot. One that cannot be made (the dump needs more
        than the heap has left) fails as one too large for the history does: no retry
        would fit it."""
        try:
            return await sandbox.snapshot()
        except ProgramError as exc:
            cause = " ".join(str(exc.__cause__ or exc.reason).split())
            raise ApplicationError(
                "the state of a code-mode program cannot be saved between its steps "
                f"({cause}); keep less data in the program's variables",
                type=PROGRAM_TOO_LARGE,
                non_retryable=True,
            ) from exc

    @staticmethod
    def _fitting(output: ProgramStepOutput) -> ProgramStepOutput:
        # Over the limit, the worker would fail to send the output on every attempt, and
        # the model would read Temporal's own error, which names nothing to change.
        size = payload_size(_converter(), output)
        if size > PAYLOAD_LIMIT:
            raise ApplicationError(
                f"the output of a code-mode program's step is {size} bytes (a snapshot of "
                f"{len(output.snapshot or '')}, {len(output.printed)} characters printed), "
                f"over the {PAYLOAD_LIMIT}-byte payload limit of a Temporal workflow's "
                "history; keep less data in the program's variables, and print or return less",
                type=PROGRAM_TOO_LARGE,
                non_retryable=True,
            )
        return output

    @activity.defn(name="agcore.model_request")
    async def model_request(self, request: ModelRequest) -> dict[str, Any]:
        """Send one request; return the completion as the JSON the server sent. One
        this activity cannot serve (``background=True``: it never streams) fails
        unsent, not retried."""
        from openai import APIStatusError, OpenAIError

        assert self._requester is not None and self._secrets is not None  # with a client
        wire = wire_for(_wire_config(request))
        parameters = request.parameters()
        if request.api == "responses":
            try:
                ResponsesWire.check_background(parameters, False, durable=True)
            except LlmConfigError as exc:
                raise ApplicationError(str(exc), type=CONFIG_REFUSED, non_retryable=True) from exc
        resource, params = wire.request(self._requester, parameters)
        secrets = self._secrets

        def redact(text: str) -> str:
            return secrets.redact(parameters, text)

        try:
            raw = await resource.with_raw_response.create(**params)
            body: dict[str, Any] = json.loads(raw.http_response.content)
            if not isinstance(body, dict):
                # The workflow awaits a dict: it could not decode this, and would retry
                # its task until the run timed out. As in LlmCycle, not retried; the
                # workflow's LlmError says "<wire> request failed: " before it.
                refused = malformed("response", "the body", body, "an object")
                raise ApplicationError(str(refused), type="LlmError", non_retryable=True)
        except APIStatusError as exc:
            final = 400 <= exc.status_code < 500 and exc.status_code not in _RETRYABLE_STATUS
            raise ApplicationError(
                redact(f"{wire.name} request failed: {type(exc).__name__}: {exc}"),
                type=MODEL_REFUSED if final else type(exc).__name__,
                non_retryable=final,
            ) from masked_error(exc, redact)
        except (OpenAIError, ValueError) as exc:
            raise ApplicationError(
                redact(f"{wire.name} request failed: {type(exc).__name__}: {exc}"),
                type=type(exc).__name__,
            ) from masked_error(exc, redact)
        size = payload_size(_converter(), body)
        if size > PAYLOAD_LIMIT:
            # Over the limit, the worker cannot hand the answer over, and each retry
            # would pay for it again.
            raise ApplicationError(
                f"{wire.name} response is {size} bytes, over the {PAYLOAD_LIMIT}-byte "
                "payload limit of a Temporal activity result; bound the model's output "
                "(CycleConfig(max_tokens=...), or max_output_tokens=... with api='responses')",
                type=RESPONSE_TOO_LARGE,
                non_retryable=True,
            )
        return body


def _text(value: Any) -> str:
    # What cannot be JSON (an object a tool returned) as its str(), as LlmCycle shows it.
    try:
        return to_json(value, fallback=str).decode()
    except ValueError:
        # pydantic writes no lone surrogate (a file name os.listdir decoded): each becomes
        # U+FFFD, as LlmCycle sends it, rather than a call that ran and failed.
        return to_json(scrub_json(value), fallback=str).decode()


def _converter() -> PayloadConverter:
    # The worker's converter, which writes the payloads; the default one when an
    # activity method is called directly (a test, a doctest).
    return activity.payload_converter() if activity.in_activity() else PayloadConverter.default


def _wire_config(request: ModelRequest) -> CycleConfig:
    # Only the API and chaining choose the wire.
    if request.api == "responses":
        return CycleConfig("-", api="responses", chain_responses=request.chain)
    return CycleConfig("-")
