"""What every LLM provider does alike, run against each through its real SDK and its fake on loopback."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from memstream.llm.base import LLMError
from tests.fakes.loopback import LoopbackFake
from tests.unit.llm_clients import PROVIDERS, QUESTION, Provider, closed_port

MakeLLM = Callable[..., Any]
KEYED = [p for p in PROVIDERS if p.api_key]
ON_HTTP = [p for p in PROVIDERS if isinstance(p.fake, type) and issubclass(p.fake, LoopbackFake)]  # xAI's fake is gRPC


@pytest.fixture(params=PROVIDERS, ids=lambda p: p.name)
def case(request: pytest.FixtureRequest) -> Provider:
    provider: Provider = request.param
    return provider


async def test_completion_returns_text_model_and_token_counts(case: Provider, make_llm: MakeLLM) -> None:
    completion = await make_llm().complete(case.system, QUESTION)

    assert completion.text == case.answer
    assert completion.provider == case.name
    assert completion.model == case.served_model
    assert completion.input_tokens == case.input_tokens  # the fake counts words
    assert completion.output_tokens == 1


@pytest.mark.parametrize(
    ("case", "failure"),
    [(p, f) for p in PROVIDERS for f in p.transient],
    ids=[f"{p.name}-{getattr(f, 'name', f)}" for p in PROVIDERS for f in p.transient],
)
async def test_a_transient_failure_is_retried_then_succeeds(
    case: Provider, fake: Any, make_llm: MakeLLM, failure: object
) -> None:
    fake.fail_next(1, failure)

    completion = await make_llm(max_retries=1).complete(case.system, QUESTION)

    assert completion.text == case.answer
    first, retry = fake.requests
    assert case.sent(first) == case.sent(retry)


async def test_a_persistent_rate_limit_gives_up_after_the_policy_limit(
    case: Provider, fake: Any, make_llm: MakeLLM
) -> None:
    fake.fail_next(10, case.rate_limit)

    with pytest.raises(LLMError) as caught:
        await make_llm(max_retries=1).complete(case.system, QUESTION)

    assert str(caught.value) == f"{case.name} {case.model}: {case.rate_limited}"
    assert caught.value.retryable is True
    assert len(fake.requests) == 2


@pytest.mark.parametrize("case", KEYED, ids=lambda p: p.name)
async def test_a_wrong_api_key_is_refused_and_not_retried(case: Provider, fake: Any, make_llm: MakeLLM) -> None:
    wrong = f"{case.api_key}-wrong"

    with pytest.raises(LLMError) as caught:
        await make_llm(api_key=wrong, max_retries=2).complete(case.system, QUESTION)

    assert str(caught.value).startswith(f"{case.name} {case.model}: {case.wrong_key}")
    assert caught.value.retryable is False
    [request] = fake.requests
    assert request.api_key == wrong


async def requests_seen_after_a_timeout(fake: Any) -> list[Any]:
    """What the fake saw of a call that timed out with no retries allowed, waited for 2 s.

    One request, or none; a second would be a retry, which must not come. The fake serves on a thread
    of the test's process and may read the abandoned request after the client raised, or not record
    it at all: two CI runs at once on 2 cores counted none one second after the raise (google), and
    then missed an exact count of one after waiting ten seconds (google, local; the check hid the
    count). Why is not traced: the client's own preparation counts against its 0.3 s, and the
    fake's handler is cancelled when the client hangs up.
    """
    return list(await fake.received(2, within=2.0))


async def test_delay_longer_than_the_timeout_raises_a_retryable_llm_error(
    case: Provider, fake: Any, make_llm: MakeLLM
) -> None:
    fake.delay_next(1, seconds=5.0)
    started = time.monotonic()

    with pytest.raises(LLMError) as caught:
        await make_llm(timeout=0.3, max_retries=0).complete(case.system, QUESTION)

    assert time.monotonic() - started < 3.0
    assert str(caught.value).startswith(f"{case.name} {case.model}: request timeout after 0.3s per attempt")
    assert caught.value.retryable is True
    seen = await requests_seen_after_a_timeout(fake)
    assert len(seen) <= 1, seen


@pytest.mark.parametrize("case", ON_HTTP, ids=lambda p: p.name)
async def test_a_request_the_server_reads_only_after_the_timeout_is_not_taken_for_a_retry(
    case: Provider, fake: Any, make_llm: MakeLLM
) -> None:
    # CI's loaded worker: the fake's thread read the request after the client had given up on it.
    fake.delay_next(1, seconds=5.0)
    fake.stall(1.5)

    with pytest.raises(LLMError, match=r"request timeout after 0\.3s per attempt"):
        await make_llm(timeout=0.3, max_retries=0).complete(case.system, QUESTION)

    seen = await requests_seen_after_a_timeout(fake)
    assert len(seen) <= 1, seen


async def test_a_timed_out_attempt_is_retried(case: Provider, fake: Any, make_llm: MakeLLM) -> None:
    fake.delay_next(1, seconds=5.0)

    # The retry must be answered within the timeout: 1 s leaves the fake's thread (it serves in this
    # process) a loaded machine's stall, which 0.3 s did not always.
    completion = await make_llm(timeout=1.0, max_retries=1).complete(case.system, QUESTION)

    assert completion.text == case.answer
    assert len(await fake.received(2)) == 2


@pytest.mark.parametrize("case", KEYED, ids=lambda p: p.name)
@pytest.mark.parametrize("key", ["", "  "])
def test_blank_api_key_is_refused_before_any_request(case: Provider, fake: Any, key: str) -> None:
    with pytest.raises(LLMError) as caught:
        case.llm(key, **{case.address: getattr(fake, case.address)})

    assert str(caught.value).startswith(f"{case.name} ")
    assert str(caught.value).endswith(": no API key configured")
    assert caught.value.retryable is False
    assert fake.requests == []


async def test_unreachable_server_raises_a_retryable_llm_error(case: Provider, make_llm: MakeLLM) -> None:
    llm = make_llm(**{case.address: case.address_at(closed_port())}, timeout=2.0)

    with pytest.raises(LLMError, match=f"^{case.name} {case.model}: {case.unreachable}") as caught:
        await llm.complete(case.system, QUESTION)

    assert caught.value.retryable is True
