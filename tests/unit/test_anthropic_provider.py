"""AnthropicLLM through the real anthropic SDK, against the fake Messages API on loopback.

What every provider does alike is in test_llm_contract.py; here, what is Anthropic's own.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest

from memstream.llm.anthropic import AnthropicLLM
from memstream.llm.base import LLMError
from tests.fakes.anthropic_server import FakeAnthropic
from tests.unit.llm_clients import ANTHROPIC, QUESTION

API_KEY, MODEL, SYSTEM = ANTHROPIC.api_key, ANTHROPIC.model, ANTHROPIC.system

#: The provider the fixtures `fake` and `make_llm` (tests/unit/conftest.py) serve.
PROVIDER = ANTHROPIC
MakeLLM = Callable[..., AnthropicLLM]


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


async def test_base_url_is_the_api_root_without_v1(fake: FakeAnthropic, make_llm: MakeLLM) -> None:
    # The SDK appends /v1/messages to whatever root it is given.
    with pytest.raises(LLMError, match="HTTP 404"):
        await make_llm(base_url=f"{fake.base_url}/v1").complete(SYSTEM, QUESTION)

    assert [r.path for r in fake.requests] == ["/v1/v1/messages"]


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
