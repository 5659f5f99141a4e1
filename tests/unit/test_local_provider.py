"""LocalLLM over real HTTP, against the fake OpenAI-compatible chat-completions API on loopback."""

from __future__ import annotations

import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from memstream.llm.base import LLMError
from memstream.llm.local import LocalLLM
from memstream.llm.retry import RetryPolicy
from tests.fakes.openai_server import FakeOpenAI
from tests.unit.llm_clients import client_factory

MODEL = "qwen3:4b"
# What the server reports as the model that answered: proof the Completion's model comes from the response.
SERVED_MODEL = "qwen3:4b-q4_K_M"
SYSTEM = "You answer geography questions as a JSON array of words."
QUESTION = "What is the capital of France?"
ANSWER = '["Paris"]'

MakeLLM = Callable[..., LocalLLM]


def answer(request_json: dict[str, Any]) -> str:
    prompt = request_json["messages"][-1]["content"]
    return ANSWER if "capital of France" in prompt else ""


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(answer, served_model=SERVED_MODEL) as server:
        yield server


@pytest.fixture
async def make_llm(fake: FakeOpenAI) -> AsyncIterator[MakeLLM]:
    """Builds clients pointed at the fake (overrides by keyword) and closes them all after the test."""
    async with client_factory(LocalLLM, "base_url", base_url=fake.base_url, model=MODEL) as make:
        yield make


async def test_completion_returns_text_model_and_token_counts(make_llm: MakeLLM) -> None:
    completion = await make_llm().complete(SYSTEM, QUESTION)

    assert completion.text == ANSWER
    assert completion.provider == "local"
    assert completion.model == SERVED_MODEL
    assert completion.input_tokens == 10 + 6  # the fake counts words: system, then prompt
    assert completion.output_tokens == 1


async def test_request_is_a_plain_chat_completion(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    await make_llm().complete(SYSTEM, QUESTION, max_tokens=77)

    [request] = fake.requests
    assert request.path == "/v1/chat/completions"
    assert request.body == {
        "model": MODEL,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        "max_tokens": 77,
        "stream": False,
    }  # no response_format: json_object would forbid the JSON arrays our prompts ask for
    assert "authorization" not in request.headers


async def test_api_key_is_sent_as_a_bearer_token() -> None:
    with FakeOpenAI(answer, api_key="sk-local") as fake:
        llm = LocalLLM(fake.base_url, api_key="sk-local")
        try:
            completion = await llm.complete(SYSTEM, QUESTION)
        finally:
            await llm.close()

    assert completion.text == ANSWER
    assert fake.requests[0].headers["authorization"] == "Bearer sk-local"


async def test_empty_system_prompt_is_left_out(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    await make_llm().complete("", QUESTION)

    assert fake.requests[0].body["messages"] == [{"role": "user", "content": QUESTION}]


async def test_missing_usage_counts_as_zero_tokens() -> None:
    with FakeOpenAI(answer, usage=False) as fake:
        llm = LocalLLM(fake.base_url, model=MODEL)
        try:
            completion = await llm.complete(SYSTEM, QUESTION)
        finally:
            await llm.close()

    assert completion.text == ANSWER
    assert completion.model == MODEL
    assert (completion.input_tokens, completion.output_tokens) == (0, 0)


async def test_trailing_slash_on_base_url_is_ignored(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    completion = await make_llm(base_url=f"{fake.base_url}/").complete(SYSTEM, QUESTION)

    assert completion.text == ANSWER
    assert [r.path for r in fake.requests] == ["/v1/chat/completions"]


async def test_an_answer_without_text_raises_instead_of_returning_empty(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    with pytest.raises(LLMError, match="no text in the answer") as caught:
        await make_llm(max_retries=2).complete(SYSTEM, "Something else entirely")

    assert caught.value.retryable is False
    assert len(fake.requests) == 1


async def test_server_error_is_retried_then_succeeds(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    fake.fail_next(1, status=503)

    completion = await make_llm(max_retries=2).complete(SYSTEM, QUESTION)

    assert completion.text == ANSWER
    assert len(fake.requests) == 2
    assert fake.requests[0].body == fake.requests[1].body


async def test_persistent_rate_limit_raises_retryable_llm_error(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    fake.fail_next(10, status=429)

    with pytest.raises(LLMError) as caught:
        await make_llm(max_retries=1).complete(SYSTEM, QUESTION)

    assert str(caught.value) == f"local {MODEL}: HTTP 429 requests: scripted 429"
    assert caught.value.retryable is True
    assert len(fake.requests) == 2


@pytest.mark.parametrize("status", [401, 403])
async def test_auth_failure_is_not_retried(fake: FakeOpenAI, make_llm: MakeLLM, status: int) -> None:
    fake.fail_next(1, status=status)

    with pytest.raises(LLMError) as caught:
        await make_llm(max_retries=2).complete(SYSTEM, QUESTION)

    assert str(caught.value) == f"local {MODEL}: HTTP {status} invalid_request_error: scripted {status}"
    assert caught.value.retryable is False
    assert len(fake.requests) == 1


async def test_wrong_api_key_is_rejected_with_401() -> None:
    with FakeOpenAI(answer, api_key="sk-local") as fake:
        llm = LocalLLM(fake.base_url, model=MODEL, api_key="sk-wrong", retry=RetryPolicy(max_retries=2))
        try:
            with pytest.raises(LLMError, match="HTTP 401 invalid_request_error: Incorrect API key") as caught:
                await llm.complete(SYSTEM, QUESTION)
        finally:
            await llm.close()

    assert caught.value.retryable is False
    assert len(fake.requests) == 1
    assert fake.requests[0].api_key == "sk-wrong"


async def test_delay_longer_than_the_timeout_raises_llm_error(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    fake.delay_next(1, seconds=5.0)
    started = time.monotonic()

    with pytest.raises(LLMError, match="timeout") as caught:
        await make_llm(timeout=0.3, max_retries=0).complete(SYSTEM, QUESTION)

    assert time.monotonic() - started < 3.0
    assert str(caught.value) == f"local {MODEL}: request timeout after 0.3s per attempt"
    assert caught.value.retryable is True
    assert len(fake.requests) == 1


async def test_a_timed_out_attempt_is_retried(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    fake.delay_next(1, seconds=5.0)

    completion = await make_llm(timeout=0.3, max_retries=1).complete(SYSTEM, QUESTION)

    assert completion.text == ANSWER
    assert len(fake.requests) == 2


async def test_unknown_path_is_a_404_that_is_not_retried(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    # base_url must include /v1, as Ollama's OpenAI-compatible root does.
    root = fake.base_url.removesuffix("/v1")

    with pytest.raises(LLMError, match="HTTP 404 invalid_request_error") as caught:
        await make_llm(base_url=root, max_retries=2).complete(SYSTEM, QUESTION)

    assert caught.value.retryable is False
    assert [r.path for r in fake.requests] == ["/chat/completions"]


async def test_unreachable_server_raises_retryable_llm_error() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago, with nothing listening on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = LocalLLM(f"http://127.0.0.1:{port}/v1", model=MODEL, retry=RetryPolicy(max_retries=0), timeout=2.0)
    try:
        with pytest.raises(LLMError, match=f"local {MODEL}: connection failed") as caught:
            await llm.complete(SYSTEM, QUESTION)
    finally:
        await llm.close()

    assert caught.value.retryable is True


async def test_close_is_safe_before_any_request_and_twice() -> None:
    llm = LocalLLM("http://127.0.0.1:9/v1")

    await llm.close()
    await llm.close()
