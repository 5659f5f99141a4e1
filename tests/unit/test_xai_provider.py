"""XaiLLM through the real xai-sdk, against the fake xAI Chat gRPC service on loopback."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator

import grpc
import pytest
from xai_sdk.proto import chat_pb2

from memstream.llm.base import LLMError
from memstream.llm.retry import RetryPolicy
from memstream.llm.xai import XaiLLM
from tests.fakes.xai_server import FakeXai, system_text, user_text
from tests.unit.llm_clients import client_factory

API_KEY = "xai-test-0000"
MODEL = "grok-4-1-fast-non-reasoning"
# A concrete name the fake answers with instead of the requested one: proof the model comes from the response.
SERVED_MODEL = "grok-4-1-fast-non-reasoning-0925"
SYSTEM = "You answer geography questions in one word."
QUESTION = "What is the capital of France?"

MakeLLM = Callable[..., XaiLLM]


def answer(request: chat_pb2.GetCompletionsRequest) -> str:
    return "Paris" if "capital of France" in user_text(request) else "unknown"


@pytest.fixture
def fake() -> Iterator[FakeXai]:
    with FakeXai(answer, api_key=API_KEY, served_model=SERVED_MODEL) as server:
        yield server


@pytest.fixture
async def make_llm(fake: FakeXai) -> AsyncIterator[MakeLLM]:
    """Builds clients pointed at the fake (overrides by keyword) and closes them all after the test."""
    async with client_factory(XaiLLM, "api_key", api_key=API_KEY, model=MODEL, api_host=fake.api_host) as make:
        yield make


async def test_completion_returns_text_model_and_token_counts(make_llm: MakeLLM) -> None:
    completion = await make_llm().complete(SYSTEM, QUESTION)

    assert completion.text == "Paris"
    assert completion.provider == "xai"
    assert completion.model == SERVED_MODEL
    assert completion.input_tokens == 7 + 6  # the fake counts words: system, then prompt
    assert completion.output_tokens == 1


async def test_model_falls_back_to_the_requested_one_when_the_response_names_none(make_llm: MakeLLM) -> None:
    with FakeXai(answer, api_key=API_KEY, served_model="") as unnamed:
        completion = await make_llm(api_host=unnamed.api_host, model="grok-custom").complete(SYSTEM, QUESTION)
        [recorded] = unnamed.requests

    assert recorded.request.model == "grok-custom"
    assert completion.model == "grok-custom"
    assert completion.text == "Paris"


async def test_system_prompt_and_user_message_arrive_as_sent(fake: FakeXai, make_llm: MakeLLM) -> None:
    await make_llm().complete(SYSTEM, QUESTION, max_tokens=77)

    [recorded] = fake.requests
    assert recorded.system == SYSTEM
    assert recorded.user_text == QUESTION
    assert system_text(recorded.request) == SYSTEM
    assert [m.role for m in recorded.request.messages] == [
        chat_pb2.MessageRole.ROLE_SYSTEM,
        chat_pb2.MessageRole.ROLE_USER,
    ]
    assert recorded.request.model == MODEL
    assert recorded.request.max_tokens == 77
    assert recorded.request.n == 1


async def test_empty_system_prompt_is_left_out(fake: FakeXai, make_llm: MakeLLM) -> None:
    await make_llm().complete("", QUESTION)

    [recorded] = fake.requests
    assert [m.role for m in recorded.request.messages] == [chat_pb2.MessageRole.ROLE_USER]
    assert recorded.system == ""


async def test_api_key_arrives_as_bearer_authorization_metadata(fake: FakeXai, make_llm: MakeLLM) -> None:
    await make_llm().complete(SYSTEM, QUESTION)

    [recorded] = fake.requests
    assert recorded.metadata["authorization"] == f"Bearer {API_KEY}"
    assert recorded.api_key == API_KEY
    assert recorded.metadata["xai-sdk-language"].startswith("python/")


async def test_sdk_retries_are_off_so_one_unavailable_is_one_request(fake: FakeXai, make_llm: MakeLLM) -> None:
    # The SDK's channel default would retry UNAVAILABLE up to 5 attempts on its own.
    fake.fail_next(1, grpc.StatusCode.UNAVAILABLE)

    with pytest.raises(LLMError) as caught:
        await make_llm(max_retries=0).complete(SYSTEM, QUESTION)

    assert caught.value.retryable is True
    assert str(caught.value) == "xai grok-4-1-fast-non-reasoning: gRPC UNAVAILABLE scripted UNAVAILABLE"
    assert len(fake.requests) == 1


async def test_unavailable_once_is_retried_then_succeeds(fake: FakeXai, make_llm: MakeLLM) -> None:
    fake.fail_next(1, grpc.StatusCode.UNAVAILABLE)

    completion = await make_llm(max_retries=2).complete(SYSTEM, QUESTION)

    assert completion.text == "Paris"
    assert len(fake.requests) == 2


async def test_persistent_resource_exhausted_gives_up_after_the_policy_limit(fake: FakeXai, make_llm: MakeLLM) -> None:
    fake.fail_next(5, grpc.StatusCode.RESOURCE_EXHAUSTED)

    with pytest.raises(LLMError) as caught:
        await make_llm(max_retries=1).complete(SYSTEM, QUESTION)

    assert caught.value.retryable is True
    assert "xai" in str(caught.value)
    assert MODEL in str(caught.value)
    assert "RESOURCE_EXHAUSTED" in str(caught.value)
    assert len(fake.requests) == 2


async def test_wrong_api_key_is_unauthenticated_and_not_retried(fake: FakeXai, make_llm: MakeLLM) -> None:
    with pytest.raises(LLMError) as caught:
        await make_llm(api_key="xai-wrong-key", max_retries=2).complete(SYSTEM, QUESTION)

    assert caught.value.retryable is False
    assert str(caught.value) == "xai grok-4-1-fast-non-reasoning: gRPC UNAUTHENTICATED incorrect API key provided"
    assert len(fake.requests) == 1
    assert fake.requests[0].api_key == "xai-wrong-key"


@pytest.mark.parametrize(
    "code",
    [grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND],
)
async def test_other_client_errors_are_not_retried(fake: FakeXai, make_llm: MakeLLM, code: grpc.StatusCode) -> None:
    fake.fail_next(1, code)

    with pytest.raises(LLMError) as caught:
        await make_llm(max_retries=2).complete(SYSTEM, QUESTION)

    assert caught.value.retryable is False
    assert code.name in str(caught.value)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("code", [grpc.StatusCode.INTERNAL, grpc.StatusCode.ABORTED])
async def test_transient_server_errors_are_retried(fake: FakeXai, make_llm: MakeLLM, code: grpc.StatusCode) -> None:
    fake.fail_next(1, code)

    completion = await make_llm(max_retries=1).complete(SYSTEM, QUESTION)

    assert completion.text == "Paris"
    assert len(fake.requests) == 2


async def test_an_attempt_slower_than_the_timeout_is_a_retryable_timeout_error(
    fake: FakeXai, make_llm: MakeLLM
) -> None:
    fake.delay_next(1, 5.0)

    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        await make_llm(timeout=0.3, max_retries=0).complete(SYSTEM, QUESTION)
    elapsed = time.monotonic() - started

    assert "timeout after 0.3s per attempt" in str(caught.value)
    assert caught.value.retryable is True
    assert elapsed < 2.0
    assert len(fake.requests) == 1


async def test_a_timed_out_attempt_is_retried_and_the_next_one_answers(fake: FakeXai, make_llm: MakeLLM) -> None:
    fake.delay_next(1, 5.0)

    completion = await make_llm(timeout=0.3, max_retries=1).complete(SYSTEM, QUESTION)

    assert completion.text == "Paris"
    assert len(fake.requests) == 2


@pytest.mark.parametrize("key", ["", "   "])
def test_blank_api_key_is_refused_at_construction(key: str) -> None:
    with pytest.raises(LLMError) as caught:
        XaiLLM(key, api_host="127.0.0.1:1")

    assert caught.value.retryable is False
    assert str(caught.value) == "xai grok-4-1-fast-non-reasoning: no API key configured"


async def test_unreachable_host_is_a_retryable_unavailable_error() -> None:
    with FakeXai() as gone:
        host = gone.api_host  # a port that was just free, and is closed again
    llm = XaiLLM(API_KEY, api_host=host, retry=RetryPolicy(max_retries=0))
    try:
        with pytest.raises(LLMError) as caught:
            await llm.complete(SYSTEM, QUESTION)
    finally:
        await llm.close()

    assert caught.value.retryable is True
    assert "UNAVAILABLE" in str(caught.value)
