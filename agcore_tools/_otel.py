"""OpenTelemetry spans and metrics, following the GenAI semantic conventions (the
``otel`` extra).

Nothing here imports ``opentelemetry`` until tracing is on. Tracing is on when the
application has imported the OpenTelemetry API and either set a global tracer provider
or given one to :func:`configure_tracing`; the check is a lookup in ``sys.modules``, so
a program without OpenTelemetry pays nothing for it. This module holds the settings and
the ``execute_tool`` spans of the registry; the loop's spans live in
``cycle/_trace.py`` and the MCP client's in ``mcp/_trace.py``. Metrics (the token
counts of :func:`record_tokens`) follow the same rule with the metrics API: nothing is
recorded or imported until the application has imported ``opentelemetry.metrics`` and
set a meter provider, globally or through :func:`configure_tracing`.

Spans are started with explicit parents and made current only around code that does
not yield to a caller: an async generator that attached a context would leak it into
its consumer between events.
"""

from __future__ import annotations

import functools
import os
import sys
from asyncio import CancelledError
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Protocol

from ._records import ToolCall, ToolInvocation
from ._span_content import CONTENT_CHARS, TEXT_CHARS, bounded, content_json
from ._version import __version__
from .base import BaseTool, ToolContext
from .error import ToolConfigError, ToolError, _OptionTypeError

__all__ = ["configure_tracing"]

