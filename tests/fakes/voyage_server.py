"""A fake Voyage AI embeddings API on loopback, speaking the real wire protocol so tests exercise the real SDK.

    with FakeVoyage(api_key="pa-test") as fake:
        embedder = VoyageEmbedder("pa-test", base_url=fake.base_url)

It serves aiohttp on its own event loop in a background thread: a sync test, an async test (whose loop it
never blocks) and another process all reach it the same way, at `base_url`. Only `POST /v1/embeddings` exists.

Vectors are unit length, derived from a hash of the text alone (not of `input_type`), so identical text gives
an identical vector and distinct texts are nearly orthogonal; `pin` sets a text's vector when a test needs
two texts at a chosen distance.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import socket
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import numpy as np
from aiohttp import web

DEFAULT_DIM = 1024
#: Texts per request the fake accepts: the limit the SDK (VOYAGE_EMBED_BATCH_SIZE) and memstream batch to.
MAX_BATCH = 128
_DIMENSIONS = (256, 512, 1024, 2048)
# Seconds the server thread may take to start or stop before the test is told it is stuck.
_THREAD_DEADLINE_S = 10.0
# Seconds in-flight handlers get to finish when the fake stops; delayed ones are woken at once anyway.
_SHUTDOWN_GRACE_S = 1.0


def fake_vector(text: str, dim: int = DEFAULT_DIM) -> list[float]:
    """The vector the fake returns for `text`, for tests that compare against it."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    unit: list[float] = (v / np.linalg.norm(v)).tolist()
    return unit


