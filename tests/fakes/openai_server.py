"""A fake OpenAI-compatible chat-completions API (as Ollama, llama.cpp and vLLM serve it) on loopback.

    with FakeOpenAI(lambda request: '["Paris"]') as fake:
        llm = LocalLLM(fake.base_url)

It serves aiohttp on its own event loop in a background thread (see `LoopbackFake`). Only
`POST /v1/chat/completions` exists, non-streaming.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

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
    ) -> None:
        """`api_key` set: only that bearer token is accepted; unset: any or none is, as on a local Ollama.

        `served_model` set: responses name it instead of the requested model. `usage` False: answers carry
        no `usage` object, as some servers send none.
        """
        super().__init__()
        self._responder = responder
        self._api_key = api_key
        self._served_model = served_model
        self._usage = usage
        self._ids = itertools.count(1)

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

    async def _chat_completions(self, request: web.Request) -> web.Response:
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
        if body.get("stream"):
            return self._error(400, "this fake does not stream")

        scripted = await self._scripted()
        if scripted is not None:
            return scripted

        try:
            text = self._responder(body)
        except Exception as err:
            return self._error(500, f"responder failed: {err!r}")
        n = next(self._ids)
        answer: dict[str, Any] = {
            "id": f"chatcmpl-fake{n:06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self._served_model or body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        }
        if self._usage:
            messages = [m for m in body["messages"] if isinstance(m, dict)]
            prompt_words = sum(word_count(text_of_blocks(m.get("content"))) for m in messages)
            answer["usage"] = {
                "prompt_tokens": prompt_words,
                "completion_tokens": word_count(text),
                "total_tokens": prompt_words + word_count(text),
            }
        return web.json_response(answer)

    async def _not_found(self, request: web.Request) -> web.Response:
        await self._record_request(request, RecordedRequest)  # unknown paths are recorded too, as in FakeAnthropic
        return self._error(404, f"{request.method} {request.path} does not exist")
