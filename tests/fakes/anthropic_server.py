"""A fake Anthropic Messages API on loopback, speaking the real wire protocol so tests exercise the real SDK.

    with FakeAnthropic(lambda request: "Paris", api_key="sk-test") as fake:
        llm = AnthropicLLM("sk-test", base_url=fake.base_url)

It serves aiohttp on its own event loop in a background thread: a sync test, an async test (whose loop it
never blocks) and another process all reach it the same way, at `base_url`. Only `POST /v1/messages` exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from aiohttp import web

# Given the parsed request body (system, messages, model, max_tokens), returns the assistant's text.
Responder = Callable[[dict[str, Any]], str]

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
# Seconds the server thread may take to start or stop before the test is told it is stuck.
_THREAD_DEADLINE_S = 10.0
# Seconds in-flight handlers get to finish when the fake stops; delayed ones are woken at once anyway.
_SHUTDOWN_GRACE_S = 1.0


def _text_of(content: object) -> str:
    """Message content is a string or a list of blocks; only text blocks count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _word_count(text: str) -> int:
    # Words stand in for tokens: tests need counts that are stable and predictable, not exact.
    return len(text.split())


def echo(request_json: dict[str, Any]) -> str:
    """The default responder: answers with the last user message."""
    users = [m for m in request_json.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
    return _text_of(users[-1].get("content")) if users else ""


@dataclass(frozen=True)
class RecordedRequest:
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]  # the parsed JSON body, {} when it was not a JSON object
    path: str = "/v1/messages"

    @property
    def api_key(self) -> str | None:
        # Older SDKs send the key as `x-api-key`; anthropic 2.x sends it as `Authorization: Bearer`.
        key = self.headers.get("x-api-key") or self.headers.get("authorization", "").removeprefix("Bearer ")
        return key.strip() or None

    @property
    def system(self) -> str:
        return _text_of(self.body.get("system", ""))

    @property
    def user_text(self) -> str:
        return echo(self.body)


@dataclass(frozen=True)
class _Fail:
    status: int
    retry_after: float | None


@dataclass(frozen=True)
class _Delay:
    seconds: float


class FakeAnthropic:
    def __init__(
        self, responder: Responder = echo, *, api_key: str | None = None, served_model: str | None = None
    ) -> None:
        """`api_key` set: only that key is accepted; unset: any non-empty key is.

        `served_model` set: responses name it instead of the requested model, as the real API answers an
        alias with a dated snapshot.
        """
        self._responder = responder
        self._api_key = api_key
        self._served_model = served_model
        self._lock = threading.Lock()  # requests and script are touched by the server thread and the test
        self._requests: list[RecordedRequest] = []
        self._script: deque[_Fail | _Delay] = deque()
        self._ids = itertools.count(1)
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    # --- what tests use ---

    @property
    def base_url(self) -> str:
        """The API root, without `/v1`: the SDK appends `/v1/messages` itself."""
        if self._sock is None:
            raise RuntimeError("FakeAnthropic is not started")
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, rejected ones and unknown paths included, oldest first."""
        with self._lock:
            return list(self._requests)

    def fail_next(self, n: int, status: int = 500, *, retry_after: float | None = None) -> None:
        """Answer the next `n` valid requests with `status` and the API's error envelope.

        `retry_after` (seconds, fractions allowed so tests stay fast) is sent as the `retry-after`
        header, which the SDK obeys instead of its own backoff.
        """
        with self._lock:
            self._script.extend(_Fail(status, retry_after) for _ in range(n))

    def delay_next(self, n: int, seconds: float) -> None:
        """Hold each of the next `n` valid requests for `seconds` before answering normally."""
        with self._lock:
            self._script.extend(_Delay(seconds) for _ in range(n))

    # --- lifecycle ---

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        # Bound here, in the caller's thread, so the port is known before the server thread runs.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._thread = threading.Thread(target=self._run, name="fake-anthropic", daemon=True)
        self._thread.start()
        if not self._ready.wait(_THREAD_DEADLINE_S):
            raise RuntimeError("FakeAnthropic did not start in time")
        if self._startup_error is not None:
            raise RuntimeError("FakeAnthropic failed to start") from self._startup_error

    def stop(self) -> None:
        if self._thread is None:
            return
        if self._loop is not None and self._stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(_THREAD_DEADLINE_S)
        if self._sock is not None:
            self._sock.close()
        if self._thread.is_alive():
            raise RuntimeError("FakeAnthropic did not stop in time")
        self._thread = None

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as err:  # noqa: BLE001 - reported to start(), which waits on _ready
            self._startup_error = err
            self._ready.set()

    async def _serve(self) -> None:
        assert self._sock is not None
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        # handler_cancellation: a client that timed out and hung up ends its handler, as on a real server.
        runner = web.AppRunner(
            app, access_log=None, shutdown_timeout=_SHUTDOWN_GRACE_S, handler_cancellation=True
        )
        await runner.setup()
        try:
            await web.SockSite(runner, self._sock).start()
            self._ready.set()
            await self._stopping.wait()
        finally:
            await runner.cleanup()

    # --- the API ---

    async def _record(self, request: web.Request) -> tuple[RecordedRequest, object]:
        """Keeps the request for the test; also returns the parsed body, None when it was not JSON."""
        try:
            parsed = json.loads(await request.read())
        except ValueError:
            parsed = None
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        recorded = RecordedRequest({k.lower(): v for k, v in request.headers.items()}, body, request.path)
        with self._lock:
            self._requests.append(recorded)
        return recorded, parsed

    async def _messages(self, request: web.Request) -> web.Response:
        recorded, parsed = await self._record(request)
        body = recorded.body

        # Checked in the real API's order; a rejected request does not use up a scripted failure or delay.
        if recorded.api_key is None:
            return _error(401, "x-api-key header is required")
        if self._api_key is not None and recorded.api_key != self._api_key:
            return _error(401, "invalid x-api-key")
        if "anthropic-version" not in recorded.headers:
            return _error(400, "anthropic-version: header is required")
        if not isinstance(parsed, dict):
            return _error(400, "request body must be a JSON object")
        for name in ("model", "max_tokens", "messages"):
            if name not in body:
                return _error(400, f"{name}: Field required")
        if not isinstance(body["messages"], list) or not body["messages"]:
            return _error(400, "messages: at least one message is required")

        with self._lock:
            action = self._script.popleft() if self._script else None
        if isinstance(action, _Fail):
            return _error(action.status, f"scripted {action.status}", retry_after=action.retry_after)
        if isinstance(action, _Delay):
            await self._sleep(action.seconds)

        try:
            text = self._responder(body)
        except Exception as err:  # noqa: BLE001 - shown as the API's own 500, so the test sees why
            return _error(500, f"responder failed: {err!r}")
        input_words = _word_count(recorded.system) + sum(
            _word_count(_text_of(m.get("content"))) for m in body["messages"] if isinstance(m, dict)
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
                "usage": {"input_tokens": input_words, "output_tokens": _word_count(text)},
            },
            headers={"request-id": f"req_fake_{n:06d}"},
        )

    async def _not_found(self, request: web.Request) -> web.Response:
        await self._record(request)
        return _error(404, f"{request.method} {request.path} does not exist")

    async def _sleep(self, seconds: float) -> None:
        # Wakes early when the fake stops, so a long scripted delay never holds up a test's teardown.
        assert self._stopping is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)


def _error(status: int, message: str, *, retry_after: float | None = None) -> web.Response:
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    error = {"type": ERROR_TYPES.get(status, "api_error"), "message": message}
    return web.json_response({"type": "error", "error": error}, status=status, headers=headers)
