"""Gemini through the Gemini API (google-genai SDK), behind the LLM interface.

Answers are requested as native JSON (`responseMimeType: application/json`), so the model returns bare JSON
rather than JSON wrapped in prose or a code fence. The SDK's own retries are off; `with_retries` retries 429s,
5xx, timeouts and dropped connections under the shared RetryPolicy. Whatever still fails becomes an LLMError
naming provider, model and cause — never an empty completion.
"""

from __future__ import annotations

import math

import aiohttp
import httpx
from google import genai
from google.genai import errors, types

from memstream.llm.base import Completion, JsonSchema, LLMError, connection_cause, one_line
from memstream.llm.retry import RetryPolicy, with_retries

# A fast, low-cost model: memory extraction is short prompts with structured answers.
DEFAULT_MODEL = "gemini-3-flash-preview"
# Seconds one HTTP attempt may take (connect, send, wait for the whole answer) before it is given up.
DEFAULT_TIMEOUT_S = 45.0
# The answer format requested: the model replies with a JSON document and nothing else.
JSON_MIME_TYPE = "application/json"
# HTTP statuses worth retrying besides 5xx: request timeout and rate limit.
_RETRYABLE_4XX = frozenset({408, 429})
# What the SDK raises for a failed call: the API's answer, or the transport (aiohttp, or httpx without it).
_SDK_FAILURES = (
    errors.APIError,
    errors.UnknownApiResponseError,
    TimeoutError,
    aiohttp.ClientError,
    httpx.TransportError,
    ConnectionError,
)
# How much of an unrecognised error body goes into an LLMError: enough to see the cause, not a page.
_BODY_EXCERPT_CHARS = 200


class GoogleLLM:
    provider: str = "google"

    def __init__(
        self,
        api_key: str,
        *,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        """Raises LLMError at once when `api_key` is blank (the SDK would otherwise look in the environment).

        `base_url` is the API root without a version (e.g. `http://127.0.0.1:8080`): the SDK appends
        `/{api_version}/models/{model}:generateContent` itself.
        """
        if not api_key.strip():
            raise LLMError(f"{self.provider} {model}: no API key configured", retryable=False)
        self.model = model
        self._timeout = timeout
        self._retry = retry
        http_options = types.HttpOptions(
            # An empty base_url (an unset setting) must mean "the SDK's default", not a relative URL.
            base_url=base_url or None,
            # The SDK takes whole milliseconds; 0 would mean "no timeout", so at least 1.
            timeout=max(1, math.ceil(timeout * 1000)),
            # One attempt. Leaving retry_options unset is not "off": with aiohttp installed the SDK then retries
            # a failed connection once by itself, after sleeping 1-10 s.
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        self._client = genai.Client(api_key=api_key, http_options=http_options)

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        # `schema` is not sent: a hosted model follows the answer shape its prompt states.
        config = types.GenerateContentConfig(
            # An empty system prompt is left out rather than sent as an empty instruction.
            system_instruction=system or None,
            max_output_tokens=max_tokens,
            response_mime_type=JSON_MIME_TYPE,
        )

        async def attempt() -> types.GenerateContentResponse:
            try:
                return await self._client.aio.models.generate_content(model=self.model, contents=prompt, config=config)
            except _SDK_FAILURES as err:
                raise self._as_llm_error(err) from err

        response = await with_retries(attempt, self._retry, what=f"{self.provider} {self.model} generateContent")
        text = response.text
        if not text:
            raise LLMError(f"{self._where}: no text in the answer ({_why_empty(response)})", retryable=False)
        usage = response.usage_metadata
        return Completion(
            text=text,
            provider=self.provider,
            model=response.model_version or self.model,
            input_tokens=(usage.prompt_token_count or 0) if usage else 0,
            output_tokens=(usage.candidates_token_count or 0) if usage else 0,
        )

    async def close(self) -> None:
        await self._client.aio.aclose()

    @property
    def _where(self) -> str:
        return f"{self.provider} {self.model}"

    def _as_llm_error(self, err: Exception) -> LLMError:
        """One log line: who failed, and why, in the terms the API used."""
        if isinstance(err, errors.APIError):
            retryable = err.code in _RETRYABLE_4XX or err.code >= 500
            return LLMError(one_line(f"{self._where}: HTTP {err.code} {_error_summary(err)}"), retryable=retryable)
        # Checked first: aiohttp's timeout errors are also ClientErrors, httpx's also TransportErrors.
        if isinstance(err, (TimeoutError, httpx.TimeoutException)):
            return LLMError(f"{self._where}: request timeout after {self._timeout:g}s per attempt")
        if isinstance(err, (aiohttp.ClientError, httpx.TransportError, ConnectionError)):
            return LLMError(one_line(f"{self._where}: connection failed: {connection_cause(err)}"))
        # A 200 whose body is not JSON: a proxy's page, say. Not retried, as the same proxy would answer again.
        excerpt = str(err)[:_BODY_EXCERPT_CHARS]
        return LLMError(one_line(f"{self._where}: {type(err).__name__}: {excerpt}"), retryable=False)


def _error_summary(err: errors.APIError) -> str:
    """`STATUS: message` from Google's error envelope, else the start of whatever body came back."""
    if err.status or err.message:
        return f"{err.status or 'error'}: {err.message or ''}"
    return str(err.details)[:_BODY_EXCERPT_CHARS]


def _why_empty(response: types.GenerateContentResponse) -> str:
    """The block reason or finish reason the API gave for an answer without text."""
    feedback = response.prompt_feedback
    if feedback is not None and feedback.block_reason is not None:
        return f"prompt blocked: {feedback.block_reason}"
    if response.candidates:
        return f"finish reason {response.candidates[0].finish_reason}"
    return "no candidates"
