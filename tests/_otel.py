"""An OpenTelemetry SDK pipeline into memory for the tracing tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agcore_tools import configure_tracing


class Spans:
    """The spans finished so far, with helpers to read the tree."""

    def __init__(self, exporter: InMemorySpanExporter, provider: TracerProvider) -> None:
        self.exporter = exporter
        self.provider = provider

    def finished(self) -> list[ReadableSpan]:
        """Every finished span, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        """The finished spans called ``name``, in the order they ended."""
        return [span for span in self.finished() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        """The one finished span called ``name``."""
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {self.tree()}"
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        """The finished children of ``parent``, by start time."""
        spans = [
            span
            for span in self.finished()
            if span.parent is not None and span.parent.span_id == parent.context.span_id
        ]
        return sorted(spans, key=lambda span: span.start_time or 0)

    def tree(self) -> list[tuple[str, str | None]]:
        """``(name, parent's name)`` for every finished span, by start time."""
        by_id = {span.context.span_id: span.name for span in self.finished()}
        spans = sorted(self.finished(), key=lambda span: span.start_time or 0)
        return [(s.name, by_id.get(s.parent.span_id) if s.parent else None) for s in spans]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    """A span's attributes as a plain dict."""
    return dict(span.attributes or {})


@contextmanager
def recording(*, capture_content: bool | None = None, **options: Any) -> Iterator[Spans]:
    """Send agcore_tools' spans to memory for the block (``options``: more settings of
    ``configure_tracing``), then restore the defaults."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configure_tracing(provider, capture_content=capture_content, **options)
    try:
        yield Spans(exporter, provider)
    finally:
        configure_tracing()
        provider.shutdown()
