"""LocalLLM over real HTTP, against the fake OpenAI-compatible chat-completions API on loopback.

What every provider does alike is in test_llm_contract.py; here, what is the local client's own.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memstream.llm.base import LLMError
from memstream.llm.local import LocalLLM
from memstream.llm.retry import RetryPolicy
from tests.fakes.openai_server import FakeOpenAI
from tests.unit.llm_clients import LOCAL, QUESTION

MODEL, SYSTEM, ANSWER = LOCAL.model, LOCAL.system, LOCAL.answer
answer = LOCAL.responder

#: The provider the fixtures `fake` and `make_llm` (tests/unit/conftest.py) serve.
PROVIDER = LOCAL
MakeLLM = Callable[..., LocalLLM]


async def test_request_is_a_streamed_chat_completion_without_a_format(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    await make_llm().complete(SYSTEM, QUESTION, max_tokens=77)

    [request] = fake.requests
    assert request.path == "/v1/chat/completions"
    assert request.body == {
        "model": MODEL,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        "max_tokens": 77,
        "stream": True,
        "stream_options": {"include_usage": True},
    }  # no schema given, so no response_format: json_object would forbid the JSON arrays some prompts ask for
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
    # No prompt count without usage; the tokens written are the streamed chunks.
    assert (completion.input_tokens, completion.output_tokens) == (0, 1)


async def test_trailing_slash_on_base_url_is_ignored(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    completion = await make_llm(base_url=f"{fake.base_url}/").complete(SYSTEM, QUESTION)

    assert completion.text == ANSWER
    assert [r.path for r in fake.requests] == ["/v1/chat/completions"]


async def test_an_answer_without_text_raises_instead_of_returning_empty(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    with pytest.raises(LLMError, match="no text in the answer") as caught:
        await make_llm(max_retries=2).complete(SYSTEM, "Something else entirely")

    assert caught.value.retryable is False
    assert len(fake.requests) == 1


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
            with pytest.raises(LLMError, match=f"^local {MODEL}: {LOCAL.wrong_key}") as caught:
                await llm.complete(SYSTEM, QUESTION)
        finally:
            await llm.close()

    assert caught.value.retryable is False
    assert len(fake.requests) == 1
    assert fake.requests[0].api_key == "sk-wrong"


async def test_unknown_path_is_a_404_that_is_not_retried(fake: FakeOpenAI, make_llm: MakeLLM) -> None:
    # base_url must include /v1, as Ollama's OpenAI-compatible root does.
    root = fake.base_url.removesuffix("/v1")

    with pytest.raises(LLMError, match="HTTP 404 invalid_request_error") as caught:
        await make_llm(base_url=root, max_retries=2).complete(SYSTEM, QUESTION)

    assert caught.value.retryable is False
    assert [r.path for r in fake.requests] == ["/chat/completions"]


async def test_close_is_safe_before_any_request_and_twice() -> None:
    llm = LocalLLM("http://127.0.0.1:9/v1")

    await llm.close()
    await llm.close()
