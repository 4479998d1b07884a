"""The loop's OpenTelemetry spans: ``invoke_agent`` per ``submit*`` call, ``chat {model}``
per model request (the GenAI semantic conventions; see ``agcore_tools/_otel.py``).

:func:`run_trace` is asked once per ``submit*`` call and returns None when tracing is
off; the loop then runs exactly as without this module. When it is on, the
:class:`RunTrace` makes the ``invoke_agent`` span current around each step of the
loop (one ``__anext__`` of its generator), never between events, so the consumer's own
code never runs inside it; tool calls started in a step become its children.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any, Protocol

from .. import _otel
from .._sdk import sdk_field
from .._span_content import bounded
from ..error import RunStoppedError
from ._outcome import Outcome
from ._stream import Turn, TurnBuilder
from ._wire_responses import ResponsesTurnBuilder
from .config import CycleConfig
from .events import StreamEvent, Usage

__all__ = ["RunTrace", "TurnReadout", "run_trace"]

# Request options recorded as gen_ai.request.* attributes.
_REQUEST_ATTRIBUTES = (
    ("temperature", "gen_ai.request.temperature"),
    ("top_p", "gen_ai.request.top_p"),
    ("max_completion_tokens", "gen_ai.request.max_tokens"),
    ("max_tokens", "gen_ai.request.max_tokens"),
    ("max_output_tokens", "gen_ai.request.max_tokens"),  # the Responses API's name
    ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ("presence_penalty", "gen_ai.request.presence_penalty"),
    ("seed", "gen_ai.request.seed"),
    ("n", "gen_ai.request.choice.count"),
)


# CycleConfig.api -> the OpenAI semantic conventions' openai.api.type.
_API_TYPES = {"chat": "chat_completions", "responses": "responses"}


class ServerNamer(Protocol):
    """What the trace reads of the cycle's requester: the attributes naming the server."""

    def trace_attributes(self) -> dict[str, Any]: ...


def run_trace(config: CycleConfig, requester: ServerNamer, outcome: Outcome) -> RunTrace | None:
    """The trace of one ``submit*`` call, or None when tracing is off. It reads the
    call's summed usage from ``outcome`` when the loop ends."""
    tracer = _otel.tracer()
    if tracer is None:
        return None
    return RunTrace(tracer, config, requester, outcome)


class TurnReadout(Protocol):
    """What the ``chat`` span reads of a turn's builder once the response has ended:
    :class:`_TracedBuilder` on Chat Completions, the Responses wire's builder."""

    @property
    def response_id(self) -> str | None: ...
    @property
    def response_model(self) -> str | None: ...
    @property
    def raw_reason(self) -> str | None: ...
    @property
    def usage(self) -> Usage | None: ...
    def build(self) -> Turn: ...


class _TracedBuilder(TurnBuilder):
    """A :class:`TurnBuilder` that also notes the response's id, model and first chunk."""

    __slots__ = ("first_chunk_at", "response_id", "response_model")

    def __init__(self, turn_tag: str, *, repair: bool = False) -> None:
        super().__init__(turn_tag, repair=repair)
        self.response_id: str | None = None
        self.response_model: str | None = None
        self.first_chunk_at: float | None = None

    def feed(self, chunk: Any) -> tuple[StreamEvent, ...] | list[StreamEvent]:
        if self.first_chunk_at is None:
            self.first_chunk_at = time.perf_counter()
            self._note(chunk)
        return super().feed(chunk)

    def feed_completion(self, completion: Any) -> None:
        self._note(completion)
        super().feed_completion(completion)

    def _note(self, response: Any) -> None:
        response_id = sdk_field(response, "id")
        model = sdk_field(response, "model")
        self.response_id = response_id if isinstance(response_id, str) and response_id else None
        self.response_model = model if isinstance(model, str) and model else None


class _TracedResponsesBuilder(ResponsesTurnBuilder):
    """A :class:`ResponsesTurnBuilder` that also notes when the first event arrived."""

    __slots__ = ("first_chunk_at",)

    def __init__(self, turn_tag: str, *, repair: bool = False) -> None:
        super().__init__(turn_tag, repair=repair)
        self.first_chunk_at: float | None = None

    def feed(self, event: Any) -> tuple[StreamEvent, ...] | list[StreamEvent]:
        if self.first_chunk_at is None:
            self.first_chunk_at = time.perf_counter()
        return super().feed(event)


