"""A local model behind an OpenAI-compatible chat-completions endpoint (llama.cpp, vLLM, Ollama), behind the LLM
interface.

Spoken over plain aiohttp: the wire format is small, and no SDK is needed to reach a server on the same machine.
Failures are retried under the shared RetryPolicy and end as an LLMError naming provider, model and cause — never
an empty completion.

A small model on a laptop CPU is slow and single (issue 28), so this client differs from the hosted ones:

- Constrained output. Given the answer's JSON Schema, it sends it in the server's dialect, so the server's
  grammar lets the model write only valid, typed, bounded JSON:
  ``json_schema`` — ``response_format: {type: json_schema, json_schema: {name, schema, strict}}`` (llama.cpp's
  llama-server, vLLM, Ollama's /v1, LM Studio); ``json_object`` — ``response_format: {type: json_object,
  schema}`` (llama-cpp-python's server, which refuses the former with a 500); ``ollama`` — Ollama's own
  ``/api/chat`` with ``format: <schema>`` and ``options.num_ctx`` (its /v1 cannot raise the context, which cuts
  long prompts at 4k tokens); ``none`` — the prompt alone. ``auto`` asks ``/api/version`` whether the server is
  Ollama, else starts at ``json_schema`` and steps down to ``json_object`` and then ``none`` when the server
  refuses the format.
  A server that ignores the format still answers: the tolerant parser reads that answer.
- Streaming, with two timeouts instead of one total: the wait for the first token (a CPU model reads a 4k-token
  prompt for minutes) and the longest silence between tokens. A call that keeps writing is never cut off.
- One call at a time (``concurrency``): a second call would only halve the speed of both on two cores; ``busy``
  tells callers that can do something better than wait (park a snapshot, skip a rerank).
- A log line per call saying how long the model took to read and to write, and at what speed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import statistics
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from memstream.llm.base import Completion, JsonSchema, LLMError, connection_cause, one_line
from memstream.llm.retry import RetryPolicy, with_retries

log = logging.getLogger(__name__)

# A small model that runs on a laptop and still answers in JSON when asked to.
DEFAULT_MODEL = "qwen3:4b"
#: Seconds to wait for the first token. A 1.5B model on 2 busy CPU cores reads 10-50 prompt tokens/s, and an
#: extraction prompt is up to ~4,500 tokens: up to ~450 s before it writes anything (issue 28 measured
#: 40-204 s per whole call).
DEFAULT_TIMEOUT_S = 600.0
#: Seconds without a new token, once tokens flow, before the call is given up as stalled. Such a model writes
#: 6-8 tokens/s, so a minute of silence is not a slow model but a stuck one.
DEFAULT_IDLE_TIMEOUT_S = 60.0
#: Seconds to open the connection: the server is on this machine or next to it.
CONNECT_TIMEOUT_S = 10.0
#: Ollama's context window for each request (its default, 2-4k tokens, silently cuts an extraction prompt).
DEFAULT_CONTEXT_TOKENS = 8192
#: The dialects of structured output, and what ``auto`` tries in turn on an OpenAI-compatible server.
DIALECTS = ("auto", "json_schema", "json_object", "ollama", "none")
_STEP_DOWN = {"json_schema": "json_object", "json_object": "none"}
# HTTP statuses worth retrying besides 5xx: request timeout and rate limit.
_RETRYABLE_4XX = frozenset({408, 429})
# How much of an unrecognised error body goes into an LLMError: enough to see the cause, not a page.
_BODY_EXCERPT_CHARS = 200
# Words in a refusal that say it is the structured-output request the server does not take, not the prompt.
_FORMAT_WORDS = ("response_format", "json_schema", "schema", "grammar")
# How many recent calls the typical call duration is taken over.
_RECENT_CALLS = 8


@dataclass
class _Answer:
    """What one streamed answer came to."""

    text: str
    model: str
    input_tokens: int
    output_tokens: int
    #: Seconds from sending the request to the first token (the model reading the prompt), and in all.
    first_token_s: float
    total_s: float
    #: The server stopped at max_tokens.
    cut: bool


class LocalLLM:
    provider: str = "local"

    def __init__(
        self,
        base_url: str,
        *,
        model: str = DEFAULT_MODEL,
        api_key: str = "",
        timeout: float = DEFAULT_TIMEOUT_S,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S,
        dialect: str = "auto",
        concurrency: int = 1,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        """`base_url` is the OpenAI-style root including its version, e.g. `http://localhost:8080/v1`:
        requests go to `{base_url}/chat/completions` (Ollama's own API: `/api/chat` beside the `/v1`).

        `timeout` is the longest wait for the first token, `idle_timeout` the longest silence after it.
        `api_key` is sent as a bearer token only when given: local servers usually need none.
        """
        if dialect not in DIALECTS:
            raise ValueError(f"unknown structured-output dialect {dialect!r}: one of {', '.join(DIALECTS)}")
        if concurrency < 1:
            raise ValueError("a local model needs a concurrency of at least 1")
        self.model = model
        root = base_url.rstrip("/")
        self._url = root + "/chat/completions"
        self._server = root.removesuffix("/v1")
        self._timeout = timeout
        self._idle_timeout = idle_timeout
        self._configured = dialect
        # The dialect in use once known: the configured one, or what `auto` found.
        self._dialect: str | None = None if dialect == "auto" else dialect
        self._context_tokens = context_tokens
        self._retry = retry
        self._headers = {"Authorization": f"Bearer {api_key.strip()}"} if api_key.strip() else {}
        self._concurrency = concurrency
        self._slots = asyncio.Semaphore(concurrency)
        self._in_flight = 0
        self._recent: deque[float] = deque(maxlen=_RECENT_CALLS)
        # Opened on first use, inside the running event loop, which aiohttp requires.
        self._session: aiohttp.ClientSession | None = None

    @property
    def busy(self) -> bool:
        """Every slot is taken: a new call would wait for one in flight to end."""
        return self._in_flight >= self._concurrency

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot."""
        return max(0, self._in_flight - self._concurrency)

    @property
    def dialect(self) -> str | None:
        """The structured-output dialect in use, None until `auto` has asked the server."""
        return self._dialect

    @property
    def typical_call_s(self) -> float | None:
        """The median duration of the recent calls, None before the first."""
        return statistics.median(self._recent) if self._recent else None

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        messages = [{"role": "user", "content": prompt}]
        if system:  # an empty system message is left out rather than sent as empty text
            messages.insert(0, {"role": "system", "content": system})
        queued = time.monotonic()
        self._in_flight += 1
        try:
            async with self._slots:
                waited = time.monotonic() - queued
                answer = await with_retries(
                    lambda: self._attempt(messages, max_tokens, schema),
                    self._retry,
                    what=f"{self._where} chat",
                )
        finally:
            self._in_flight -= 1
        self._recent.append(answer.total_s)
        self._log_speed(answer, waited, max_tokens, schema)
        return Completion(
            text=answer.text,
            provider=self.provider,
            model=answer.model or self.model,
            input_tokens=answer.input_tokens,
            output_tokens=answer.output_tokens,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    @property
    def _where(self) -> str:
        return f"{self.provider} {self.model}"

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # No total timeout: a streamed answer takes as long as the model writes; the waits are ours.
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, connect=CONNECT_TIMEOUT_S, sock_read=None)
            )
        return self._session

    async def _attempt(self, messages: list[dict[str, str]], max_tokens: int, schema: JsonSchema | None) -> _Answer:
        """One attempt in the dialect in use; with `auto`, a refused format steps down and asks again."""
        while True:
            # Ollama's own API serves every call once known (its /v1 cannot widen the context); elsewhere a
            # call without a schema is a plain chat completion.
            known_ollama = self._dialect == "ollama"
            dialect = await self._resolve() if schema is not None or known_ollama else "none"
            try:
                if dialect == "ollama":
                    return await self._ollama(messages, max_tokens, schema)
                return await self._openai(messages, max_tokens, schema, dialect)
            except _FormatRefused as refused:
                lower = _STEP_DOWN.get(dialect)
                if self._configured != "auto" or lower is None:
                    hint = "" if self._configured == "auto" else "; set MEMSTREAM_LOCAL_LLM_DIALECT to another dialect"
                    raise LLMError(f"{refused}{hint}", retryable=False) from None
                log.warning("%s: the server refused %s output (%s); trying %s", self._where, dialect, refused, lower)
                self._dialect = lower

    async def _resolve(self) -> str:
        """The dialect in use; `auto` asks once whether the server is Ollama (its /api/version answers)."""
        if self._dialect is None:
            self._dialect = "ollama" if await self._is_ollama() else "json_schema"
            log.info("%s: structured output as %s (detected)", self._where, self._dialect)
        return self._dialect

    async def _is_ollama(self) -> bool:
        try:
            async with self._open().get(
                self._server + "/api/version", headers=self._headers, timeout=aiohttp.ClientTimeout(total=10)
            ) as response:
                body = await response.read()
                if response.status != 200:
                    return False
        except (TimeoutError, aiohttp.ClientError):
            return False  # the chat call that follows reports an unreachable server properly
        try:
            parsed = json.loads(body)
        except ValueError:
            return False
        return isinstance(parsed, dict) and isinstance(parsed.get("version"), str)

    # --- the OpenAI-compatible chat completions (llama.cpp, llama-cpp-python, vLLM, LM Studio) ---

    async def _openai(
        self, messages: list[dict[str, str]], max_tokens: int, schema: JsonSchema | None, dialect: str
    ) -> _Answer:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "stream": True,
            # The token counts arrive in a last chunk (servers that do not know the option ignore it).
            "stream_options": {"include_usage": True},
        }
        if schema is not None and dialect == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": dict(schema), "strict": True},
            }
        elif schema is not None and dialect == "json_object":
            body["response_format"] = {"type": "json_object", "schema": dict(schema)}
        parts: list[str] = []
        usage: dict[str, Any] = {}
        served = ""
        cut = False
        async with self._stream(self._url, body, formatted="response_format" in body) as (lines, clock):
            async for line in lines:
                if not line.startswith("data:"):
                    continue  # SSE comments (keep-alive pings) and blank lines: no progress
                data = line.removeprefix("data:").strip()
                if data == "[DONE]":
                    break
                chunk = _json_object(data, self._where)
                if "error" in chunk:
                    raise LLMError(one_line(f"{self._where}: error while writing: {_error_summary(chunk, b'')}"))
                served = served or str(chunk.get("model") or "")
                if isinstance(chunk.get("usage"), dict):
                    usage = chunk["usage"]
                for choice in chunk.get("choices") or []:
                    if not isinstance(choice, dict):
                        continue
                    delta = choice.get("delta")
                    content = delta.get("content") if isinstance(delta, dict) else None
                    if isinstance(content, str) and content:
                        parts.append(content)
                        clock.token()
                    cut = cut or choice.get("finish_reason") == "length"
        return self._answer(parts, served, usage.get("prompt_tokens"), usage.get("completion_tokens"), clock, cut)

    # --- Ollama's own chat API ---

    async def _ollama(self, messages: list[dict[str, str]], max_tokens: int, schema: JsonSchema | None) -> _Answer:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "options": {"num_predict": max_tokens, "num_ctx": self._context_tokens},
        }
        if schema is not None:
            body["format"] = dict(schema)
        parts: list[str] = []
        last: dict[str, Any] = {}
        async with self._stream(self._server + "/api/chat", body, formatted="format" in body) as (lines, clock):
            async for line in lines:
                if not line:
                    continue
                chunk = _json_object(line, self._where)
                if "error" in chunk:
                    raise LLMError(one_line(f"{self._where}: error while writing: {_error_summary(chunk, b'')}"))
                message = chunk.get("message")
                content = message.get("content") if isinstance(message, dict) else None
                if isinstance(content, str) and content:
                    parts.append(content)
                    clock.token()
                if chunk.get("done"):
                    last = chunk
                    break
        cut = last.get("done_reason") == "length"
        return self._answer(
            parts, str(last.get("model") or ""), last.get("prompt_eval_count"), last.get("eval_count"), clock, cut
        )

    # --- shared ---

    def _stream(self, url: str, body: dict[str, Any], *, formatted: bool) -> _Stream:
        return _Stream(self, url, body, formatted=formatted)

    def _answer(
        self, parts: list[str], served: str, prompt_tokens: object, completion_tokens: object, clock: _Clock, cut: bool
    ) -> _Answer:
        text = "".join(parts)
        if not text:
            raise LLMError(f"{self._where}: no text in the answer", retryable=False)
        return _Answer(
            text=text,
            model=served,
            input_tokens=_count(prompt_tokens),
            # A server that sends no usage still sent one chunk per token (or close to it).
            output_tokens=_count(completion_tokens) or clock.tokens,
            first_token_s=clock.first_token_s,
            total_s=clock.elapsed(),
            cut=cut,
        )

    def _log_speed(self, answer: _Answer, waited: float, max_tokens: int, schema: JsonSchema | None) -> None:
        reading = answer.first_token_s
        writing = max(answer.total_s - reading, 1e-6)
        if answer.input_tokens and reading > 0:
            read = f"read {answer.input_tokens} prompt tokens in {reading:.1f}s ({answer.input_tokens / reading:.0f}/s)"
        else:  # the server sent no usage (llama-cpp-python's stream does not)
            read = f"read the prompt in {reading:.1f}s"
        constrained = schema is not None and self._dialect not in (None, "none")
        log.info(
            "%s: call took %.1fs: %s, wrote %d tokens in %.1fs (%.1f tokens/s)%s%s; %s",
            self._where,
            answer.total_s,
            read,
            answer.output_tokens,
            writing,
            answer.output_tokens / writing,
            f", cut at max_tokens={max_tokens}" if answer.cut else "",
            f", after waiting {waited:.1f}s for the model" if waited >= 1.0 else "",
            f"schema as {self._dialect}" if constrained else "no schema",
        )