_API = "opentelemetry.trace"
_METRICS_API = "opentelemetry.metrics"
TOKEN_USAGE = "gen_ai.client.token.usage"
"""The GenAI semantic conventions' histogram of a model request's input and output tokens."""
TOOL_TOKENS = "agcore.tool.tokens"
"""This package's counter of the tokens each tool cost in a loop (definition, arguments,
result), by ``gen_ai.tool.name``, ``gen_ai.token.type`` and ``agcore.tool.token.part``."""
# The bucket boundaries the GenAI semantic conventions give gen_ai.client.token.usage.
_TOKEN_BUCKETS = tuple(4**n for n in range(14))
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable the OpenTelemetry GenAI instrumentations read to record
message content."""
SCOPE = "agcore_tools"
"""The instrumentation scope name of every span this package makes."""

Guarded = Callable[[ToolCall, "ToolContext | None", "float | None"], Awaitable[ToolInvocation]]


class _Tools(Protocol):
    """The tools by name whose calls are traced (a registry is one)."""

    def get(self, name: str) -> BaseTool | None: ...


@dataclass(frozen=True, slots=True)
class _Settings:
    enabled: bool = True
    provider: Any = None
    capture_content: bool | None = None  # None: the environment variable decides
    meter_provider: Any = None
    max_content_chars: int | None = CONTENT_CHARS


_settings = _Settings()
# Room for the note of a cut text's length and some of the text.
_MIN_CONTENT_CHARS = 256
_cache: tuple[Any, Any] | None = None  # (provider, tracer): one tracer per provider
_api: Any = None  # what is used of the OpenTelemetry API, imported once (see api())
_meters: tuple[Any, Any, Any] | None = None  # (provider, token histogram, tool counter)


def configure_tracing(
    tracer_provider: Any = None,
    *,
    capture_content: bool | None = None,
    enabled: bool = True,
    meter_provider: Any = None,
    max_content_chars: int | None = CONTENT_CHARS,
) -> None:
    """Choose where agcore_tools' OpenTelemetry spans and metrics go (needs the ``otel``
    extra).

    Without this call, spans go to the global tracer provider once the application has
    set one (``opentelemetry.trace.set_tracer_provider``); until then, and when
    ``opentelemetry`` is not installed, nothing is traced and nothing is imported.

    Args:
        tracer_provider: The provider to use instead of the global one (None: the global).
        capture_content: Whether spans record message text, tool arguments and tool
            results (``gen_ai.input.messages``, ``gen_ai.output.messages``,
            ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``). They may hold
            personal data, so the default (None) is off unless the environment sets
            ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.
        enabled: False turns the spans and metrics off, whatever provider is set.
        meter_provider: The provider of the loop's token metrics (``gen_ai.client.token.usage``
            per model request, ``agcore.tool.tokens`` per tool and run) instead of the
            global one (None: the global, once the application has set one).
        max_content_chars: With content recorded, the most characters of each text,
            tool argument and tool result in it (16,384 by default, at least 256; None:
            not cut). A longer one is cut, ending with a note of its full length, such
            as ``… (2,000,000 chars)``. Status descriptions, tool descriptions and ids
            are cut at 4,096 characters the same way, whatever this says.

    Each call replaces every earlier setting; ``configure_tracing()`` restores the
    defaults. A provider without ``get_tracer`` (a ``Tracer``, say) or a meter provider
    without ``get_meter`` is refused with a :class:`~agcore_tools.ToolConfigError`.

    Example:
        >>> import asyncio
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        ...     InMemorySpanExporter)
        >>> from agcore_tools import ToolRegistry, configure_tracing
        >>> exporter = InMemorySpanExporter()
        >>> provider = TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(exporter))
        >>> configure_tracing(provider)
        >>> registry = ToolRegistry()
        >>> @registry.tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> [r.output for r in asyncio.run(registry.invoke_all([("add", {"a": 2, "b": 3})]))]
        [5]
        >>> span = exporter.get_finished_spans()[0]
        >>> span.name, span.attributes["gen_ai.tool.name"], span.attributes["gen_ai.tool.type"]
        ('execute_tool add', 'add', 'function')
        >>> configure_tracing()  # back to the global provider
    """
    global _settings, _cache, _meters
    if capture_content is not None and not isinstance(capture_content, bool):
        raise _OptionTypeError(
            f"capture_content must be True, False or None, got {capture_content!r}"
        )
    if max_content_chars is not None:
        if not isinstance(max_content_chars, int) or isinstance(max_content_chars, bool):
            raise _OptionTypeError(
                f"max_content_chars must be an int or None, got {type(max_content_chars).__name__}"
            )
        if max_content_chars < _MIN_CONTENT_CHARS:
            raise ToolConfigError(
                f"max_content_chars must be at least {_MIN_CONTENT_CHARS}, got {max_content_chars}"
            )
    # Refused here: used, the wrong object would fail the first traced call, far away.
    for given, method, kind in (
        (tracer_provider, "get_tracer", "TracerProvider"),
        (meter_provider, "get_meter", "MeterProvider"),
    ):
        if given is not None and not callable(getattr(given, method, None)):
            raise ToolConfigError(
                f"configure_tracing() takes a {kind}, got {type(given).__name__} (it has no "
                f"{method}()): pass the provider, not provider.{method}(...)"
            )
    _settings = _Settings(
        bool(enabled), tracer_provider, capture_content, meter_provider, max_content_chars
    )
    _cache = None
    _meters = None


def tracer() -> Any | None:
    """The tracer to report to now, or None when tracing is off (cheap when it is)."""
    # Runs on every MCP call and tool call, so its common path stays in this one
    # function: the MCP SDK imports the OpenTelemetry API, so the sys.modules test
    # alone does not settle it, and asking for the global provider is the rest.
    settings = _settings
    if _API not in sys.modules or not settings.enabled:
        return None
    temporal = sys.modules.get("temporalio.workflow")
    if temporal is not None and temporal.in_workflow():
        return None  # see _in_workflow()
    provider = settings.provider
    if provider is None:
        ot = _api if _api is not None else api()
        provider = ot.global_provider()
        # No provider set yet (the API's proxy) or a disabled SDK: spans would be dropped.
        if isinstance(provider, ot.unset):
            return None
    cached = _cache
    if cached is not None and cached[0] is provider:
        return cached[1]
    return _tracer_of(provider)


def _in_workflow() -> bool:
    """Whether this is a Temporal workflow's code, which runs again on every replay: its
    spans would be made, and its tokens counted, once per replay (and it may not read the
    environment, as :func:`capture_content` does). Its activities are traced as usual."""
    temporal = sys.modules.get("temporalio.workflow")
    return temporal is not None and bool(temporal.in_workflow())


def api() -> Any:
    """The parts of the OpenTelemetry API this package uses, imported on first use (an
    import statement per span would cost more than the span's attributes)."""
    global _api
    if _api is None:
        from opentelemetry import context, trace

        _api = SimpleNamespace(
            attach=context.attach,
            detach=context.detach,
            current=context.get_current,
            in_context=trace.set_span_in_context,
            current_span=trace.get_current_span,
            global_provider=trace.get_tracer_provider,
            unset=(trace.ProxyTracerProvider, trace.NoOpTracerProvider),
            CLIENT=trace.SpanKind.CLIENT,
            INTERNAL=trace.SpanKind.INTERNAL,
            Status=trace.Status,
            ERROR=trace.StatusCode.ERROR,
        )
    return _api


def _tracer_of(provider: Any) -> Any:
    global _cache
    found = provider.get_tracer(SCOPE, __version__)
    _cache = (provider, found)
    return found


def meters() -> tuple[Any, Any] | None:
    """The token histogram and the per-tool token counter to record to now, or None when
    metrics are off (a ``sys.modules`` lookup when they are)."""
    settings = _settings
    if not settings.enabled or _in_workflow():
        return None
    provider = settings.meter_provider
    if provider is None:
        if _METRICS_API not in sys.modules:
            return None
        from opentelemetry import metrics

        provider = metrics.get_meter_provider()
        if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__ == (
            "_ProxyMeterProvider"  # no provider set yet: measurements would be dropped
        ):
            return None
    cached = _meters
    if cached is None or cached[0] is not provider:
        cached = _instruments(provider)
    return cached[1], cached[2]


def record_tokens(usage: Any, model: str, server: Callable[[], Mapping[str, Any]]) -> None:
    """Record one model request's reported ``usage`` (input and output tokens) in
    ``gen_ai.client.token.usage``, when metrics are on; ``server`` gives the attributes
    naming the server (asked only then)."""
    recorders = meters()
    if recorders is None:
        return
    histogram = recorders[0]
    chat = {**server(), "gen_ai.request.model": model, "gen_ai.operation.name": "chat"}
    histogram.record(usage.prompt_tokens, {**chat, "gen_ai.token.type": "input"})
    histogram.record(usage.completion_tokens, {**chat, "gen_ai.token.type": "output"})


def _instruments(provider: Any) -> tuple[Any, Any, Any]:
    global _meters
    meter = provider.get_meter(SCOPE, __version__)
    try:
        histogram = meter.create_histogram(
            TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=list(_TOKEN_BUCKETS),
        )
    except TypeError:  # an API older than bucket advice (opentelemetry-api < 1.23)
        histogram = meter.create_histogram(
            TOKEN_USAGE, unit="{token}", description="Number of input and output tokens used"
        )
    counter = meter.create_counter(
        TOOL_TOKENS,
        unit="{token}",
        description="Tokens each tool cost in a model loop: definition, arguments, result",
    )
    _meters = (provider, histogram, counter)
    return _meters


def capture_content() -> bool:
    """Whether spans record content (see :func:`configure_tracing`)."""
    if _settings.capture_content is not None:
        return _settings.capture_content
    return os.environ.get(CONTENT_ENV, "").strip().lower() == "true"


def content_limit() -> int | None:
    """The most characters of each piece of recorded content (see
    :func:`configure_tracing`)."""
    return _settings.max_content_chars


def described(error: BaseException, content: bool) -> str:
    """The text of a tool's ``error`` for a span or a log: without the argument values
    it may quote unless ``content`` (see :func:`capture_content`): a
    :class:`~agcore_tools.ToolError` with a ``redacted`` form
    (:class:`~agcore_tools.InvalidArgumentsError`, :class:`~agcore_tools.ProgramError`)
    gives that. Cut at :data:`~agcore_tools._span_content.TEXT_CHARS` characters."""
    if not content and isinstance(error, ToolError):
        redacted = getattr(error, "redacted", None)
        if isinstance(redacted, str):
            return bounded(redacted, TEXT_CHARS)
    return bounded(str(error), TEXT_CHARS)


def raised(exc: BaseException, text: str | None = None) -> str:
    """The status description of a span that ``exc`` ended: its class and message (or
    ``text``, its redacted form), and never an empty message (a cancellation has none).

    Example:
        >>> import asyncio
        >>> raised(asyncio.CancelledError()), raised(ValueError("bad n"))
        ('CancelledError: cancelled by the caller', 'ValueError: bad n')
    """
    if text is None:
        text = str(exc)
    if not text:
        text = "cancelled by the caller" if isinstance(exc, CancelledError) else "(no message)"
    return f"{type(exc).__name__}: {text}"


def error_type(exc: BaseException) -> str:
    """``error.type`` of an exception: its class name (``ToolTimeoutError``)."""
    return type(exc).__qualname__


def fail(span: Any, kind: str, message: str) -> None:
    """Mark ``span`` failed: ``error.type`` and an ERROR status with ``message``, cut
    at :data:`~agcore_tools._span_content.TEXT_CHARS` characters (OpenTelemetry's
    attribute limit does not cover a status)."""
    ot = api()
    span.set_attribute("error.type", bounded(kind, TEXT_CHARS))
    span.set_status(ot.Status(ot.ERROR, bounded(message, TEXT_CHARS)))


def short(text: str) -> str:
    """``text`` (a description, an id) cut at
    :data:`~agcore_tools._span_content.TEXT_CHARS` characters for a span attribute."""
    return bounded(text, TEXT_CHARS)


# -- execute_tool spans ---------------------------------------------------------------


def wrap_invoke(registry: _Tools, guarded: Guarded) -> Guarded:
    """``guarded`` (the registry's per-call runner) itself when tracing is off, else a
    runner that reports each call in an ``execute_tool`` span."""
    found = tracer()
    if found is None:
        return guarded
    content = capture_content()
    limit = content_limit() if content else None
    return functools.partial(_execute_tool, found, content, limit, registry, guarded)


async def _execute_tool(
    found: Any,
    content: bool,
    limit: int | None,
    registry: _Tools,
    guarded: Guarded,
    call: ToolCall,
    ctx: ToolContext | None,
    timeout: float | None,
) -> ToolInvocation:
    name, args, call_id = call
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "function",
    }
    if call_id is not None:
        # A call id given as no str (an int) runs untraced: traced, it must run too.
        attributes["gen_ai.tool.call.id"] = short(
            call_id if isinstance(call_id, str) else str(call_id)
        )
    tool = registry.get(name)
    if tool is not None and tool.description:
        # A tool may name a shorter text for spans: run_python's description is its
        # preamble plus the whole listing of the tools a program may call.
        described_as = getattr(tool, "span_description", None)
        description = described_as if isinstance(described_as, str) else tool.description
        attributes["gen_ai.tool.description"] = short(description)
    if content:
        attributes["gen_ai.tool.call.arguments"] = content_json(
            dict(args) if isinstance(args, Mapping) else args, limit
        )
    ot = api()
    span = found.start_span(f"execute_tool {name}", kind=ot.INTERNAL, attributes=attributes)
    # Current while the tool runs, so its own spans (an MCP request) are its children.
    token = ot.attach(ot.in_context(span))
    try:
        invocation = await guarded(call, ctx, timeout)
    except BaseException as exc:
        fail(span, error_type(exc), raised(exc))
        raise
    else:
        error = invocation.error
        if error is not None:
            fail(span, error_type(error), described(error, content))
        elif content:
            span.set_attribute("gen_ai.tool.call.result", content_json(invocation.output, limit))
        return invocation
    finally:
        ot.detach(token)
        span.end()
