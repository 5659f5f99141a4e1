"""A fake xAI Chat API on loopback, speaking the real gRPC protocol so tests exercise the real xai-sdk.

    with FakeXai(lambda request: "Paris", api_key="xai-test") as fake:
        llm = XaiLLM("xai-test", api_host=fake.api_host)

It is a sync `grpc.server` on a thread pool, built from the SDK's own generated `ChatServicer` (the proto
version the SDK itself imports), so an async test's loop is never blocked and no second grpc.aio loop runs in
the process. Only `xai_api.Chat/GetCompletion` (what `chat.sample()` calls) is implemented; the servicer's
other methods answer UNIMPLEMENTED, as the generated base class does. The SDK calls nothing at start-up.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass

import grpc
from xai_sdk.proto import chat_pb2, chat_pb2_grpc, sample_pb2, usage_pb2

from tests.fakes.loopback import Delay, ScriptedFake, word_count

# Given the request proto (model, messages, max_tokens), returns the assistant's text.
Responder = Callable[[chat_pb2.GetCompletionsRequest], str]

# Handler threads: enough for a test's concurrent calls plus a few held by scripted delays.
_WORKERS = 8
# Seconds in-flight handlers get to finish when the fake stops; delayed ones are woken at once anyway.
_SHUTDOWN_GRACE_S = 1.0
# How often a delayed handler looks whether its client hung up or the fake is stopping.
_DELAY_POLL_S = 0.02


def _text_of(message: chat_pb2.Message) -> str:
    # Content is a list of parts; only text parts count.
    return " ".join(part.text for part in message.content if part.HasField("text"))


def _texts_with_role(request: chat_pb2.GetCompletionsRequest, role: int) -> list[str]:
    return [_text_of(m) for m in request.messages if m.role == role]


def system_text(request: chat_pb2.GetCompletionsRequest) -> str:
    """The system messages' text, joined by newlines ("" when there is none)."""
    return "\n".join(_texts_with_role(request, chat_pb2.MessageRole.ROLE_SYSTEM))


def user_text(request: chat_pb2.GetCompletionsRequest) -> str:
    """The last user message's text ("" when there is none)."""
    users = _texts_with_role(request, chat_pb2.MessageRole.ROLE_USER)
    return users[-1] if users else ""


def echo(request: chat_pb2.GetCompletionsRequest) -> str:
    """The default responder: answers with the last user message."""
    return user_text(request)


@dataclass(frozen=True)
class RecordedRequest:
    metadata: dict[str, str]  # the call's invocation metadata, keys lower-cased (gRPC sends them so)
    request: chat_pb2.GetCompletionsRequest
    method: str = "/xai_api.Chat/GetCompletion"

    @property
    def api_key(self) -> str | None:
        key = self.metadata.get("authorization", "").removeprefix("Bearer ").strip()
        return key or None

    @property
    def system(self) -> str:
        return system_text(self.request)

    @property
    def user_text(self) -> str:
        return user_text(self.request)


@dataclass(frozen=True)
class _Fail:
    code: grpc.StatusCode


class FakeXai(ScriptedFake[RecordedRequest, _Fail], chat_pb2_grpc.ChatServicer):
    """`requests` holds every GetCompletion call received, rejected ones included, oldest first."""

    def __init__(
        self, responder: Responder = echo, *, api_key: str | None = None, served_model: str | None = None
    ) -> None:
        """`api_key` set: only that key is accepted; unset: any non-empty key is. A wrong or missing key is
        answered UNAUTHENTICATED.

        `served_model` set: responses name it instead of the requested model, as the real API answers an
        alias with a concrete model name; `""` leaves the response's model empty.
        """
        super().__init__()
        self._responder = responder
        self._api_key = api_key
        self._served_model = served_model
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._server: grpc.Server | None = None
        self._port: int | None = None

    # --- what tests use ---

    @property
    def api_host(self) -> str:
        """`127.0.0.1:<port>`, what the SDK takes as `api_host` (no scheme)."""
        if self._port is None:
            raise RuntimeError("FakeXai is not started")
        return f"127.0.0.1:{self._port}"

    def fail_next(self, n: int, code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE) -> None:
        """Answer the next `n` valid requests with status `code`."""
        self._push(_Fail(code), n)

    # --- lifecycle ---

    def start(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="fake-xai"))
        chat_pb2_grpc.add_ChatServicer_to_server(self, server)
        port = server.add_insecure_port("127.0.0.1:0")
        if port == 0:
            raise RuntimeError("FakeXai could not bind a loopback port")
        server.start()
        self._server, self._port = server, port

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()  # wakes delayed handlers so the grace period is not spent waiting on them
        self._server.stop(_SHUTDOWN_GRACE_S).wait()
        self._server = None

    # --- the API ---

    def GetCompletion(
        self, request: chat_pb2.GetCompletionsRequest, context: grpc.ServicerContext
    ) -> chat_pb2.GetChatCompletionResponse:
        metadata = {key.lower(): value for key, value in context.invocation_metadata() if isinstance(value, str)}
        recorded = RecordedRequest(metadata, request)
        self._record(recorded)

        # A rejected request does not use up a scripted failure or delay.
        if recorded.api_key is None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "no API key in the authorization metadata")
        if self._api_key is not None and recorded.api_key != self._api_key:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "incorrect API key provided")
        if not request.model:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "model is required")
        if not request.messages:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "at least one message is required")

        action = self._next_action()
        if isinstance(action, _Fail):
            context.abort(action.code, f"scripted {action.code.name}")
        if isinstance(action, Delay):
            self._sleep(action.seconds, context)

        try:
            text = self._responder(request)
        except Exception as err:
            context.abort(grpc.StatusCode.INTERNAL, f"responder failed: {err!r}")
        prompt_tokens = sum(word_count(_text_of(m)) for m in request.messages)
        completion_tokens = word_count(text)
        return chat_pb2.GetChatCompletionResponse(
            id=f"fake-{next(self._ids):06d}",
            model=request.model if self._served_model is None else self._served_model,
            outputs=[
                chat_pb2.CompletionOutput(
                    index=0,
                    finish_reason=sample_pb2.FinishReason.REASON_STOP,
                    message=chat_pb2.CompletionMessage(content=text, role=chat_pb2.MessageRole.ROLE_ASSISTANT),
                )
            ],
            usage=usage_pb2.SamplingUsage(
                prompt_tokens=prompt_tokens,
                prompt_text_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                total_tokens=prompt_tokens + completion_tokens,
            ),
            system_fingerprint="fake-xai",
        )

    def _sleep(self, seconds: float, context: grpc.ServicerContext) -> None:
        # Ends early when the client hung up (its deadline passed) or the fake stops, so teardown is never held.
        deadline = time.monotonic() + seconds
        while context.is_active() and not self._stopping.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._stopping.wait(min(_DELAY_POLL_S, remaining))
