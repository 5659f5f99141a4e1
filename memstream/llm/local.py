"""A local model behind an OpenAI-compatible chat-completions endpoint (Ollama, llama.cpp, vLLM), behind the LLM
interface.

Spoken over plain aiohttp: the wire format is small, and no SDK is needed to reach a server on the same machine.
`response_format: json_object` is not sent: it makes some servers force a JSON *object*, which breaks prompts
that ask for a JSON array. Failures are retried under the shared RetryPolicy and end as an LLMError naming
provider, model and cause — never an empty completion.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from memstream.llm.base import Completion, LLMError
from memstream.llm.retry import RetryPolicy, with_retries

# A small model that runs on a laptop and still answers in JSON when asked to.
DEFAULT_MODEL = "qwen3:4b"
# Seconds one HTTP attempt may take (connect, send, wait for the whole answer) before it is given up.
DEFAULT_TIMEOUT_S = 45.0
# HTTP statuses worth retrying besides 5xx: request timeout and rate limit.
_RETRYABLE_4XX = frozenset({408, 429})
# How much of an unrecognised error body goes into an LLMError: enough to see the cause, not a page.
_BODY_EXCERPT_CHARS = 200


class LocalLLM:
    provider: str = "local"

    def __init__(
        self,
        base_url: str,
        *,
        model: str = DEFAULT_MODEL,
        api_key: str = "",
        timeout: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        """`base_url` is the OpenAI-style root including its version, e.g. `http://localhost:11434/v1`:
        requests go to `{base_url}/chat/completions`.

        `api_key` is sent as a bearer token only when given: local servers usually need none.
        """
        self.model = model
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._timeout = timeout
        self._retry = retry
        self._headers = {"Authorization": f"Bearer {api_key.strip()}"} if api_key.strip() else {}
        # Opened on first use, inside the running event loop, which aiohttp requires.
        self._session: aiohttp.ClientSession | None = None

    async def complete(self, system: str, prompt: str, *, max_tokens: int = 1024) -> Completion:
        messages = [{"role": "user", "content": prompt}]
        if system:  # an empty system message is left out rather than sent as empty text
            messages.insert(0, {"role": "system", "content": system})
        body = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "stream": False}

        answer = await with_retries(
            lambda: self._post(body), self._retry, what=f"{self.provider} {self.model} chat/completions"
        )
        text = _message_text(answer)
        if not text:
            raise LLMError(f"{self._where}: no text in the answer", retryable=False)
        usage = answer.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        return Completion(
            text=text,
            provider=self.provider,
            model=answer.get("model") or self.model,
            input_tokens=int(usage.get("prompt_tokens") or 0),
            output_tokens=int(usage.get("completion_tokens") or 0),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def _where(self) -> str:
        return f"{self.provider} {self.model}"

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """One attempt: the parsed answer, or an LLMError saying whether another attempt may help."""
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self._timeout))
        try:
            async with self._session.post(self._url, json=body, headers=self._headers) as response:
                raw = await response.read()
                status = response.status
        # Checked before connection errors: aiohttp's timeout errors are also ClientErrors.
        except TimeoutError as err:
            raise LLMError(f"{self._where}: request timeout after {self._timeout:g}s per attempt") from err
        except aiohttp.ClientError as err:
            raise LLMError(_one_line(f"{self._where}: connection failed: {_connection_cause(err)}")) from err
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if status != 200:
            retryable = status in _RETRYABLE_4XX or status >= 500
            summary = _error_summary(parsed, raw)
            raise LLMError(_one_line(f"{self._where}: HTTP {status} {summary}"), retryable=retryable)
        if not isinstance(parsed, dict):
            excerpt = raw[:_BODY_EXCERPT_CHARS].decode(errors="replace")
            raise LLMError(_one_line(f"{self._where}: answer is not a JSON object: {excerpt}"), retryable=False)
        return parsed


def _message_text(answer: dict[str, Any]) -> str:
    """`choices[0].message.content`, "" when any part of that path is missing."""
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


def _error_summary(parsed: object, raw: bytes) -> str:
    """`type: message` from the OpenAI error envelope (Ollama sends the same), else the start of the body."""
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and ("type" in error or "message" in error):
            return f"{error.get('type') or 'error'}: {error.get('message', '')}"
        if isinstance(error, str):
            return error
    return raw[:_BODY_EXCERPT_CHARS].decode(errors="replace")


def _connection_cause(err: Exception) -> str:
    """What went wrong with the connection, without aiohttp's `ssl:<SSLContext object at 0x…>` noise."""
    if isinstance(err, aiohttp.ClientConnectorError):
        return f"{err.host}:{err.port}: {err.os_error.strerror or err.os_error}"
    return str(err) or type(err).__name__


def _one_line(text: str) -> str:
    return " ".join(text.split())
