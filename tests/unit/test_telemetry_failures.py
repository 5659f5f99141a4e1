"""Telemetry never blocks processing: a failing exporter is logged, not raised."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from memstream.llm.base import Completion, JsonSchema
from memstream.llm.chain import ProviderChain
from memstream.telemetry.tracing import stage_span


class BrokenExporter(SpanExporter):
    """Raises on every export while ``broken`` is set (it stays installed for the session)."""

    broken = False
    calls = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        BrokenExporter.calls += 1
        if BrokenExporter.broken:
            raise RuntimeError("collector is down")
        return SpanExportResult.SUCCESS


class Answering:
    provider = "fake"
    model = "fake-1"

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        return Completion(text="[]", provider=self.provider, model=self.model, input_tokens=3, output_tokens=1)

    async def close(self) -> None:
        pass


async def test_a_failing_exporter_does_not_stop_llm_calls_or_stages() -> None:
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    provider.add_span_processor(SimpleSpanProcessor(BrokenExporter()))
    BrokenExporter.broken = True
    try:
        before = BrokenExporter.calls
        completion = await ProviderChain([Answering()]).complete("system", "prompt")
        with stage_span("memstream.extract", mode="normal"):
            done = True
        assert completion.text == "[]" and done
        assert BrokenExporter.calls >= before + 2  # the exporter was called, and failed, twice
    finally:
        BrokenExporter.broken = False
