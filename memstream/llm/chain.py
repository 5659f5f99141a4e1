"""The provider chain of the extraction spec: the configured primary first, then the others in order
(anthropic → xai → google → local). Each provider retries on its own policy; the chain
falls through to the next when one gives up. Every call gets a span with provider,
model, latency, tokens and outcome.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from memstream.llm.base import LLM, Completion, JsonSchema, LLMError, is_busy, waiting_calls
from memstream.telemetry import metrics
from memstream.telemetry.tracing import stage_span

#: The extraction spec's fallback order; the configured primary moves to the front.
PROVIDER_ORDER: tuple[str, ...] = ("anthropic", "xai", "google", "local")


class LLMUnavailable(LLMError):
    """Every provider of the chain failed; the message lists each one's reason."""


def ordered(providers: Sequence[LLM], primary: str) -> list[LLM]:
    rank = {name: i for i, name in enumerate(PROVIDER_ORDER)}
    return sorted(providers, key=lambda p: (p.provider != primary, rank.get(p.provider, len(rank))))


class ProviderChain:
    """An LLM that is a list of LLMs, tried in order until one answers."""

    provider = "chain"

    def __init__(self, providers: Sequence[LLM]):
        if not providers:
            raise ValueError("a provider chain needs at least one provider")
        self.providers = list(providers)

    @property
    def model(self) -> str:
        return self.providers[0].model

    def describe(self) -> str:
        return " → ".join(f"{p.provider} {p.model}" for p in self.providers)

    @property
    def busy(self) -> bool:
        """The provider tried first would make a call wait (a local model with every slot taken)."""
        return is_busy(self.providers[0])

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot of the provider tried first."""
        return waiting_calls(self.providers[0])

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        failures: list[str] = []
        stage = metrics.llm_stage(system)
        for llm in self.providers:
            started = time.monotonic()
            with stage_span("memstream.llm.call", **{"llm.provider": llm.provider, "llm.model": llm.model}) as span:
                try:
                    completion = await llm.complete(system, prompt, max_tokens=max_tokens, schema=schema)
                except LLMError as err:
                    span.set_attribute("llm.outcome", "error")
                    span.set_attribute("llm.error", str(err)[:500])
                    span.set_attribute("llm.latency_ms", round((time.monotonic() - started) * 1000, 1))
                    failures.append(str(err))
                    metrics.record_llm_call(
                        llm.provider, llm.model, "error", seconds=time.monotonic() - started, stage=stage
                    )
                    continue
                span.set_attribute("llm.outcome", "ok")
                span.set_attribute("llm.latency_ms", round((time.monotonic() - started) * 1000, 1))
                span.set_attribute("llm.input_tokens", completion.input_tokens)
                span.set_attribute("llm.output_tokens", completion.output_tokens)
                metrics.record_llm_call(
                    llm.provider,
                    completion.model,
                    "ok",
                    completion.input_tokens,
                    completion.output_tokens,
                    seconds=time.monotonic() - started,
                    stage=stage,
                )
                return completion
        raise LLMUnavailable("all LLM providers failed: " + " | ".join(failures))

    async def close(self) -> None:
        for llm in self.providers:
            await llm.close()
