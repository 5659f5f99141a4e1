"""A fake OpenAI-compatible chat-completions API (as Ollama, llama.cpp and vLLM serve it) on loopback.

    with FakeOpenAI(lambda request: '["Paris"]') as fake:
        llm = LocalLLM(fake.base_url)

It serves aiohttp on its own event loop in a background thread (see `LoopbackFake`). Only
`POST /v1/chat/completions` exists, answered whole or, with `stream: true`, as server-sent events.

Structured output is answered as the named server does (`server=`): llama.cpp's llama-server takes
`response_format` `json_schema` and the legacy `json_object` with a `schema`; vLLM takes `json_schema` only
with a `name`, and `json_object` as any JSON object; llama-cpp-python's server refuses `json_schema` (a 500) and
takes `json_object` with a `schema`; `ignore` takes any `response_format` and ignores it, as servers without a
grammar do. A schema it takes is checked (a valid JSON Schema, else 400 as a grammar that cannot be built), and
the answer is held to it as a grammar would hold the model: a responder whose text breaks it is a test bug (500).
`max_tokens` cuts the answer (tokens are words here) with `finish_reason: length`, as a real server does.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Callable
from typing import Any

import jsonschema
from aiohttp import web

from tests.fakes.loopback import HttpRecord, LoopbackFake, text_of_blocks, word_count

# Given the parsed request body (model, messages, max_tokens), returns the assistant's text.
Responder = Callable[[dict[str, Any]], str]

# The error `type` and `code` OpenAI sends with each status code.
ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


def _messages_with(body: dict[str, Any], role: str) -> list[str]:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return []
    return [text_of_blocks(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == role]


#: The servers whose structured output the fake can answer as (see the module's doc).
SERVERS = ("llama.cpp", "vllm", "llama-cpp-python", "ignore")


def requested_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON Schema a chat request asks its answer to follow, wherever its dialect puts it."""
    response_format = body.get("response_format")
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        inner = response_format.get("json_schema")
        schema = inner.get("schema") if isinstance(inner, dict) else None
    else:
        schema = response_format.get("schema")
    return schema if isinstance(schema, dict) else None


def words(text: str) -> list[str]:
    """The text in word-sized pieces that join back into it: the fake's tokens."""
    return re.findall(r"\s*\S+|\s+$", text)


def echo(request_json: dict[str, Any]) -> str:
    """The default responder: answers with the last user message."""
    users = _messages_with(request_json, "user")
    return users[-1] if users else ""