@dataclass(frozen=True)
class RecordedRequest:
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]  # the parsed JSON body, {} when it was not a JSON object

    @property
    def api_key(self) -> str | None:
        return self.headers.get("authorization", "").removeprefix("Bearer ").strip() or None

    @property
    def model(self) -> str | None:
        return self.body.get("model")

    @property
    def input_type(self) -> str | None:
        return self.body.get("input_type")

    @property
    def texts(self) -> list[str]:
        raw = self.body.get("input")
        return [raw] if isinstance(raw, str) else list(raw or [])

    @property
    def batch_size(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class _Fail:
    status: int
    retry_after: float | None


@dataclass(frozen=True)
class _Delay:
    seconds: float


class FakeVoyage:
    def __init__(self, *, api_key: str | None = None, max_batch: int = MAX_BATCH) -> None:
        """`api_key` set: only that key is accepted; unset: any non-empty key is."""
        self._api_key = api_key
        self._max_batch = max_batch
        self._lock = threading.Lock()  # requests, script and pins are touched by the server thread and the test
        self._requests: list[RecordedRequest] = []
        self._script: deque[_Fail | _Delay] = deque()
        self._pinned: dict[str, list[float]] = {}
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    # --- what tests use ---

    @property
    def base_url(self) -> str:
        """The API root including `/v1`: the SDK appends only `/embeddings`."""
        if self._sock is None:
            raise RuntimeError("FakeVoyage is not started")
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, rejected ones included, oldest first."""
        with self._lock:
            return list(self._requests)

    def fail_next(self, n: int, status: int = 500, *, retry_after: float | None = None) -> None:
        """Answer the next `n` valid requests with `status` and the API's `{"detail": ...}` error body.

        `retry_after` is sent as the `retry-after` header, in seconds (fractions allowed so tests stay fast).
        """
        with self._lock:
            self._script.extend(_Fail(status, retry_after) for _ in range(n))

    def delay_next(self, n: int, seconds: float) -> None:
        """Hold each of the next `n` valid requests for `seconds` before answering normally."""
        with self._lock:
            self._script.extend(_Delay(seconds) for _ in range(n))

    def pin(self, text: str, vector: Sequence[float]) -> None:
        """Return `vector` (normalised here) for `text` instead of its hash-derived one."""
        v = np.asarray(vector, dtype=np.float32)
        with self._lock:
            self._pinned[text] = (v / np.linalg.norm(v)).tolist()

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
        self._thread = threading.Thread(target=self._run, name="fake-voyage", daemon=True)
        self._thread.start()
        if not self._ready.wait(_THREAD_DEADLINE_S):
            raise RuntimeError("FakeVoyage did not start in time")
        if self._startup_error is not None:
            raise RuntimeError("FakeVoyage failed to start") from self._startup_error

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
            raise RuntimeError("FakeVoyage did not stop in time")
        self._thread = None

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as err:  # reported to start(), which is waiting on _ready
            self._startup_error = err
            self._ready.set()

    async def _serve(self) -> None:
        assert self._sock is not None
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        # handler_cancellation: a client that timed out and hung up ends its handler, as on a real server.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_GRACE_S, handler_cancellation=True)
        await runner.setup()
        try:
            await web.SockSite(runner, self._sock).start()
            self._ready.set()
            await self._stopping.wait()
        finally:
            await runner.cleanup()

    # --- the API ---

    async def _embeddings(self, request: web.Request) -> web.Response:
        try:
            parsed = json.loads(await request.read())
        except ValueError:
            parsed = None
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        recorded = RecordedRequest({k.lower(): v for k, v in request.headers.items()}, body)
        with self._lock:
            self._requests.append(recorded)

        # A rejected request does not use up a scripted failure or delay.
        if recorded.api_key is None or (self._api_key is not None and recorded.api_key != self._api_key):
            return _error(401, "Provided API key is invalid.")
        problem = self._invalid(parsed)
        if problem:
            return _error(400, problem)

        with self._lock:
            action = self._script.popleft() if self._script else None
        if isinstance(action, _Fail):
            return _error(action.status, f"scripted {action.status}", retry_after=action.retry_after)
        if isinstance(action, _Delay):
            await self._sleep(action.seconds)

        dim = body.get("output_dimension") or DEFAULT_DIM
        with self._lock:
            vectors = [self._pinned.get(t) or fake_vector(t, dim) for t in recorded.texts]
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {"object": "embedding", "embedding": _b64(v) if as_base64 else v, "index": i} for i, v in enumerate(vectors)
        ]
        # Words stand in for tokens: tests need counts that are stable and predictable, not exact.
        tokens = sum(len(t.split()) for t in recorded.texts)
        return web.json_response(
            {"object": "list", "data": data, "model": body["model"], "usage": {"total_tokens": tokens}}
        )

    def _invalid(self, parsed: object) -> str | None:
        """The real API's 400 reasons that a test of memstream could plausibly trip."""
        if not isinstance(parsed, dict):
            return "Request body must be a JSON object."
        if not isinstance(parsed.get("model"), str):
            return "Field 'model' is required."
        texts = parsed.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return "Field 'input' must be a string or a non-empty list of strings."
        if len(texts) > self._max_batch:
            return f"The batch size limit is {self._max_batch}. Your batch size is {len(texts)}."
        if parsed.get("input_type") not in (None, "query", "document"):
            return "Field 'input_type' must be null, 'query' or 'document'."
        if parsed.get("output_dtype") not in (None, "float"):
            return "This fake only serves output_dtype 'float'."
        if parsed.get("encoding_format") not in (None, "base64"):
            return "Field 'encoding_format' must be null or 'base64'."
        if parsed.get("output_dimension") not in (None, *_DIMENSIONS):
            return f"Field 'output_dimension' must be one of {_DIMENSIONS}."
        return None

    async def _not_found(self, request: web.Request) -> web.Response:
        return _error(404, "Not Found")

    async def _sleep(self, seconds: float) -> None:
        # Wakes early when the fake stops, so a long scripted delay never holds up a test's teardown.
        assert self._stopping is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)


def _b64(vector: list[float]) -> str:
    # What the SDK asks for by default: little-endian float32 bytes, base64-encoded.
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


def _error(status: int, detail: str, *, retry_after: float | None = None) -> web.Response:
    headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
    return web.json_response({"detail": detail}, status=status, headers=headers)