class RunTrace:
    """The spans of one ``submit*`` call."""

    builder = _TracedBuilder
    """The turn builder the loop uses while tracing (it notes the response's id)."""
    responses_builder = _TracedResponsesBuilder
    """The Responses API's turn builder while tracing (it notes the first event's time)."""

    __slots__ = (
        "_api_type",
        "_base",
        "_content",
        "_context",
        "_limit",
        "_outcome",
        "_parent",
        "_span",
        "_tracer",
    )

    def __init__(
        self, tracer: Any, config: CycleConfig, requester: ServerNamer, outcome: Outcome
    ) -> None:
        self._tracer = tracer
        self._content = _otel.capture_content()
        self._limit = _otel.content_limit()
        self._span: Any = None
        self._context: Any = None
        # The context of the submit* call: a stream made inside the app's span and read
        # after it ended still has its invoke_agent span as that span's child.
        self._parent: Any = _otel.api().current()
        self._base = {**requester.trace_attributes(), "gen_ai.request.model": config.model}
        self._api_type = _API_TYPES[config.api]
        self._outcome = outcome

    # -- invoke_agent ---------------------------------------------------------------------

    async def step(
        self, agen: AsyncGenerator[StreamEvent, None], stopping: Callable[[], bool]
    ) -> StreamEvent:
        """One ``__anext__`` of the loop with the run's span current; ends the span when
        the loop ends. A cancellation for which ``stopping()`` is true is the stream's
        own Stop: the span is left for :meth:`close` to end, as any other close."""
        ot = _otel.api()
        if self._span is None:
            if self._context is not None:  # ended: the generator raises StopAsyncIteration
                return await agen.__anext__()
            self._span = self._tracer.start_span(
                "invoke_agent",
                context=self._parent,
                kind=ot.INTERNAL,
                attributes={**self._base, "gen_ai.operation.name": "invoke_agent"},
            )
            self._context = ot.in_context(self._span)
        token = ot.attach(self._context)
        try:
            return await agen.__anext__()
        except (StopAsyncIteration, RunStoppedError):
            self._end(None)  # a Stop by the app's context is no failure either
            raise
        except asyncio.CancelledError as exc:
            if not stopping():
                self._end(exc)
            raise
        except BaseException as exc:
            self._end(exc)
            raise
        finally:
            ot.detach(token)

    async def close(self, agen: AsyncGenerator[StreamEvent, None]) -> None:
        """Close the loop (its ``finally`` runs inside the span) and end the span."""
        if self._span is None:
            await agen.aclose()
            return
        ot = _otel.api()
        token = ot.attach(self._context)
        try:
            await agen.aclose()
        finally:
            ot.detach(token)
            self._end(None)

    def dropped(self) -> None:
        """End the span of a stream the app dropped without closing it (a ``break`` out
        of ``async for`` outside ``async with``): nothing steps or closes it again, and
        the garbage collector closes its loop without this trace. As a stream left early
        is, without an error; a no-op once the span has ended."""
        self._end(None)

    def _end(self, exc: BaseException | None) -> None:
        span, self._span = self._span, None
        if span is None:
            return
        # A run that failed, was left or was cancelled still spent its answered requests.
        response = self._outcome.response
        usage = response.usage if response is not None else self._outcome.usage
        if usage is not None:
            _set_usage(span, usage, summed=True)
        if exc is not None:
            # An ApprovalError can quote the arguments: without content capture, only
            # its redacted form goes into the span.
            text = str(exc) if self._content else getattr(exc, "redacted", None) or str(exc)
            _otel.fail(span, _otel.error_type(exc), _otel.raised(exc, text))
        span.end()

    # -- chat -------------------------------------------------------------------------------

    async def chat(
        self,
        request: AsyncGenerator[StreamEvent, None],
        params: Mapping[str, Any],
        builder: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """``request``'s events, inside a ``chat {model}`` span.

        ``builder`` is the turn's wire builder, typed by the loop as its wire's
        ``TurnAssembler``; while tracing it is also a :class:`TurnReadout` (see
        :attr:`builder` and the Responses wire's builder).
        """
        model = params.get("model", "")
        attributes = {**self._base, "gen_ai.operation.name": "chat"}
        attributes.update(_request_attributes(params))
        attributes["openai.api.type"] = self._api_type
        if self._content:
            attributes["gen_ai.input.messages"] = json.dumps(
                input_messages(params.get("messages", ()), self._limit), ensure_ascii=False
            )
        span = self._tracer.start_span(
            f"chat {model}",
            context=self._context,
            kind=_otel.api().CLIENT,
            attributes=attributes,
        )
        started = time.perf_counter()
        try:
            async with contextlib.aclosing(request):  # closes the HTTP stream
                async for event in request:
                    yield event
        except GeneratorExit:
            raise  # the consumer stopped the call: not a failure of the request
        except BaseException as exc:
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            _otel.fail(span, _otel.error_type(cause), _otel.raised(exc))
            raise
        else:
            self._chat_result(span, builder, started, bool(params.get("stream")))
        finally:
            span.end()

    def _chat_result(self, span: Any, builder: TurnReadout, started: float, streamed: bool) -> None:
        response_id, model = builder.response_id, builder.response_model
        if isinstance(response_id, str):
            span.set_attribute("gen_ai.response.id", _otel.short(response_id))
        if isinstance(model, str):
            span.set_attribute("gen_ai.response.model", _otel.short(model))
        first_at = (
            builder.first_chunk_at
            if isinstance(builder, (_TracedBuilder, _TracedResponsesBuilder))
            else None
        )
        if streamed and first_at is not None:
            first = first_at - started
            span.set_attribute("gen_ai.response.time_to_first_chunk", max(first, 0.0))
        # What the builder read: build() would parse the calls a second time.
        reason = builder.raw_reason
        if reason is not None:
            # As the server sent it, which may be no str (an int): the loop reads that
            # as "other", and the span must not fail the run on it.
            reason = reason if isinstance(reason, str) else str(reason)
            span.set_attribute("gen_ai.response.finish_reasons", (_otel.short(reason),))
        usage = builder.usage
        if usage is not None:
            _set_usage(span, usage, summed=False)
        if self._content:
            message = _chat_message(builder.build().message, self._limit)
            output = {**message, "finish_reason": _otel.short(reason or "")}
            span.set_attribute("gen_ai.output.messages", json.dumps([output], ensure_ascii=False))


def _request_attributes(params: Mapping[str, Any]) -> dict[str, Any]:
    attributes: dict[str, Any] = {"openai.api.type": "chat_completions"}
    if params.get("stream"):
        attributes["gen_ai.request.stream"] = True
    for option, key in _REQUEST_ATTRIBUTES:
        value = params.get(option)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            attributes[key] = value
    stop = params.get("stop")
    if isinstance(stop, str):
        attributes["gen_ai.request.stop_sequences"] = (_otel.short(stop),)
    elif isinstance(stop, Sequence) and all(isinstance(s, str) for s in stop):
        attributes["gen_ai.request.stop_sequences"] = tuple(_otel.short(s) for s in stop)
    response_format = params.get("response_format")
    if isinstance(response_format, Mapping) and response_format.get("type") in (
        "json_object",
        "json_schema",
    ):
        attributes["gen_ai.output.type"] = "json"
    return attributes


def _set_usage(span: Any, usage: Any, *, summed: bool) -> None:
    if summed and usage.reported == 0:
        return  # no request measured anything: no zeros nobody measured
    span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
    if usage.cached_tokens:
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cached_tokens)
    if usage.reasoning_tokens:
        span.set_attribute("gen_ai.usage.reasoning.output_tokens", usage.reasoning_tokens)


