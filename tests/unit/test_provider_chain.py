"""The extraction spec's provider chain (primary first, fall through on failure, one span a call) and retries."""

from __future__ import annotations

import random
import uuid

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memstream.llm.base import Completion, JsonSchema, LLMError
from memstream.llm.chain import PROVIDER_ORDER, LLMUnavailable, ProviderChain, ordered
from memstream.llm.retry import RetryPolicy, with_retries


class FakeLLM:
    """Answers with a canned completion and records what it was asked."""

    def __init__(self, provider: str, model: str | None = None, *, text: str = "ok", tokens: tuple[int, int] = (11, 7)):
        self.provider = provider
        # Unique per test so spans from other tests never match.
        self.model = model or f"{provider}-model-{uuid.uuid4().hex[:8]}"
        self.text = text
        self.tokens = tokens
        self.calls: list[tuple[str, str, int]] = []
        self.closed = 0

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        self.calls.append((system, prompt, max_tokens))
        return Completion(
            text=self.text,
            provider=self.provider,
            model=self.model,
            input_tokens=self.tokens[0],
            output_tokens=self.tokens[1],
        )

    async def close(self) -> None:
        self.closed += 1


class FailingLLM(FakeLLM):
    def __init__(self, provider: str, error: str, *, retryable: bool = True):
        super().__init__(provider)
        self.error = error
        self.retryable = retryable

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        self.calls.append((system, prompt, max_tokens))
        raise LLMError(self.error, retryable=self.retryable)


def _llm_spans(spans: InMemorySpanExporter, *models: str) -> list:
    return [
        s
        for s in spans.get_finished_spans()
        if s.name == "memstream.llm.call" and s.attributes is not None and s.attributes.get("llm.model") in models
    ]


# --- ordered ---


def test_provider_order_is_the_seed_order() -> None:
    assert PROVIDER_ORDER == ("anthropic", "xai", "google", "local")


@pytest.mark.parametrize(
    ("primary", "expected"),
    [
        ("anthropic", ["anthropic", "xai", "google", "local"]),
        ("xai", ["xai", "anthropic", "google", "local"]),
        ("google", ["google", "anthropic", "xai", "local"]),
        ("local", ["local", "anthropic", "xai", "google"]),
    ],
)
def test_ordered_puts_the_primary_first_then_the_seed_order(primary: str, expected: list[str]) -> None:
    providers = [FakeLLM(name) for name in ("local", "google", "xai", "anthropic")]
    assert [p.provider for p in ordered(providers, primary)] == expected


def test_ordered_with_an_unconfigured_primary_keeps_the_seed_order() -> None:
    providers = [FakeLLM(name) for name in ("local", "xai", "anthropic")]
    assert [p.provider for p in ordered(providers, "google")] == ["anthropic", "xai", "local"]


def test_ordered_puts_unknown_providers_last() -> None:
    providers = [FakeLLM("mystery"), FakeLLM("local"), FakeLLM("anthropic")]
    assert [p.provider for p in ordered(providers, "local")] == ["local", "anthropic", "mystery"]


def test_ordered_does_not_change_its_input() -> None:
    providers = [FakeLLM("local"), FakeLLM("anthropic")]
    ordered(providers, "anthropic")
    assert [p.provider for p in providers] == ["local", "anthropic"]


# --- ProviderChain ---


def test_empty_chain_is_refused() -> None:
    with pytest.raises(ValueError):
        ProviderChain([])


async def test_first_success_is_returned_and_later_providers_are_not_called() -> None:
    first, second, third = FakeLLM("anthropic", text="first"), FakeLLM("xai", text="second"), FakeLLM("local")
    chain = ProviderChain([first, second, third])
    completion = await chain.complete("sys", "prompt", max_tokens=99)
    assert completion.text == "first"
    assert completion.provider == "anthropic"
    assert first.calls == [("sys", "prompt", 99)]
    assert second.calls == [] and third.calls == []


async def test_falls_through_on_llm_error_to_the_next() -> None:
    broken = FailingLLM("anthropic", "anthropic: 529 overloaded")
    backup = FakeLLM("xai", text="from xai")
    unused = FakeLLM("local")
    completion = await ProviderChain([broken, backup, unused]).complete("sys", "prompt")
    assert completion.text == "from xai"
    assert len(broken.calls) == 1 and len(backup.calls) == 1
    assert unused.calls == []