class _FormatRefused(Exception):
    """The server refused the structured-output part of the request (400, 422, or llama-cpp-python's 500)."""


class _Clock:
    """The two waits of a streamed call: for the first token (from the request), then between tokens."""

    def __init__(self, first_token_timeout: float, idle_timeout: float) -> None:
        self.started = time.monotonic()
        self.first_token_timeout = first_token_timeout
        self.idle_timeout = idle_timeout
        self.deadline = self.started + first_token_timeout
        self.first_token_s = 0.0
        self.tokens = 0

    def token(self) -> None:
        now = time.monotonic()
        if self.tokens == 0:
            self.first_token_s = now - self.started
        self.tokens += 1
        self.deadline = now + self.idle_timeout

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class _Stream:
    """``async with`` one streamed request: yields its lines under the clock's deadlines, and maps every
    failure (connection, status, timeout) to an LLMError (or _FormatRefused)."""

    def __init__(self, llm: LocalLLM, url: str, body: dict[str, Any], *, formatted: bool) -> None:
        self._llm = llm
        self._url = url
        self._body = body
        self._formatted = formatted
        self._response: aiohttp.ClientResponse | None = None
        self._clock = _Clock(llm._timeout, llm._idle_timeout)

    async def __aenter__(self) -> tuple[AsyncIterator[str], _Clock]:
        llm, where = self._llm, self._llm._where
        try:
            self._response = await asyncio.wait_for(
                llm._open().post(self._url, json=self._body, headers=llm._headers), self._clock.left()
            )
        except TimeoutError as err:
            raise self._timed_out() from err
        except aiohttp.ClientError as err:
            raise LLMError(one_line(f"{where}: connection failed: {connection_cause(err)}")) from err
        if self._response.status != 200:
            await self._fail(self._response)
        return self._lines(self._response), self._clock

    async def __aexit__(self, *exc: object) -> None:
        if self._response is not None:
            # Closing mid-stream drops the connection, which tells llama.cpp and Ollama to stop generating.
            self._response.close()

    async def _lines(self, response: aiohttp.ClientResponse) -> AsyncIterator[str]:
        while True:
            try:
                raw = await asyncio.wait_for(response.content.readline(), max(self._clock.left(), 0.0))
            except TimeoutError as err:
                raise self._timed_out() from err
            except aiohttp.ClientError as err:
                raise LLMError(one_line(f"{self._llm._where}: connection lost while writing: {err}")) from err
            if not raw:
                return
            yield raw.decode(errors="replace").strip()

    def _timed_out(self) -> LLMError:
        where, clock = self._llm._where, self._clock
        if clock.tokens == 0:
            return LLMError(
                f"{where}: request timeout after {clock.first_token_timeout:g}s per attempt: no token yet "
                "(a CPU model may still be reading the prompt; raise MEMSTREAM_LOCAL_LLM_TIMEOUT)"
            )
        return LLMError(
            f"{where}: stalled: no token for {clock.idle_timeout:g}s after {clock.tokens} tokens "
            f"in {clock.elapsed():.0f}s (MEMSTREAM_LOCAL_LLM_IDLE_TIMEOUT)"
        )

    async def _fail(self, response: aiohttp.ClientResponse) -> None:
        where = self._llm._where
        try:
            raw = await asyncio.wait_for(response.read(), max(self._clock.left(), 1.0))
        except (TimeoutError, aiohttp.ClientError):
            raw = b""
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        status = response.status
        summary = _error_summary(parsed, raw)
        # llama-cpp-python's server answers its request validation error with a 500, not a 4xx.
        refused = status in (400, 422, 500) and any(w in raw.decode(errors="replace") for w in _FORMAT_WORDS)
        if self._formatted and refused:
            raise _FormatRefused(one_line(f"{where}: HTTP {status} {summary}"))
        retryable = status in _RETRYABLE_4XX or status >= 500
        raise LLMError(one_line(f"{where}: HTTP {status} {summary}"), retryable=retryable)


def _json_object(data: str, where: str) -> dict[str, Any]:
    try:
        parsed = json.loads(data)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise LLMError(one_line(f"{where}: a streamed chunk is not a JSON object: {data[:_BODY_EXCERPT_CHARS]}"))
    return parsed


def _count(value: object) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _error_summary(parsed: object, raw: bytes) -> str:
    """`type: message` from the OpenAI error envelope (Ollama sends the same), else the start of the body."""
    if isinstance(parsed, Mapping):
        error = parsed.get("error")
        if isinstance(error, Mapping) and ("type" in error or "message" in error):
            return f"{error.get('type') or 'error'}: {error.get('message', '')}"
        if isinstance(error, str):
            return error
    return raw[:_BODY_EXCERPT_CHARS].decode(errors="replace")
