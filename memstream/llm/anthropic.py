"""Claude through the Anthropic Messages API, behind the LLM interface.

The SDK's own retries are off: every provider retries through one RetryPolicy (memstream.llm.retry), so
backoff is configured in one place. 408/409/429/5xx, dropped connections and timeouts are retryable;
other errors are not. Whatever still fails becomes an LLMError naming provider, model and cause — never
an empty completion.
"""

from __future__ import annotations

import anthropic

from memstream.llm.base import Completion, JsonSchema, LLMError, one_line
from memstream.llm.retry import RetryPolicy, with_retries

# A fast, low-cost model: memory extraction is short prompts with structured answers.
DEFAULT_MODEL = "claude-haiku-4-5"
# Seconds one HTTP attempt may take (connect, send, wait for the whole answer) before the SDK gives it up.
DEFAULT_TIMEOUT_S = 60.0
# Status codes worth another attempt: timeouts, conflicts, rate limits and server errors.
_RETRYABLE_STATUS = frozenset({408, 409, 429})
# How much of an unrecognised error body goes into an LLMError: enough to see the cause, not a page.
_BODY_EXCERPT_CHARS = 200


class AnthropicLLM:
    provider: str = "anthropic"

    def __init__(
        self,
        api_key: str,
        *,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        """Raises LLMError at once when `api_key` is blank.

        The key is required rather than left for the SDK to find (ANTHROPIC_API_KEY, profiles) because
        settings are read in one place. A blank key is refused here because anthropic 2.x cannot even send
        it (`Authorization: Bearer ` is an illegal header) and would retry that as a connection error.

        `base_url` is the API root without `/v1` (e.g. `http://127.0.0.1:8080`): the SDK appends
        `/v1/messages` itself, so a root ending in `/v1` would request `/v1/v1/messages`.
        """
        if not api_key.strip():
            raise LLMError(f"{self.provider} {model}: no API key configured", retryable=False)
        self.model = model
        self._timeout = timeout
        self._retry = retry
        # An empty base_url (an unset setting) must mean "the SDK's default", not a relative URL.
        # The SDK's aiohttp transport costs half the CPU per call of its default httpx one
        # (1.3 vs 2.5 ms, 400 calls to the fake API), and a worker makes one call per turn or more.
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url or None,
            timeout=timeout,
            max_retries=0,
            http_client=anthropic.DefaultAioHttpClient(timeout=timeout),
        )

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        # `schema` is not sent: a hosted model follows the answer shape its prompt states.
        return await with_retries(
            lambda: self._complete_once(system, prompt, max_tokens), self._retry, what=f"{self.provider} {self.model}"
        )

    async def _complete_once(self, system: str, prompt: str, max_tokens: int) -> Completion:
        try:
            message = await self._client.messages.create(
                model=self.model,
                max_tokens=max_tokens,
                # An empty system prompt is left out rather than sent as empty text, which the API may reject.
                system=system if system else anthropic.omit,
                messages=[{"role": "user", "content": prompt}],
            )
        except anthropic.AnthropicError as err:
            raise LLMError(self._describe(err), retryable=_retryable(err)) from err
        text = "".join(block.text for block in message.content if block.type == "text")
        return Completion(
            text=text,
            provider=self.provider,
            model=message.model,
            input_tokens=message.usage.input_tokens,
            output_tokens=message.usage.output_tokens,
        )

    async def close(self) -> None:
        await self._client.close()

    def _describe(self, err: anthropic.AnthropicError) -> str:
        """One log line: who failed, and why, in the terms the API used."""
        where = f"{self.provider} {self.model}"
        # APITimeoutError subclasses APIConnectionError, so it is checked first.
        if isinstance(err, anthropic.APITimeoutError):
            return f"{where}: request timeout after {self._timeout:g}s per attempt"
        if isinstance(err, anthropic.APIConnectionError):
            return one_line(f"{where}: connection failed: {err.__cause__ or err}")
        if isinstance(err, anthropic.APIStatusError):
            return one_line(f"{where}: HTTP {err.status_code} {_error_summary(err.body)}")
        return one_line(f"{where}: {type(err).__name__}: {err}")


def _retryable(err: anthropic.AnthropicError) -> bool:
    if isinstance(err, anthropic.APIStatusError):
        return err.status_code in _RETRYABLE_STATUS or err.status_code >= 500
    # Timeouts and dropped connections may work next time; anything else is a bug or bad input.
    return isinstance(err, anthropic.APIConnectionError)


def _error_summary(body: object) -> str:
    """`type: message` from the API's error envelope, else the start of whatever body came back."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and ("type" in error or "message" in error):
            return f"{error.get('type', 'error')}: {error.get('message', '')}"
    return str(body)[:_BODY_EXCERPT_CHARS]
