"""A fake Anthropic Messages API on loopback, speaking the real wire protocol so tests exercise the real SDK.

    with FakeAnthropic(lambda request: "Paris", api_key="sk-test") as fake:
        llm = AnthropicLLM("sk-test", base_url=fake.base_url)

It serves aiohttp on its own event loop in a background thread (see `LoopbackFake`): a sync test, an async test
(whose loop it never blocks) and another process all reach it the same way, at `base_url`. Only
`POST /v1/messages` exists.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from tests.fakes.loopback import HttpRecord, LoopbackFake, text_of_blocks, word_count

# Given the parsed request body (system, messages, model, max_tokens), returns the assistant's text
# (or a coroutine that does, to answer late without blocking the server).
Responder = Callable[[dict[str, Any]], str | Awaitable[str]]

# The error `type` the real API sends with each status code.
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def echo(request_json: dict[str, Any]) -> str:
    """The default responder: answers with the last user message."""
    users = [m for m in request_json.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    return text_of_blocks(users[-1].get("content")) if users else ""


class RecordedRequest(HttpRecord):
    """A request as the fake received it: headers, parsed body, path and query (see `HttpRecord`)."""

    @property
    def api_key(self) -> str | None:
        # Older SDKs send the key as `x-api-key`; anthropic 2.x sends it as `Authorization: Bearer`.
        key = self.headers.get("x-api-key") or self.headers.get("authorization", "").removeprefix("Bearer ")
        return key.strip() or None

    @property
    def system(self) -> str:
        return text_of_blocks(self.body.get("system", ""))

    @property
    def user_text(self) -> str:
        return echo(self.body)


class FakeAnthropic(LoopbackFake[RecordedRequest]):
    """`requests` holds every request received, rejected ones and unknown paths included, oldest first.

    `fail_next` answers with the API's error envelope, `{"type": "error", "error": {"type", "message"}}`.
    """

    name = "FakeAnthropic"

    def __init__(
        self, responder: Responder = echo, *, api_key: str | None = None, served_model: str | None = None
    ) -> None:
        """`api_key` set: only that key is accepted; unset: any non-empty key is.

        `served_model` set: responses name it instead of the requested model, as the real API answers an
        alias with a dated snapshot.
        """
        super().__init__()
        self._responder = responder
        self._api_key = api_key
        self._served_model = served_model
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        """The API root, without `/v1`: the SDK appends `/v1/messages` itself."""
        return self._root_url

    # --- the API ---

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_route("*", "/{tail:.*}", self._not_found)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}

    async def _messages(self, request: web.Request) -> web.Response:
        recorded, parsed = await self._record_request(request, RecordedRequest)
        body = recorded.body

        # Checked in the real API's order; a rejected request does not use up a scripted failure or delay.
        if recorded.api_key is None:
            return self._error(401, "x-api-key header is required")
        if self._api_key is not None and recorded.api_key != self._api_key:
            return self._error(401, "invalid x-api-key")
        if "anthropic-version" not in recorded.headers:
            return self._error(400, "anthropic-version: header is required")
        if not isinstance(parsed, dict):
            return self._error(400, "request body must be a JSON object")
        for name in ("model", "max_tokens", "messages"):
            if name not in body:
                return self._error(400, f"{name}: Field required")
        if not isinstance(body["messages"], list) or not body["messages"]:
            return self._error(400, "messages: at least one message is required")

        scripted = await self._scripted()
        if scripted is not None:
            return scripted

        try:
            answer = self._responder(body)
            # A coroutine responder can hold its answer without blocking the server's loop.
            text = await answer if inspect.isawaitable(answer) else answer
        except Exception as err:
            return self._error(500, f"responder failed: {err!r}")
        input_words = word_count(recorded.system) + sum(
            word_count(text_of_blocks(m.get("content"))) for m in body["messages"] if isinstance(m, dict)
        )
        n = next(self._ids)
        return web.json_response(
            {
                "id": f"msg_fake_{n:06d}",
                "type": "message",
                "role": "assistant",
                "model": self._served_model or body["model"],
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": input_words, "output_tokens": word_count(text)},
            },
            headers={"request-id": f"req_fake_{n:06d}"},
        )

    async def _not_found(self, request: web.Request) -> web.Response:
        await self._record_request(request, RecordedRequest)  # unknown paths are recorded too, unlike in FakeVoyage
        return self._error(404, f"{request.method} {request.path} does not exist")