class RecordedRequest(HttpRecord):
    """A request as the fake received it: headers, parsed body, path and query (see `HttpRecord`)."""

    @property
    def api_key(self) -> str | None:
        """The bearer token, None when no Authorization header was sent."""
        key = self.headers.get("authorization", "").removeprefix("Bearer ")
        return key.strip() or None

    @property
    def system(self) -> str | None:
        systems = _messages_with(self.body, "system")
        return systems[0] if systems else None

    @property
    def user_text(self) -> str:
        return echo(self.body)

    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON Schema the request sent for its answer, None when it sent none."""
        return requested_schema(self.body)


class FakeOpenAI(LoopbackFake[RecordedRequest]):
    """`requests` holds every request received, rejected ones and unknown paths included, oldest first.

    `fail_next` answers with OpenAI's error envelope, `{"error": {"message", "type", "param", "code"}}`.
    """

    name = "FakeOpenAI"

    def __init__(
        self,
        responder: Responder = echo,
        *,
        api_key: str | None = None,
        served_model: str | None = None,
        usage: bool = True,
        server: str = "llama.cpp",
        token_delay: float = 0.0,
    ) -> None:
        """`api_key` set: only that bearer token is accepted; unset: any or none is, as on a local Ollama.

        `served_model` set: responses name it instead of the requested model. `usage` False: answers carry
        no `usage` object, as some servers send none. `server` answers structured output as that server does
        (one of SERVERS). `token_delay`: seconds between streamed tokens, a model writing slowly.
        """
        if server not in SERVERS:
            raise ValueError(f"unknown server {server!r}: one of {SERVERS}")
        super().__init__()
        self._responder = responder
        self._api_key = api_key
        self._served_model = served_model
        self._usage = usage
        self._server = server
        self._token_delay = token_delay
        self._ids = itertools.count(1)
        self._in_flight = 0
        self._max_in_flight = 0

    @property
    def max_in_flight(self) -> int:
        """The most chat completions the fake was answering at once (a request counts until its answer ends)."""
        with self._lock:
            return self._max_in_flight

    @property
    def base_url(self) -> str:
        """The OpenAI-style root including `/v1`: clients append `/chat/completions`."""
        return f"{self._root_url}/v1"

    # --- the API ---

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_route("*", "/{tail:.*}", self._not_found)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, code = ERROR_KINDS.get(status, ("server_error", None))
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            return await self._answer(request)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        recorded, parsed = await self._record_request(request, RecordedRequest)
        body = recorded.body

        if self._api_key is not None and recorded.api_key != self._api_key:
            return self._error(401, "Incorrect API key provided.")
        if not isinstance(parsed, dict):
            return self._error(400, "We could not parse the JSON body of your request.")
        for name in ("model", "messages"):
            if name not in body:
                return self._error(400, f"Missing required parameter: '{name}'.")
        if not isinstance(body["messages"], list) or not body["messages"]:
            return self._error(400, "'messages' must contain at least one message.")
        refused = self._refuse_format(body)
        if refused is not None:
            return refused

        scripted = await self._scripted()
        if scripted is not None:
            return scripted

        try:
            text = self._responder(body)
        except Exception as err:
            return self._error(500, f"responder failed: {err!r}")
        pieces = words(text)
        cap = body.get("max_tokens")
        cut = isinstance(cap, int) and len(pieces) > cap
        if cut:
            pieces = pieces[:cap]
        text = "".join(pieces)
        schema = requested_schema(body) if self._server != "ignore" else None
        if schema is not None and not cut:
            try:
                jsonschema.validate(json.loads(text), schema)
            except (ValueError, jsonschema.ValidationError) as err:
                return self._error(500, f"the responder broke the schema the server holds the model to: {err}")
        n = next(self._ids)
        model = self._served_model or body["model"]
        finish = "length" if cut else "stop"
        messages = [m for m in body["messages"] if isinstance(m, dict)]
        prompt_words = sum(word_count(text_of_blocks(m.get("content"))) for m in messages)
        usage = {
            "prompt_tokens": prompt_words,
            "completion_tokens": len(pieces),
            "total_tokens": prompt_words + len(pieces),
        }
        if body.get("stream"):
            return await self._stream(request, body, f"chatcmpl-fake{n:06d}", model, pieces, finish, usage)
        answer: dict[str, Any] = {
            "id": f"chatcmpl-fake{n:06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        }
        if self._usage:
            answer["usage"] = usage
        return web.json_response(answer)

    def _refuse_format(self, body: dict[str, Any]) -> web.Response | None:
        """The answer of the named server to a `response_format` it does not take, None when it takes it."""
        response_format = body.get("response_format")
        if response_format is None or self._server == "ignore":
            return None
        kind = response_format.get("type") if isinstance(response_format, dict) else None
        if self._server == "llama-cpp-python" and kind not in ("text", "json_object"):
            # Its pydantic validation error, which its route handler answers as a 500 (seen from 0.2.62's server).
            detail = {
                "type": "literal_error",
                "loc": ("body", "response_format", "type"),
                "msg": "Input should be 'text' or 'json_object'",
                "input": kind,
            }
            message = f"1 validation error:\n  {detail}\n\n    POST /v1/chat/completions"
            return web.json_response(
                {"error": {"message": message, "type": "internal_server_error", "param": None, "code": None}},
                status=500,
            )
        if kind not in ("text", "json_object", "json_schema"):
            return self._error(
                400, f"response_format type must be one of 'text', 'json_object' or 'json_schema', got {kind!r}"
            )
        if self._server == "vllm" and kind == "json_schema":
            inner = response_format.get("json_schema")
            if not isinstance(inner, dict) or not isinstance(inner.get("name"), str):
                return self._error(400, "response_format.json_schema.name: Field required")
        schema = requested_schema(body)
        if schema is not None:
            try:
                jsonschema.Draft202012Validator.check_schema(schema)
            except jsonschema.SchemaError as err:
                return self._error(400, f"failed to parse the json_schema into a grammar: {err.message}")
        return None

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        ident: str,
        model: str,
        pieces: list[str],
        finish: str,
        usage: dict[str, int],
    ) -> web.StreamResponse:
        """Server-sent events as OpenAI's streaming sends them: a role, one delta per token, the finish reason,
        the usage when `stream_options.include_usage` asked for it, then `[DONE]`."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        created = int(time.time())

        async def send(delta: dict[str, Any], finish_reason: str | None = None) -> None:
            chunk = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await send({"role": "assistant", "content": ""})
        for piece in pieces:
            if self._token_delay:
                await asyncio.sleep(self._token_delay)
            await send({"content": piece})
        await send({}, finish)
        options = body.get("stream_options")
        if self._usage and isinstance(options, dict) and options.get("include_usage"):
            chunk = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model}
            await response.write(f"data: {json.dumps({**chunk, 'choices': [], 'usage': usage})}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _not_found(self, request: web.Request) -> web.Response:
        await self._record_request(request, RecordedRequest)  # unknown paths are recorded too, as in FakeAnthropic
        return self._error(404, f"{request.method} {request.path} does not exist")