# -- content (opt-in) ---------------------------------------------------------------------


def input_messages(
    messages: Sequence[Mapping[str, Any]], limit: int | None = None
) -> list[dict[str, Any]]:
    """Chat Completions messages in the conventions' message format (role and parts),
    each text, tool result and tool call's arguments cut at ``limit`` characters."""
    return [_chat_message(message, limit) for message in messages]


def _chat_message(message: Mapping[str, Any], limit: int | None) -> dict[str, Any]:
    role = message.get("role", "")
    if role == "tool":
        call_id = message.get("tool_call_id")
        part = {"type": "tool_call_response", "id": _id(call_id), "response": ""}
        part["response"] = bounded(_text(message.get("content")), limit)
        return {"role": "tool", "parts": [part]}
    parts: list[dict[str, Any]] = []
    for key in ("reasoning_content", "reasoning"):
        reasoning = message.get(key)
        if isinstance(reasoning, str) and reasoning:
            parts.append({"type": "reasoning", "content": bounded(reasoning, limit)})
    for summary in _summaries(message.get("response")):
        parts.append({"type": "reasoning", "content": bounded(summary, limit)})
    content = message.get("content")
    if isinstance(content, str):
        if content:
            parts.append({"type": "text", "content": bounded(content, limit)})
    elif isinstance(content, Sequence):
        for item in content:
            if isinstance(item, Mapping) and item.get("type") == "text":
                text = str(item.get("text", ""))
                parts.append({"type": "text", "content": bounded(text, limit)})
            elif isinstance(item, Mapping):
                # Images, audio and files are left out: their bytes do not belong in a span.
                parts.append({"type": str(item.get("type", "unknown"))})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": _id(call.get("id")),
                "name": _id(function.get("name", "")),
                "arguments": _arguments(function.get("arguments"), limit),
            }
        )
    return {"role": role, "parts": parts}


def _summaries(response: Any) -> list[str]:
    """The reasoning summaries of a Responses API turn, which its message keeps in
    ``response["output"]`` (reasoning items; their encrypted content is never read)."""
    output = response.get("output") if isinstance(response, Mapping) else None
    if not isinstance(output, Sequence) or isinstance(output, str):
        return []
    found = []
    for item in output:
        if not isinstance(item, Mapping) or item.get("type") != "reasoning":
            continue
        summary = item.get("summary")
        texts = [
            part.get("text")
            for part in (summary if isinstance(summary, Sequence) else ())
            if isinstance(part, Mapping)
        ]
        text = "\n".join(t for t in texts if isinstance(t, str) and t)
        if text:
            found.append(text)
    return found


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(item.get("text", "")) for item in content if isinstance(item, Mapping))
    return ""


def _id(value: Any) -> Any:
    return _otel.short(value) if isinstance(value, str) else value


def _arguments(arguments: Any, limit: int | None) -> Any:
    if not isinstance(arguments, str):
        return arguments
    if limit is not None and len(arguments) > limit:
        return bounded(arguments, limit)  # recorded as cut text, not parsed
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
