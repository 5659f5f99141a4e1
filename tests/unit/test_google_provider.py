"""GoogleLLM through the real google-genai SDK, against the fake Gemini API on loopback.

What every provider does alike is in test_llm_contract.py; here, what is Google's own.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from memstream.llm.base import LLMError
from memstream.llm.google import GoogleLLM
from tests.fakes.google_server import FakeGoogle
from tests.unit.llm_clients import GOOGLE, QUESTION, closed_port

API_KEY, MODEL, SYSTEM = GOOGLE.api_key, GOOGLE.model, GOOGLE.system
ANSWER = GOOGLE.answer
answer = GOOGLE.responder

#: The provider the fixtures `fake` and `make_llm` (tests/unit/conftest.py) serve.
PROVIDER = GOOGLE
MakeLLM = Callable[..., GoogleLLM]


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


@pytest.mark.parametrize(("status", "name"), [(401, "UNAUTHENTICATED"), (403, "PERMISSION_DENIED")])
async def test_auth_failure_is_not_retried(fake: FakeGoogle, make_llm: MakeLLM, status: int, name: str) -> None:
    fake.fail_next(1, status=status)

    with pytest.raises(LLMError) as caught:
        await make_llm(max_retries=2).complete(SYSTEM, QUESTION)

    assert str(caught.value) == f"google {MODEL}: HTTP {status} {name}: scripted {status}"
    assert caught.value.retryable is False
    assert len(fake.requests) == 1


async def test_base_url_is_the_api_root_without_a_version(fake: FakeGoogle, make_llm: MakeLLM) -> None:
    # The SDK appends /v1/models/...:generateContent to whatever root it is given.
    with pytest.raises(LLMError, match="HTTP 404 NOT_FOUND") as caught:
        await make_llm(base_url=f"{fake.base_url}/v1").complete(SYSTEM, QUESTION)

    assert caught.value.retryable is False
    assert [r.path for r in fake.requests] == [f"/v1/v1/models/{MODEL}:generateContent"]


async def test_unreachable_server_fails_at_once_without_the_sdks_own_reconnect(make_llm: MakeLLM) -> None:
    # The error itself is in test_llm_contract.py.
    llm = make_llm(base_url=GOOGLE.address_at(closed_port()), timeout=2.0)
    started = time.monotonic()

    with pytest.raises(LLMError, match=f"google {MODEL}: connection failed"):
        await llm.complete(SYSTEM, QUESTION)

    # Without retry options set, the SDK would sleep 1-10 s and reconnect once by itself.
    assert time.monotonic() - started < 1.0
