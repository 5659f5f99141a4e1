"""GoogleLLM through the real google-genai SDK, against the fake Gemini API on loopback."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from memstream.llm.base import LLMError
from memstream.llm.google import GoogleLLM
from memstream.llm.retry import RetryPolicy
from tests.fakes.google_server import FakeGoogle
from tests.unit.llm_clients import client_factory

API_KEY = "AIza-test-0000"
MODEL = "gemini-3-flash-preview"
# What the API reports as the version that answered: proof the Completion's model comes from the response.
SERVED_MODEL = "gemini-3-flash-preview-09-2025"
SYSTEM = "You answer geography questions as a JSON array of words."
QUESTION = "What is the capital of France?"
ANSWER = '["Paris"]'

MakeLLM = Callable[..., GoogleLLM]


def answer(request_json: dict[str, Any]) -> str:
    prompt = request_json["contents"][-1]["parts"][0]["text"]
    return ANSWER if "capital of France" in prompt else ""


@pytest.fixture
def fake() -> Iterator[FakeGoogle]:
    with FakeGoogle(answer, api_key=API_KEY, served_model=SERVED_MODEL) as server:
        yield server


@pytest.fixture
async def make_llm(fake: FakeGoogle) -> AsyncIterator[MakeLLM]:
    """Builds clients pointed at the fake (overrides by keyword) and closes them all after the test."""
    async with client_factory(GoogleLLM, "api_key", api_key=API_KEY, model=MODEL, base_url=fake.base_url) as make:
        yield make


async def test_completion_returns_text_model_and_token_counts(make_llm: MakeLLM) -> None:
    completion = await make_llm().complete(SYSTEM, QUESTION)

    assert completion.text == ANSWER
    assert completion.provider == "google"
    assert completion.model == SERVED_MODEL
    assert completion.input_tokens == 6 + 10  # the fake counts words: prompt, then system instruction
    assert completion.output_tokens == 1


async def test_request_asks_for_json_with_the_system_instruction(fake: FakeGoogle, make_llm: MakeLLM) -> None:
    await make_llm().complete(SYSTEM, QUESTION, max_tokens=77)

    [request] = fake.requests
    assert request.path == f"/v1/models/{MODEL}:generateContent"
    assert request.response_mime_type == "application/json"
    assert request.generation_config["maxOutputTokens"] == 77
    assert request.system == SYSTEM
    assert request.body["contents"] == [{"role": "user", "parts": [{"text": QUESTION}]}]
    assert request.api_key == API_KEY
    assert request.headers["x-goog-api-key"] == API_KEY


async def test_model_falls_back_to_the_requested_one_without_a_model_version() -> None:
    with FakeGoogle(answer, model_version=False) as fake:
        llm = GoogleLLM(API_KEY, model=MODEL, base_url=fake.base_url)
        try:
            completion = await llm.complete(SYSTEM, QUESTION)
        finally:
            await llm.close()

    assert completion.model == MODEL


async def test_empty_system_prompt_is_left_out(fake: FakeGoogle, make_llm: MakeLLM) -> None:
    completion = await make_llm().complete("", QUESTION)

    assert completion.text == ANSWER
    assert "systemInstruction" not in fake.requests[0].body
    assert fake.requests[0].response_mime_type == "application/json"


async def test_an_answer_without_text_raises_instead_of_returning_empty(fake: FakeGoogle, make_llm: MakeLLM) -> None:
    with pytest.raises(LLMError, match="no text in the answer") as caught:
        await make_llm(max_retries=2).complete(SYSTEM, "Something else entirely")

    assert caught.value.retryable is False
    assert len(fake.requests) == 1


async def test_server_error_is_retried_then_succeeds(fake: FakeGoogle, make_llm: MakeLLM) -> None:
    fake.fail_next(1, status=503)

    completion = await make_llm(max_retries=2).complete(SYSTEM, QUESTION)

    assert completion.text == ANSWER
    assert len(fake.requests) == 2
    assert fake.requests[0].body == fake.requests[1].body


async def test_persistent_rate_limit_raises_retryable_llm_error(fake: FakeGoogle, make_llm: MakeLLM) -> None:
    fake.fail_next(10, status=429)

    with pytest.raises(LLMError) as caught:
        await make_llm(max_retries=1).complete(SYSTEM, QUESTION)

    message = str(caught.value)
    assert message == f"google {MODEL}: HTTP 429 RESOURCE_EXHAUSTED: scripted 429"
    assert caught.value.retryable is True
    assert len(fake.requests) == 2


@pytest.mark.parametrize(("status", "name"), [(401, "UNAUTHENTICATED"), (403, "PERMISSION_DENIED")])
async def test_auth_failure_is_not_retried(fake: FakeGoogle, make_llm: MakeLLM, status: int, name: str) -> None:
    fake.fail_next(1, status=status)

    with pytest.raises(LLMError) as caught:
        await make_llm(max_retries=2).complete(SYSTEM, QUESTION)

    assert str(caught.value) == f"google {MODEL}: HTTP {status} {name}: scripted {status}"
    assert caught.value.retryable is False
    assert len(fake.requests) == 1


async def test_wrong_api_key_is_a_400_that_is_not_retried(fake: FakeGoogle, make_llm: MakeLLM) -> None:
    # The Gemini API answers a bad key with 400 INVALID_ARGUMENT (reason API_KEY_INVALID), not 401.
    with pytest.raises(LLMError, match="HTTP 400 INVALID_ARGUMENT: API key not valid") as caught:
        await make_llm(api_key="AIza-wrong", max_retries=2).complete(SYSTEM, QUESTION)

    assert caught.value.retryable is False
    assert len(fake.requests) == 1
    assert fake.requests[0].api_key == "AIza-wrong"


async def test_delay_longer_than_the_timeout_raises_llm_error(fake: FakeGoogle, make_llm: MakeLLM) -> None:
    fake.delay_next(1, seconds=5.0)
    started = time.monotonic()

    with pytest.raises(LLMError, match="timeout") as caught:
        await make_llm(timeout=0.3, max_retries=0).complete(SYSTEM, QUESTION)

    assert time.monotonic() - started < 3.0
    assert str(caught.value) == f"google {MODEL}: request timeout after 0.3s per attempt"
    assert caught.value.retryable is True
    assert len(fake.requests) == 1


async def test_a_timed_out_attempt_is_retried(fake: FakeGoogle, make_llm: MakeLLM) -> None:
    fake.delay_next(1, seconds=5.0)

    completion = await make_llm(timeout=0.3, max_retries=1).complete(SYSTEM, QUESTION)

    assert completion.text == ANSWER
    assert len(fake.requests) == 2


@pytest.mark.parametrize("key", ["", "  "])
def test_blank_api_key_is_refused_before_any_request(fake: FakeGoogle, key: str) -> None:
    with pytest.raises(LLMError, match="no API key") as caught:
        GoogleLLM(key, base_url=fake.base_url)

    assert caught.value.retryable is False
    assert fake.requests == []


async def test_base_url_is_the_api_root_without_a_version(fake: FakeGoogle, make_llm: MakeLLM) -> None:
    # The SDK appends /v1/models/...:generateContent to whatever root it is given.
    with pytest.raises(LLMError, match="HTTP 404 NOT_FOUND") as caught:
        await make_llm(base_url=f"{fake.base_url}/v1").complete(SYSTEM, QUESTION)

    assert caught.value.retryable is False
    assert [r.path for r in fake.requests] == [f"/v1/v1/models/{MODEL}:generateContent"]


async def test_unreachable_server_raises_retryable_llm_error_at_once() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago, with nothing listening on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = GoogleLLM(API_KEY, base_url=f"http://127.0.0.1:{port}", retry=RetryPolicy(max_retries=0), timeout=2.0)
    started = time.monotonic()
    try:
        with pytest.raises(LLMError, match=f"google {MODEL}: connection failed") as caught:
            await llm.complete(SYSTEM, QUESTION)
    finally:
        await llm.close()

    assert caught.value.retryable is True
    # Without retry options set, the SDK would sleep 1-10 s and reconnect once by itself.
    assert time.monotonic() - started < 1.0