async def test_non_retryable_error_also_falls_through() -> None:
    broken = FailingLLM("anthropic", "anthropic: 401 bad key", retryable=False)
    completion = await ProviderChain([broken, FakeLLM("local", text="local answer")]).complete("s", "p")
    assert completion.text == "local answer"


async def test_non_llm_errors_are_not_swallowed() -> None:
    class Crashing(FakeLLM):
        async def complete(
            self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
        ) -> Completion:
            raise KeyError("bug")

    backup = FakeLLM("local")
    with pytest.raises(KeyError):
        await ProviderChain([Crashing("anthropic"), backup]).complete("s", "p")
    assert backup.calls == []


async def test_all_failing_raises_llm_unavailable_naming_every_error() -> None:
    errors = ["anthropic: 529 overloaded", "xai: 503 unavailable", "google: timeout", "local: connection refused"]
    chain = ProviderChain([FailingLLM(e.split(":")[0], e) for e in errors])
    with pytest.raises(LLMUnavailable) as info:
        await chain.complete("sys", "prompt")
    assert isinstance(info.value, LLMError)
    for error in errors:
        assert error in str(info.value)


def test_model_is_the_first_providers_and_describe_lists_all() -> None:
    chain = ProviderChain([FakeLLM("anthropic", "claude-x"), FakeLLM("local", "qwen3:4b")])
    assert chain.provider == "chain"
    assert chain.model == "claude-x"
    assert chain.describe() == "anthropic claude-x → local qwen3:4b"


async def test_close_closes_every_provider() -> None:
    providers = [FakeLLM("anthropic"), FailingLLM("xai", "down"), FakeLLM("local")]
    await ProviderChain(providers).close()
    assert [p.closed for p in providers] == [1, 1, 1]


# --- spans ---


async def test_one_ok_span_for_a_successful_call(spans: InMemorySpanExporter) -> None:
    llm = FakeLLM("anthropic", tokens=(123, 45))
    await ProviderChain([llm, FakeLLM("local")]).complete("s", "p")
    found = _llm_spans(spans, llm.model)
    assert len(found) == 1
    attrs = found[0].attributes
    assert attrs["llm.provider"] == "anthropic"
    assert attrs["llm.model"] == llm.model
    assert attrs["llm.outcome"] == "ok"
    assert isinstance(attrs["llm.latency_ms"], float) and attrs["llm.latency_ms"] >= 0
    assert attrs["llm.input_tokens"] == 123
    assert attrs["llm.output_tokens"] == 45


async def test_one_span_per_provider_tried(spans: InMemorySpanExporter) -> None:
    broken = FailingLLM("anthropic", "anthropic: 529 overloaded")
    backup = FakeLLM("xai", tokens=(5, 6))
    unused = FakeLLM("local")
    await ProviderChain([broken, backup, unused]).complete("s", "p")
    found = _llm_spans(spans, broken.model, backup.model, unused.model)
    assert [s.attributes["llm.provider"] for s in found] == ["anthropic", "xai"]
    error, ok = found
    assert error.attributes["llm.outcome"] == "error"
    assert "529 overloaded" in error.attributes["llm.error"]
    assert error.attributes["llm.latency_ms"] >= 0
    assert "llm.input_tokens" not in error.attributes
    assert ok.attributes["llm.outcome"] == "ok"
    assert (ok.attributes["llm.input_tokens"], ok.attributes["llm.output_tokens"]) == (5, 6)


async def test_every_failure_gets_an_error_span(spans: InMemorySpanExporter) -> None:
    providers = [FailingLLM("anthropic", "a down"), FailingLLM("local", "b down")]
    with pytest.raises(LLMUnavailable):
        await ProviderChain(providers).complete("s", "p")
    found = _llm_spans(spans, *(p.model for p in providers))
    assert [(s.attributes["llm.provider"], s.attributes["llm.outcome"]) for s in found] == [
        ("anthropic", "error"),
        ("local", "error"),
    ]


# --- retries ---


def _fast(max_retries: int) -> RetryPolicy:
    return RetryPolicy(max_retries=max_retries, base_delay=0.0, max_delay=0.0)


class Flaky:
    """A call that raises ``error`` on its first ``failures`` attempts (every one by default), then answers."""

    def __init__(self, error: Exception, failures: int | None = None) -> None:
        self.error, self.failures, self.attempts = error, failures, 0

    async def __call__(self) -> str:
        self.attempts += 1
        if self.failures is None or self.attempts <= self.failures:
            raise self.error
        return "done"


