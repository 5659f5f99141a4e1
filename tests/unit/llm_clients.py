"""The four LLM providers as their tests drive them: each client class against its fake on loopback.

`client_factory` builds clients with fast retries and closes every one afterwards. A `Provider` names what
differs between the providers (client class, fake, the option the fake's address goes in, what the fake
counts), so `test_llm_contract.py` runs the behaviour they share against all four through their real SDKs,
and each `test_<provider>_provider.py` keeps only what is its own (wire format, error mapping).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import grpc
from xai_sdk.proto import chat_pb2

from memstream.llm.anthropic import AnthropicLLM
from memstream.llm.google import GoogleLLM
from memstream.llm.local import LocalLLM
from memstream.llm.retry import RetryPolicy
from memstream.llm.xai import XaiLLM
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.google_server import FakeGoogle
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.xai_server import FakeXai, user_text

QUESTION = "What is the capital of France?"
#: Prompts asking for a JSON array (what extraction asks of Google and local models) or a single word.
JSON_SYSTEM = "You answer geography questions as a JSON array of words."
WORD_SYSTEM = "You answer geography questions in one word."


@asynccontextmanager
async def client_factory(build: Callable[..., Any], first: str, **defaults: Any) -> AsyncIterator[Callable[..., Any]]:
    """Yields ``make(**overrides)``: ``build(<first option>, **rest)`` with ``defaults`` under the
    overrides, where ``max_retries=N`` becomes a RetryPolicy with millisecond backoff."""
    made: list[Any] = []

    def make(**overrides: Any) -> Any:
        options = {**defaults}
        retries = overrides.pop("max_retries", 0)
        options.update({"retry": RetryPolicy(max_retries=retries, base_delay=0.01), **overrides})
        client = build(options.pop(first), **options)
        made.append(client)
        return client

    try:
        yield make
    finally:
        for client in made:
            await client.close()


def closed_port() -> int:
    """A port that was free a moment ago, with nothing listening on it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@dataclass(frozen=True)
class Provider:
    """One provider: its client, its fake, and what the fake answers ``QUESTION`` with."""

    #: ``Completion.provider``, and the first word of every error message.
    name: str
    llm: Callable[..., Any]
    #: The client's positional option: ``api_key``, or ``base_url`` for a local server.
    first: str
    fake: Callable[..., Any]
    #: The client option that takes the fake's address, also the fake's property that gives it.
    address: str
    #: The address of a server at ``port`` in the form ``address`` takes.
    address_at: Callable[[int], str]
    #: The API key the fake accepts; "" for a local server, which needs none.
    api_key: str
    model: str
    #: What the fake says answered, unlike ``model``: proof the Completion's model comes from the response.
    served_model: str
    system: str
    answer: str
    #: Given what the SDK sent, the text the fake answers.
    responder: Callable[[Any], str]
    #: The fake's token count for ``system`` and ``QUESTION``: it counts words.
    input_tokens: int
    #: ``fail_next`` arguments (status or gRPC code) of failures one retry gets past.
    transient: tuple[Any, ...]
    #: The ``fail_next`` argument of a rate limit, and how its error reads.
    rate_limit: Any
    rate_limited: str
    #: How the error for a wrong API key reads (keyed providers).
    wrong_key: str
    #: What a recorded request carried, to compare a retry with its first attempt.
    sent: Callable[[Any], object]
    #: How an unreachable server's error reads after ``"<name> <model>: "``.
    unreachable: str

    def serve(self) -> Any:
        """The fake, unstarted (a context manager), accepting ``api_key`` and naming ``served_model``."""
        keyed = {"api_key": self.api_key} if self.api_key else {}
        return self.fake(self.responder, served_model=self.served_model, **keyed)

    def clients(self, fake: Any) -> AbstractAsyncContextManager[Callable[..., Any]]:
        """A :func:`client_factory` of clients pointed at ``fake``."""
        keyed = {"api_key": self.api_key} if self.api_key else {}
        return client_factory(
            self.llm, self.first, model=self.model, **{self.address: getattr(fake, self.address)}, **keyed
        )


