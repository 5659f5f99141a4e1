"""XaiLLM through the real xai-sdk, against the fake xAI Chat gRPC service on loopback.

What every provider does alike is in test_llm_contract.py; here, what is xAI's own.
"""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest
from xai_sdk.proto import chat_pb2

from memstream.llm.base import LLMError
from memstream.llm.xai import XaiLLM
from tests.fakes.xai_server import FakeXai, system_text
from tests.unit.llm_clients import QUESTION, XAI

API_KEY, MODEL, SYSTEM = XAI.api_key, XAI.model, XAI.system
answer = XAI.responder

#: The provider the fixtures `fake` and `make_llm` (tests/unit/conftest.py) serve.
PROVIDER = XAI
MakeLLM = Callable[..., XaiLLM]


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
