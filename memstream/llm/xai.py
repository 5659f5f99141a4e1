"""Grok through xAI's gRPC Chat API (the `xai-sdk`), behind the LLM interface.

`chat.sample()` is one unary call, `xai_api.Chat/GetCompletion`. The SDK's channel retries UNAVAILABLE up to
5 attempts through a gRPC service config; that is switched off here so the shared RetryPolicy is the only
retry loop, and every failure becomes an LLMError naming provider, model and gRPC status.
"""

from __future__ import annotations

import json
import os
from typing import Any

import grpc
import xai_sdk
from xai_sdk.chat import system as system_message
from xai_sdk.chat import user as user_message

from memstream.llm.base import Completion, JsonSchema, LLMError
from memstream.llm.retry import RetryPolicy, with_retries

# A fast, low-cost model without a reasoning phase: memory extraction is short prompts with structured answers.
DEFAULT_MODEL = "grok-4-1-fast-non-reasoning"
# Seconds one attempt may take; the SDK sends it as the gRPC deadline of every call.
DEFAULT_TIMEOUT_S = 45.0
# How much of a server's error details goes into an LLMError: enough to see the cause, not a page.
_DETAILS_EXCERPT_CHARS = 200
# Hosts reached over plaintext gRPC (a local fake or proxy); anywhere else gets TLS, as the key travels in metadata.
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})

# Statuses a later attempt may get past: overload, rate limit, deadline, transient server faults.
_RETRYABLE = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.ABORTED,
    }
)

# Replace the SDK's defaults of the same name: no gRPC-level retries (UNAVAILABLE x5 by default).
_CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.enable_retries", 0),
    ("grpc.service_config", json.dumps({"methodConfig": [{"name": [{}]}]})),
]


class XaiLLM:
    provider: str = "xai"

    def __init__(
        self,
        api_key: str,
        *,
        model: str = DEFAULT_MODEL,
        api_host: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        """Raises LLMError at once when `api_key` is blank (the SDK would fall back to XAI_API_KEY).

        `api_host` is `host:port` without a scheme; unset or empty means the SDK's `api.x.ai` over TLS. A
        loopback host (127.0.0.1, localhost, [::1]) is reached over plaintext gRPC, for fakes and local proxies.
        """
        if not api_key.strip():
            raise LLMError(f"{self.provider} {model}: no API key configured", retryable=False)
        self.model = model
        self._timeout = timeout
        self._retry = retry
        options: dict[str, Any] = {}
        if api_host:
            options["api_host"] = api_host
            options["use_insecure_channel"] = _is_loopback(api_host)
        # xai-sdk puts prompt and completion text on its spans unless this is set, and reads
        # it only from the environment: conversation text must never reach a trace.
        os.environ.setdefault("XAI_SDK_DISABLE_SENSITIVE_TELEMETRY_ATTRIBUTES", "1")
        self._client = xai_sdk.AsyncClient(
            api_key=api_key, timeout=timeout, channel_options=list(_CHANNEL_OPTIONS), **options
        )

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        # `schema` is not sent: a hosted model follows the answer shape its prompt states.
        return await with_retries(
            lambda: self._attempt(system, prompt, max_tokens), self._retry, what=f"{self.provider} {self.model}"
        )

    async def close(self) -> None:
        await self._client.close()

    async def _attempt(self, system: str, prompt: str, max_tokens: int) -> Completion:
        # An empty system prompt is left out rather than sent as an empty message.
        messages = [system_message(system)] if system else []
        messages.append(user_message(prompt))
        chat = self._client.chat.create(model=self.model, messages=messages, max_tokens=max_tokens)
        try:
            response = await chat.sample()
        except grpc.aio.AioRpcError as err:
            raise self._error(err) from err
        usage = response.usage
        return Completion(
            text=response.content,
            provider=self.provider,
            model=response.proto.model or self.model,
            input_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
        )

    def _error(self, err: grpc.aio.AioRpcError) -> LLMError:
        """One log line: who failed, and why, in the terms the API used."""
        code = err.code()
        where = f"{self.provider} {self.model}"
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            message = f"{where}: request timeout after {self._timeout:g}s per attempt (gRPC DEADLINE_EXCEEDED)"
        else:
            details = (err.details() or "")[:_DETAILS_EXCERPT_CHARS]
            message = f"{where}: gRPC {code.name} {details}"
        return LLMError(" ".join(message.split()), retryable=code in _RETRYABLE)


def _is_loopback(api_host: str) -> bool:
    host = api_host.rsplit(":", 1)[0] if api_host.count(":") == 1 or api_host.startswith("[") else api_host
    return host in _LOOPBACK_HOSTS
