"""A fake Gemini API (generateContent) on loopback, speaking the real wire protocol so tests exercise the real SDK.

    with FakeGoogle(lambda request: '["Paris"]', api_key="AIza-test") as fake:
        llm = GoogleLLM("AIza-test", base_url=fake.base_url)

It serves aiohttp on its own event loop in a background thread (see `LoopbackFake`). Only
`POST /{v1|v1beta}/models/{model}:generateContent` exists: google-genai 3.x calls `v1`, earlier SDKs `v1beta`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fakes.loopback import HttpRecord, LoopbackFake, word_count

# Given the parsed request body (contents, systemInstruction, generationConfig), returns the model's text.
Responder = Callable[[dict[str, Any]], str]

# The gRPC status name the real API sends with each HTTP status code.
ERROR_STATUSES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
API_VERSIONS = ("v1", "v1beta")


def _text_of(content: object) -> str:
    """A Content is `{"role", "parts": [{"text"}, ...]}`; only text parts count."""
    if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
        return ""
    return " ".join(p["text"] for p in content["parts"] if isinstance(p, dict) and isinstance(p.get("text"), str))


def echo(request_json: dict[str, Any]) -> str:
    """The default responder: answers with the last user turn's text."""
    users = [c for c in request_json.get("contents", []) if isinstance(c, dict) and c.get("role", "user") == "user"]
    return _text_of(users[-1]) if users else ""


class RecordedRequest(HttpRecord):
    """A request as the fake received it: headers, parsed body, path and query (see `HttpRecord`)."""

    @property
    def api_key(self) -> str | None:
        # The SDK sends `x-goog-api-key`; REST examples pass `?key=`.
        key = self.headers.get("x-goog-api-key") or self.query.get("key", "")
        return key.strip() or None

    @property
    def model(self) -> str | None:
        """The model named in the path, e.g. `gemini-3-flash-preview`."""
        tail = self.path.partition("/models/")[2]
        return tail.removesuffix(":generateContent") if tail.endswith(":generateContent") else None

    @property
    def system(self) -> str | None:
        """The system instruction's text, None when none was sent."""
        instruction = self.body.get("systemInstruction")
        return None if instruction is None else _text_of(instruction)

    @property
    def generation_config(self) -> dict[str, Any]:
        config = self.body.get("generationConfig")
        return config if isinstance(config, dict) else {}

    @property
    def response_mime_type(self) -> str | None:
        return self.generation_config.get("responseMimeType")

    @property
    def user_text(self) -> str:
        return echo(self.body)


class FakeGoogle(LoopbackFake[RecordedRequest]):
    """`requests` holds every request received, rejected ones and unknown paths included, oldest first.

    `fail_next` answers with Google's error envelope, `{"error": {"code", "message", "status"}}`.
    """

    name = "FakeGoogle"

    def __init__(
        self,
        responder: Responder = echo,
        *,
        api_key: str | None = None,
        served_model: str | None = None,
        model_version: bool = True,
    ) -> None:
        """`api_key` set: only that key is accepted; unset: any non-empty key is.

        `served_model` set: `modelVersion` names it instead of the requested model, as the real API answers
        an alias with the version that served it. `model_version` False: answers carry no `modelVersion`.
        """
        super().__init__()
        self._responder = responder
        self._api_key = api_key
        self._served_model = served_model
        self._model_version = model_version
        self._ids = itertools.count(1)

    @property
    def base_url(self) -> str:
        """The API root, without a version: the SDK appends `/v1/models/...` itself."""
        return self._root_url

    # --- the API ---

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/{version}/models/{model}:generateContent", self._generate_content)
        app.router.add_route("*", "/{tail:.*}", self._not_found)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"code": status, "message": message, "status": ERROR_STATUSES.get(status, "UNKNOWN")}}

    async def _generate_content(self, request: web.Request) -> web.Response:
        if request.match_info["version"] not in API_VERSIONS:
            return await self._not_found(request)
        recorded, parsed = await self._record_request(request, RecordedRequest)
        body = recorded.body

        # The real API's answers: no key is 403, a wrong key is 400 (API_KEY_INVALID), not 401.
        if recorded.api_key is None:
            return self._error(403, "Method doesn't allow unregistered callers. Please use an API Key.")
        if self._api_key is not None and recorded.api_key != self._api_key:
            return self._error(400, "API key not valid. Please pass a valid API key.")
        if not isinstance(parsed, dict):
            return self._error(400, "Invalid JSON payload received.")
        contents = body.get("contents")
        if not isinstance(contents, list) or not contents:
            return self._error(400, "* GenerateContentRequest.contents: contents is not specified")

        scripted = await self._scripted()
        if scripted is not None:
            return scripted

        try:
            text = self._responder(body)
        except Exception as err:
            return self._error(500, f"responder failed: {err!r}")
        prompt_words = sum(word_count(_text_of(c)) for c in contents)
        if recorded.system is not None:
            prompt_words += word_count(recorded.system)
        output_words = word_count(text)
        answer: dict[str, Any] = {
            "candidates": [
                {"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": prompt_words,
                "candidatesTokenCount": output_words,
                "totalTokenCount": prompt_words + output_words,
            },
            "responseId": f"fake-response-{next(self._ids):06d}",
        }
        if self._model_version:
            answer["modelVersion"] = self._served_model or request.match_info["model"]
        return web.json_response(answer)

    async def _not_found(self, request: web.Request) -> web.Response:
        await self._record_request(request, RecordedRequest)  # unknown paths are recorded too, as in FakeAnthropic
        return self._error(404, f"{request.method} {request.path} is not found")
