"""The plumbing shared by the fake APIs: recorded requests, a script of failures and delays, and (for the HTTP
ones) an aiohttp server on loopback.

`ScriptedFake` is what every fake, HTTP or gRPC, shares: the requests it recorded, and the failures and delays a
test scripts with `fail_next` and `delay_next`, played back one per valid request.

A `LoopbackFake` serves aiohttp on its own event loop in a background thread: a sync test, an async test (whose
loop it never blocks) and another process all reach it the same way, at its `base_url`. A subclass names itself,
adds its routes and builds its API's error body; this class starts and stops the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

from aiohttp import web

# Seconds the server thread may take to start or stop before the test is told it is stuck.
_THREAD_DEADLINE_S = 10.0
# Seconds in-flight handlers get to finish when the fake stops; delayed ones are woken at once anyway.
_SHUTDOWN_GRACE_S = 1.0

R = TypeVar("R")  # the subclass's RecordedRequest
F = TypeVar("F")  # how the subclass's API fails a request


@dataclass(frozen=True)
class Delay:
    seconds: float


class ScriptedFake(Generic[R, F]):
    """Recorded requests and the script of failures (``F``, the API's own kind) and delays, both thread-safe."""

    def __init__(self) -> None:
        # Requests, script and any state a subclass guards with it are touched by the server's threads and the test.
        self._lock = threading.Lock()
        self._recorded = threading.Condition(self._lock)  # notified with each request recorded
        self._requests: list[R] = []
        self._script: deque[F | Delay] = deque()

    @property
    def requests(self) -> list[R]:
        """Every request received that the fake recorded, oldest first."""
        with self._lock:
            return list(self._requests)

    async def received(self, n: int, *, within: float = 10.0) -> list[R]:
        """The requests once at least `n` have been recorded, or those recorded when `within` seconds have passed.

        A client that gave up (a timeout) has sent its request, but the fake's thread may read it only later
        on a loaded machine: a test counting what the client sent waits here rather than reading `requests`.
        """

        def wait() -> list[R]:
            with self._recorded:
                self._recorded.wait_for(lambda: len(self._requests) >= n, timeout=within)
                return list(self._requests)

        return await asyncio.to_thread(wait)

    def delay_next(self, n: int, seconds: float) -> None:
        """Hold each of the next `n` valid requests for `seconds` before answering normally."""
        self._push(Delay(seconds), n)

    def clear_script(self) -> None:
        """Forget the failures and delays not played yet: answer normally from now on."""
        with self._lock:
            self._script.clear()

    def _push(self, action: F | Delay, n: int) -> None:
        with self._lock:
            self._script.extend(action for _ in range(n))

    def _next_action(self) -> F | Delay | None:
        """The scripted action for a valid request (a rejected one does not use one up), None when none is left."""
        with self._lock:
            return self._script.popleft() if self._script else None

    def _record(self, recorded: R) -> None:
        with self._recorded:
            self._requests.append(recorded)
            self._recorded.notify_all()

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@dataclass(frozen=True)
class HttpRecord:
    """An HTTP request as a fake keeps it; each fake's RecordedRequest adds its API's views of it."""

    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any]  # the parsed JSON body, {} when it was not a JSON object
    path: str = ""
    query: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Fail:
    status: int
    retry_after: float | None


class LoopbackFake(ScriptedFake[R, _Fail]):
    #: The class's name as tests know it, e.g. "FakeVoyage": in errors, and (as "fake-voyage") the thread's name.
    name: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None

    # --- what subclasses provide ---

    def routes(self, app: web.Application) -> None:
        """Add the API's routes, and a catch-all for unknown paths, to `app`."""
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The JSON body the real API sends with an error `status`."""
        raise NotImplementedError

    # --- what tests use ---

    def fail_next(self, n: int, status: int = 500, *, retry_after: float | None = None) -> None:
        """Answer the next `n` valid requests with `status` and the API's error body.

        `retry_after` (seconds, fractions allowed so tests stay fast) is sent as the `retry-after`
        header, which the SDK obeys instead of its own backoff.
        """
        self._push(_Fail(status, retry_after), n)

    def stall(self, seconds: float) -> None:
        """Keep the server's thread busy for `seconds` from now, reading nothing: a loaded machine."""
        if self._loop is None:
            raise RuntimeError(f"{self.name} is not running")
        self._loop.call_soon_threadsafe(time.sleep, seconds)

    # --- lifecycle ---

    def start(self) -> None:
        # Bound here, in the caller's thread, so the port is known before the server thread runs.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        thread_name = "fake-" + self.name.removeprefix("Fake").lower()
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self._thread.start()
        if not self._ready.wait(_THREAD_DEADLINE_S):
            raise RuntimeError(f"{self.name} did not start in time")
        if self._startup_error is not None:
            raise RuntimeError(f"{self.name} failed to start") from self._startup_error

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
            raise RuntimeError(f"{self.name} did not stop in time")
        self._thread = None

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as err:
            self._startup_error = err
            self._ready.set()

    async def _serve(self) -> None:
        assert self._sock is not None
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        app = web.Application()
        self.routes(app)
        # handler_cancellation: a client that timed out and hung up ends its handler, as on a real server.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=_SHUTDOWN_GRACE_S, handler_cancellation=True)
        await runner.setup()
        try:
            await web.SockSite(runner, self._sock).start()
            self._ready.set()
            await self._stopping.wait()
        finally:
            await runner.cleanup()

    # --- helpers for the subclass's handlers ---

    @property
    def _root_url(self) -> str:
        """`http://127.0.0.1:<port>`, with no path."""
        if self._sock is None:
            raise RuntimeError(f"{self.name} is not started")
        host, port = self._sock.getsockname()[:2]
        return f"http://{host}:{port}"

    @staticmethod
    async def _read_json(request: web.Request) -> object:
        """The parsed request body, None when it was not JSON."""
        try:
            return json.loads(await request.read())
        except ValueError:
            return None

    async def _record_request(
        self, request: web.Request, record: Callable[[dict[str, str], dict[str, Any], str, dict[str, str]], R]
    ) -> tuple[R, object]:
        """Keeps ``record(headers, body, path, query)`` for the test; also returns the parsed body, None when it
        was not JSON."""
        parsed = await self._read_json(request)
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        recorded = record({k.lower(): v for k, v in request.headers.items()}, body, request.path, dict(request.query))
        self._record(recorded)
        return recorded, parsed

    async def _scripted(self) -> web.Response | None:
        """Plays the next scripted action: a failure's response, or None once a delay (or nothing) is done.

        Called only for a valid request, so a rejected one does not use up a scripted failure or delay.
        """
        action = self._next_action()
        if isinstance(action, _Fail):
            return self._error(action.status, f"scripted {action.status}", retry_after=action.retry_after)
        if isinstance(action, Delay):
            await self._sleep(action.seconds)
        return None

    def _error(self, status: int, message: str, *, retry_after: float | None = None) -> web.Response:
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        return web.json_response(self.error_body(status, message), status=status, headers=headers)

    async def _sleep(self, seconds: float) -> None:
        # Wakes early when the fake stops, so a long scripted delay never holds up a test's teardown.
        assert self._stopping is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)


def word_count(text: str) -> int:
    """Words stand in for tokens: tests need counts that are stable and predictable, not exact."""
    return len(text.split())


def text_of_blocks(content: object) -> str:
    """Chat content is a string or a list of typed blocks (Anthropic, OpenAI); only text ones count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""