def _paris(question: str, answer: str, otherwise: str) -> str:
    return answer if "capital of France" in question else otherwise


ANTHROPIC = Provider(
    name="anthropic",
    llm=AnthropicLLM,
    first="api_key",
    fake=FakeAnthropic,
    address="base_url",
    address_at=lambda port: f"http://127.0.0.1:{port}",
    api_key="sk-ant-test-0000",
    model="claude-haiku-4-5",
    served_model="claude-haiku-4-5-20251001",  # what the real API answers the alias with
    system=WORD_SYSTEM,
    answer="Paris",
    responder=lambda body: _paris(body["messages"][-1]["content"], "Paris", "unknown"),
    input_tokens=7 + 6,
    transient=(500, 529),  # no retry-after: the SDK's own backoff (~0.4-0.5 s) is used
    rate_limit=429,
    rate_limited="HTTP 429 rate_limit_error: scripted 429",
    wrong_key="HTTP 401 authentication_error: invalid x-api-key",
    sent=lambda recorded: recorded.body,
    unreachable="connection failed",
)

GOOGLE = Provider(
    name="google",
    llm=GoogleLLM,
    first="api_key",
    fake=FakeGoogle,
    address="base_url",
    address_at=lambda port: f"http://127.0.0.1:{port}",
    api_key="AIza-test-0000",
    model="gemini-3-flash-preview",
    served_model="gemini-3-flash-preview-09-2025",  # the version the API reports as having answered
    system=JSON_SYSTEM,
    answer='["Paris"]',
    responder=lambda body: _paris(body["contents"][-1]["parts"][0]["text"], '["Paris"]', ""),
    input_tokens=6 + 10,
    transient=(503,),
    rate_limit=429,
    rate_limited="HTTP 429 RESOURCE_EXHAUSTED: scripted 429",
    # The Gemini API answers a bad key with 400 INVALID_ARGUMENT (reason API_KEY_INVALID), not 401.
    wrong_key="HTTP 400 INVALID_ARGUMENT: API key not valid",
    sent=lambda recorded: recorded.body,
    unreachable="connection failed",
)

LOCAL = Provider(
    name="local",
    llm=LocalLLM,
    first="base_url",
    fake=FakeOpenAI,
    address="base_url",
    address_at=lambda port: f"http://127.0.0.1:{port}/v1",
    api_key="",
    model="qwen3:4b",
    served_model="qwen3:4b-q4_K_M",
    system=JSON_SYSTEM,
    answer='["Paris"]',
    responder=lambda body: _paris(body["messages"][-1]["content"], '["Paris"]', ""),
    input_tokens=10 + 6,
    transient=(503,),
    rate_limit=429,
    rate_limited="HTTP 429 requests: scripted 429",
    wrong_key="HTTP 401 invalid_request_error: Incorrect API key",  # when the server wants a key
    sent=lambda recorded: recorded.body,
    unreachable="connection failed",
)


def _xai_answer(request: chat_pb2.GetCompletionsRequest) -> str:
    return _paris(user_text(request), "Paris", "unknown")


XAI = Provider(
    name="xai",
    llm=XaiLLM,
    first="api_key",
    fake=FakeXai,
    address="api_host",
    address_at=lambda port: f"127.0.0.1:{port}",
    api_key="xai-test-0000",
    model="grok-4-1-fast-non-reasoning",
    served_model="grok-4-1-fast-non-reasoning-0925",  # a concrete name instead of the requested one
    system=WORD_SYSTEM,
    answer="Paris",
    responder=_xai_answer,
    input_tokens=7 + 6,
    transient=(grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.ABORTED),
    rate_limit=grpc.StatusCode.RESOURCE_EXHAUSTED,
    rate_limited="gRPC RESOURCE_EXHAUSTED scripted RESOURCE_EXHAUSTED",
    wrong_key="gRPC UNAUTHENTICATED incorrect API key provided",
    sent=lambda recorded: recorded.request,
    unreachable="gRPC UNAVAILABLE",
)

PROVIDERS = (ANTHROPIC, GOOGLE, LOCAL, XAI)
