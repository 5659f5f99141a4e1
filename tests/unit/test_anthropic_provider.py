"""AnthropicLLM through the real anthropic SDK, against the fake Messages API on loopback."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from memstream.llm.anthropic import AnthropicLLM
from memstream.llm.base import LLMError
from memstream.llm.retry import RetryPolicy
from tests.fakes.anthropic_server import FakeAnthropic
from tests.unit.llm_clients import client_factory

API_KEY = "sk-ant-test-0000"
MODEL = "claude-haiku-4-5"
# What the real API answers an alias with: proof the Completion's model comes from the response.
SERVED_MODEL = "claude-haiku-4-5-20251001"
SYSTEM = "You answer geography questions in one word."
QUESTION = "What is the capital of France?"

MakeLLM = Callable[..., AnthropicLLM]


def answer(request_json: dict[str, Any]) -> str:
    prompt = request_json["messages"][-1]["content"]
    return "Paris" if "capital of France" in prompt else "unknown"


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(answer, api_key=API_KEY, served_model=SERVED_MODEL) as server:
        yield server


@pytest.fixture
async def make_llm(fake: FakeAnthropic) -> AsyncIterator[MakeLLM]:
    """Builds clients pointed at the fake (overrides by keyword) and closes them all after the test."""
    async with client_factory(AnthropicLLM, "api_key", api_key=API_KEY, model=MODEL, base_url=fake.base_url) as make:
        yield make


async def test_completion_returns_text_model_and_token_counts(make_llm: MakeLLM) -> None:
    completion = await make_llm().complete(SYSTEM, QUESTION)

    assert completion.text == "Paris"
    assert completion.provider == "anthropic"
    assert completion.model == SERVED_MODEL
    assert completion.input_tokens == 7 + 6  # the fake counts words: system, then prompt
    assert completion.output_tokens == 1


async def test_system_prompt_and_user_message_arrive_as_sent(fake: FakeAnthropic, make_llm: MakeLLM) -> None:
    await make_llm().complete(SYSTEM, QUESTION, max_tokens=77)

    [request] = fake.requests
    assert request.body["system"] == SYSTEM
    assert request.body["messages"] == [{"role": "user", "content": QUESTION}]
    assert request.body["model"] == MODEL
    assert request.body["max_tokens"] == 77
    assert request.api_key == API_KEY
    assert request.headers["anthropic-version"]


async def test_empty_system_prompt_is_left_out(fake: FakeAnthropic, make_llm: MakeLLM) -> None:
    completion = await make_llm().complete("", QUESTION)

    assert completion.text == "Paris"
    assert "system" not in fake.requests[0].body


@pytest.mark.parametrize("status", [500, 529])
async def test_server_error_is_retried_then_succeeds(fake: FakeAnthropic, make_llm: MakeLLM, status: int) -> None:
    fake.fail_next(1, status=status)  # no retry-after: the SDK's own backoff (~0.4-0.5 s) is used

    completion = await make_llm(max_retries=2).complete(SYSTEM, QUESTION)

    assert completion.text == "Paris"
    assert len(fake.requests) == 2
    assert fake.requests[0].body == fake.requests[1].body


async def test_persistent_rate_limit_raises_llm_error_naming_the_status(fake: FakeAnthropic, make_llm: MakeLLM) -> None:
    fake.fail_next(10, status=429, retry_after=0.01)

    with pytest.raises(LLMError) as caught:
        await make_llm(max_retries=1).complete(SYSTEM, QUESTION)

    message = str(caught.value)
    assert "HTTP 429" in message
    assert "rate_limit_error: scripted 429" in message
    assert f"anthropic {MODEL}" in message
    assert "\n" not in message
    assert len(fake.requests) == 2


async def test_delay_longer_than_the_timeout_raises_llm_error(fake: FakeAnthropic, make_llm: MakeLLM) -> None:
    fake.delay_next(1, seconds=5.0)
    started = time.monotonic()

    with pytest.raises(LLMError, match="timeout") as caught:
        await make_llm(timeout=0.3, max_retries=0).complete(SYSTEM, QUESTION)

    assert time.monotonic() - started < 3.0
    assert f"anthropic {MODEL}" in str(caught.value)
    assert len(fake.requests) == 1


async def test_a_timed_out_attempt_is_retried(fake: FakeAnthropic, make_llm: MakeLLM) -> None:
    fake.delay_next(1, seconds=5.0)

    completion = await make_llm(timeout=0.3, max_retries=1).complete(SYSTEM, QUESTION)

    assert completion.text == "Paris"
    assert len(fake.requests) == 2


async def test_wrong_api_key_is_rejected_with_401(fake: FakeAnthropic, make_llm: MakeLLM) -> None:
    with pytest.raises(LLMError, match="HTTP 401") as caught:
        await make_llm(api_key="sk-ant-wrong", max_retries=2).complete(SYSTEM, QUESTION)

    assert "authentication_error" in str(caught.value)
    assert len(fake.requests) == 1  # a 401 is not retried
    assert fake.requests[0].api_key == "sk-ant-wrong"


@pytest.mark.parametrize("key", ["", "  "])
def test_blank_api_key_is_refused_before_any_request(fake: FakeAnthropic, key: str) -> None:
    with pytest.raises(LLMError, match="no API key"):
        AnthropicLLM(key, base_url=fake.base_url)

    assert fake.requests == []


async def test_base_url_is_the_api_root_without_v1(fake: FakeAnthropic, make_llm: MakeLLM) -> None:
    # The SDK appends /v1/messages to whatever root it is given.
    with pytest.raises(LLMError, match="HTTP 404"):
        await make_llm(base_url=f"{fake.base_url}/v1").complete(SYSTEM, QUESTION)

    assert [r.path for r in fake.requests] == ["/v1/v1/messages"]


async def test_unreachable_server_raises_llm_error() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago, with nothing listening on it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    llm = AnthropicLLM(API_KEY, base_url=f"http://127.0.0.1:{port}", retry=RetryPolicy(max_retries=0), timeout=2.0)
    try:
        with pytest.raises(LLMError, match="connection failed"):
            await llm.complete(SYSTEM, QUESTION)
    finally:
        await llm.close()


def _post_without(fake: FakeAnthropic, header: str) -> urllib.error.HTTPError:
    """POSTs a valid body with a plain sync client, leaving out one required header."""
    headers = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
    del headers[header]
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    request = urllib.request.Request(
        f"{fake.base_url}/v1/messages", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    return caught.value


@pytest.mark.parametrize(
    ("header", "status", "error"),
    [
        ("x-api-key", 401, {"type": "authentication_error", "message": "x-api-key header is required"}),
        (
            "anthropic-version",
            400,
            {"type": "invalid_request_error", "message": "anthropic-version: header is required"},
        ),
    ],
)
def test_fake_rejects_a_missing_header_with_the_error_envelope(
    fake: FakeAnthropic, header: str, status: int, error: dict[str, str]
) -> None:
    rejection = _post_without(fake, header)

    assert rejection.code == status
    assert json.loads(rejection.read()) == {"type": "error", "error": error}