async def test_retryable_error_is_retried_up_to_the_limit_then_reraised() -> None:
    call = Flaky(LLMError("503", retryable=True))

    with pytest.raises(LLMError, match="503"):
        await with_retries(call, _fast(3), what="test")
    assert call.attempts == 4  # the first attempt and three retries


async def test_success_after_retries_is_returned() -> None:
    call = Flaky(LLMError("429"), failures=2)

    assert await with_retries(call, _fast(2), what="test") == "done"
    assert call.attempts == 3


@pytest.mark.parametrize(
    ("error", "retries"),
    [
        (LLMError("503"), 0),  # zero retries is one attempt
        (LLMError("401 bad key", retryable=False), 5),
        (ValueError("bug"), 5),  # not an LLMError: a bug, never retried
    ],
    ids=["zero-retries", "non-retryable", "other-exception"],
)
async def test_one_attempt_only(error: Exception, retries: int) -> None:
    call = Flaky(error)

    with pytest.raises(type(error), match=str(error)):
        await with_retries(call, _fast(retries), what="test")
    assert call.attempts == 1


async def test_retries_sleep_the_policy_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def fake_sleep(delay: float) -> None:
        slept.append(delay)

    monkeypatch.setattr("memstream.llm.retry.asyncio.sleep", fake_sleep)

    policy = RetryPolicy(max_retries=3, base_delay=0.5, max_delay=8.0)
    with pytest.raises(LLMError):
        await with_retries(Flaky(LLMError("503")), policy, what="test")
    assert len(slept) == 3
    assert all(0 <= d <= min(8.0, 0.5 * 2**n) for n, d in enumerate(slept))


def test_retry_policy_defaults() -> None:
    assert RetryPolicy() == RetryPolicy(max_retries=2, base_delay=0.5, max_delay=8.0)


@pytest.mark.parametrize("seed", range(5))
def test_delay_stays_within_full_jitter_bounds(seed: int) -> None:
    random.seed(seed)
    policy = RetryPolicy(base_delay=0.5, max_delay=8.0)
    for n in range(10):
        bound = min(policy.max_delay, policy.base_delay * 2**n)
        for _ in range(50):
            assert 0 <= policy.delay(n) <= bound


def test_delay_is_capped_at_max_delay_and_jittered() -> None:
    random.seed(1234)
    policy = RetryPolicy(base_delay=1.0, max_delay=3.0)
    delays = [policy.delay(6) for _ in range(200)]  # 1.0 * 2**6 = 64 > 3
    assert max(delays) <= 3.0
    assert min(delays) >= 0.0
    assert len(set(delays)) > 1  # jittered, not a constant
    assert max(delays) > 1.5  # and spread over the interval


def _sample(name: str, labels: dict[str, str]) -> float:
    from memstream.telemetry import metrics

    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


async def test_calls_and_tokens_are_counted_per_stage_by_their_system_prompt() -> None:
    from memstream.rules import decision, prompts

    calls = {stage: _sample("memstream_llm_stage_calls_total", {"stage": stage}) for stage in ("decide", "extract")}
    tokens_in = _sample("memstream_llm_stage_tokens_total", {"stage": "decide", "kind": "input"})
    tokens_out = _sample("memstream_llm_stage_tokens_total", {"stage": "decide", "kind": "output"})
    chain = ProviderChain([FailingLLM("anthropic", "down"), FakeLLM("xai", tokens=(40, 9))])

    await chain.complete(decision.SYSTEM, "a fact and its candidates")
    await chain.complete(prompts.NORMAL_SYSTEM, "a snapshot")

    # Both providers tried count: the decision cost two calls, and the tokens of the one that answered.
    assert _sample("memstream_llm_stage_calls_total", {"stage": "decide"}) == calls["decide"] + 2
    assert _sample("memstream_llm_stage_calls_total", {"stage": "extract"}) == calls["extract"] + 2
    assert _sample("memstream_llm_stage_tokens_total", {"stage": "decide", "kind": "input"}) == tokens_in + 40
    assert _sample("memstream_llm_stage_tokens_total", {"stage": "decide", "kind": "output"}) == tokens_out + 9


def test_a_system_prompt_no_stage_uses_is_other() -> None:
    from memstream.telemetry import metrics

    assert metrics.llm_stage("You are a helpful assistant.") == "other"
