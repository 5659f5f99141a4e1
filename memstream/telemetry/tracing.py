"""OpenTelemetry: one trace per turn across every stage.

W3C trace context travels in Kafka headers: the aiokafka instrumentation injects it on
every send, and Faust's OpenTelemetry sensor opens a ``{topic} process`` span, parented
by those headers, that stays current while an agent handles the event. Domain spans
(``memstream.extract`` …) nest under it. Telemetry never breaks processing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

log = logging.getLogger(__name__)

TRACER_NAME = "memstream"
_instrumented = False


def configure_tracing(exporter_name: str, *, exporter: SpanExporter | None = None) -> TracerProvider | None:
    """Install a tracer provider with the named exporter (none, console, otlp) or the given one.

    The global provider can be set once per process; a second call leaves it as it is. With
    none, nothing is instrumented: header injection and Faust's sensor cost ~5% of a
    worker's CPU under load (py-spy), for spans no one would see.
    """
    if exporter is None and exporter_name == "none":
        return None
    instrument_kafka()
    # Spans go out at once to an exporter given in code (tests) or the console; in batches to OTLP.
    immediate = exporter is not None or exporter_name == "console"
    if exporter is None:
        exporter = _named_exporter(exporter_name)
    processor = SimpleSpanProcessor(exporter) if immediate else BatchSpanProcessor(exporter)
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        current.add_span_processor(processor)
        return current
    provider = TracerProvider(resource=Resource.create({"service.name": "memstream"}))
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def _named_exporter(name: str) -> SpanExporter:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    raise ValueError(f"unknown trace exporter {name!r}")


def instrument_kafka() -> None:
    """Inject trace context into every Kafka message aiokafka sends (once per process)."""
    global _instrumented
    if _instrumented:
        return
    try:
        from opentelemetry.instrumentation.aiokafka import AIOKafkaInstrumentor

        AIOKafkaInstrumentor().instrument()
        _instrumented = True
    except Exception:  # telemetry never blocks the pipeline
        log.warning("aiokafka instrumentation unavailable; traces will not cross topics", exc_info=True)


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


@contextmanager
def stage_span(name: str, **attributes: Any) -> Iterator[trace.Span]:
    """A span for one stage's work on one event, under whatever span is current."""
    try:
        span_cm = tracer().start_as_current_span(name, attributes=_clean(attributes))
        span = span_cm.__enter__()
    except Exception:  # pragma: no cover - telemetry never breaks processing
        yield trace.INVALID_SPAN
        return
    try:
        yield span
    except BaseException as exc:
        span_cm.__exit__(type(exc), exc, exc.__traceback__)
        raise
    else:
        span_cm.__exit__(None, None, None)


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if isinstance(v, (str, int, float, bool))}


@contextmanager
def span_from_headers(name: str, headers: Any, **attributes: Any) -> Iterator[trace.Span]:
    """A span continuing the trace carried in Kafka ``headers``.

    For batching stages: Faust's sensor closes each event's process span when the
    stream moves to the next event, so a batch's results are sent outside of it.
    """
    try:
        from opentelemetry import context, propagate

        carrier = {
            k: (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))
            for k, v in (headers.items() if hasattr(headers, "items") else (headers or []))
        }
        token = context.attach(propagate.extract(carrier))
    except Exception:  # pragma: no cover - telemetry never breaks processing
        token = None
    try:
        with stage_span(name, **attributes) as span:
            yield span
    finally:
        if token is not None:
            from opentelemetry import context

            context.detach(token)
