"""A fake of Ollama's own API on loopback: `GET /api/version` and `POST /api/chat`.

    with FakeOllama(lambda request: '{"memories": []}') as fake:
        llm = LocalLLM(fake.base_url)  # http://127.0.0.1:<port>/v1, as Ollama's OpenAI-compatible root

`/api/chat` answers as Ollama does: streamed by default (`stream` unset or true) as one JSON object per line
with `message.content`, then a last one with `done: true`, `done_reason` and the token counts; or whole with
`stream: false`. `format` is "json" or a JSON Schema: a schema is checked (an invalid one is refused with 400)
and the answer is held to it, as Ollama's grammar holds the model — a responder whose text breaks it is a test
bug (500). `options.num_predict` cuts the answer (tokens are words here) with `done_reason: length`.
Errors are `{"error": "<message>"}`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import jsonschema
from aiohttp import web

from tests.fakes.loopback import HttpRecord, LoopbackFake, text_of_blocks, word_count
from tests.fakes.openai_server import words

#: The Ollama release the fake says it is.
VERSION = "0.12.6"

# Given the parsed request body (model, messages, format, options), returns the assistant's text.
Responder = Callable[[dict[str, Any]], str]


class RecordedRequest(HttpRecord):
    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON Schema sent as `format`, None for none or "json"."""
        fmt = self.body.get("format")
        return fmt if isinstance(fmt, dict) else None

    @property
    def options(self) -> dict[str, Any]:
        options = self.body.get("options")
        return options if isinstance(options, dict) else {}


class FakeOllama(LoopbackFake[RecordedRequest]):
    name = "FakeOllama"

    def __init__(self, responder: Responder, *, token_delay: float = 0.0) -> None:
        """`token_delay`: seconds between streamed tokens, a model writing slowly."""
        super().__init__()
        self._responder = responder
        self._token_delay = token_delay

    @property
    def base_url(self) -> str:
        """Ollama's OpenAI-compatible root, as users configure it; its own API is beside it."""
        return f"{self._root_url}/v1"

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/api/version", self._version)
        app.router.add_post("/api/chat", self._chat)
        app.router.add_route("*", "/{tail:.*}", self._not_found)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": message}

    async def _version(self, request: web.Request) -> web.Response:
        await self._record_request(request, RecordedRequest)
        return web.json_response({"version": VERSION})

    async def _not_found(self, request: web.Request) -> web.Response:
        await self._record_request(request, RecordedRequest)
        return web.Response(status=404, text="404 page not found")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        recorded, parsed = await self._record_request(request, RecordedRequest)
        body = recorded.body
        if not isinstance(parsed, dict):
            return self._error(400, "invalid character looking for beginning of value")
        if not body.get("model"):
            return self._error(400, "model is required")
        fmt = body.get("format")
        if fmt is not None and fmt != "json" and not isinstance(fmt, dict):
            return self._error(400, f"invalid format: {json.dumps(fmt)}")
        if isinstance(fmt, dict):
            try:
                jsonschema.Draft202012Validator.check_schema(fmt)
            except jsonschema.SchemaError as err:
                return self._error(400, f"failed to load model vocabulary required for format: {err.message}")

        scripted = await self._scripted()
        if scripted is not None:
            return scripted

        try:
            text = self._responder(body)
        except Exception as err:
            return self._error(500, f"responder failed: {err!r}")
        pieces = words(text)
        cap = recorded.options.get("num_predict")
        cut = isinstance(cap, int) and 0 <= cap < len(pieces)
        if cut:
            pieces = pieces[:cap]
        if isinstance(fmt, dict) and not cut:
            try:
                jsonschema.validate(json.loads("".join(pieces)), fmt)
            except (ValueError, jsonschema.ValidationError) as err:
                return self._error(500, f"the responder broke the schema the server holds the model to: {err}")
        messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
        done = {
            "model": body["model"],
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "length" if cut else "stop",
            "prompt_eval_count": sum(word_count(text_of_blocks(m.get("content"))) for m in messages),
            "eval_count": len(pieces),
        }
        if body.get("stream") is False:
            return web.json_response({**done, "message": {"role": "assistant", "content": "".join(pieces)}})
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(request)
        for piece in pieces:
            if self._token_delay:
                await asyncio.sleep(self._token_delay)
            line = {**done, "message": {"role": "assistant", "content": piece}, "done": False}
            for key in ("done_reason", "prompt_eval_count", "eval_count"):
                line.pop(key)
            await response.write(json.dumps(line).encode() + b"\n")
        await response.write(json.dumps(done).encode() + b"\n")
        await response.write_eof()
        return response
