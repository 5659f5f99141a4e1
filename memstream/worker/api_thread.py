"""The HTTP API on a thread and event loop of its own, listening for as long as `memstream up` runs.

The pipeline's API (``memstream.front.app``: search, block, MCP, events, the console) is an ASGI app
whose sinks send on the worker's producer, so it runs on the worker's loop. Its socket does not:
:class:`ApiThread` holds it on its own thread, with uvicorn on its own loop, and hands each request
over to the app of the worker running now (:meth:`ApiThread.attach`), on that worker's loop
(``asyncio.run_coroutine_threadsafe``); every ``receive`` and ``send`` crosses back to the API's loop
the same way, so a streamed answer (``/events``, MCP's streamable HTTP) streams as before. The scope
is handed over as uvicorn made it: the guard sees the real client address.

When the worker stops to be started afresh (``memstream.worker.recycle``, issue 35.7), the socket
stays open: a request that comes meanwhile waits for the next worker, at most :data:`WAIT_SECONDS`,
then answers 503 — it is never refused. The app's lifespan (MCP's session manager, the event hub)
is entered on the worker's loop when it is attached and left when it is detached, as uvicorn did
when the worker served it itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: uvicorn's options. No proxy headers: uvicorn would take X-Forwarded-For from any loopback peer as
#: the client's address; the guard reads it only from MEMSTREAM_TRUSTED_PROXIES (memstream.serve.guard).
UVICORN_OPTIONS: dict[str, Any] = {"access_log": False, "log_level": "warning", "proxy_headers": False}
#: How long a request waits for a worker while none is attached (a broker started afresh takes ~7 s
#: idle, longer on a loaded machine), before it is answered 503.
WAIT_SECONDS = 30.0
#: How long a detach lets the requests under way finish before the app's lifespan is left (which
#: ends the event streams and MCP's sessions), and then again before what is left is cancelled.
FINISH_SECONDS = 2.0
#: How long leaving the app's lifespan may take.
LIFESPAN_SECONDS = 5.0
#: How long :meth:`ApiThread.close` waits for the server's thread (uvicorn's graceful shutdown included).
CLOSE_SECONDS = 5.0
#: How long :meth:`ApiThread.open` waits for the socket.
LISTEN_SECONDS = 30.0


#: How long a thread may hold the GIL while another waits for it, while the API's thread runs (Python's
#: default is 5 ms). The API's loop needs the GIL at every wake-up (a socket ready, an executor's answer:
#: the query embedding, each store call), and during a backlog the worker's loop holds it for Python work
#: half the time (py-spy, a 600-exchange backlog): each wake-up waited up to 5 ms. Five executor hops
#: next to a pure-Python thread took 53-64 ms (p50) at 5 ms and 17-28 ms at 1 ms (load ~17, 2 cores).
#: The embedder and the store run their C code without the GIL, so the pipeline loses nothing it needs.
SWITCH_INTERVAL_S = 0.001


#: The reads answered on the API's own loop when a reads app is attached (issue 42): a search, a block or
#: an MCP call does not wait for the worker's loop, busy with a backlog; what they send (usage, MCP's
#: writes) still goes through the worker's loop (memstream.worker.app.reads_context).
READ_PATHS = frozenset({"/search", "/block", "/mcp", "/mcp/"})


class _Retry(Exception):
    """The worker was detached before the request reached it: ask the next one."""


@dataclass(eq=False)
class _Worker:
    """An attached app, on its loop, with the requests it is handling."""

    app: ASGIApp
    loop: asyncio.AbstractEventLoop
    open: bool = True
    handling: set[asyncio.Task[Any]] = field(default_factory=set)
    lifespan: _Lifespan | None = None
    #: The app for :data:`READ_PATHS`, served on the API's own loop, and the requests it is handling there.
    reads: ASGIApp | None = None
    reads_lifespan: _Lifespan | None = None
    reading: set[asyncio.Task[Any]] = field(default_factory=set)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """On the worker's loop."""
        if not self.open:  # detached between the API thread's look and now: nothing was read or sent yet
            raise _Retry
        task = asyncio.current_task()
        assert task is not None
        self.handling.add(task)
        try:
            await self.app(scope, receive, send)
        finally:
            self.handling.discard(task)


class _Lifespan:
    """An ASGI app's lifespan, entered and left in one task of the running loop (anyio's task groups,
    which MCP's session manager opens, must be left by the task that entered them)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._to_app: asyncio.Queue[Message] = asyncio.Queue()
        self._from_app: asyncio.Queue[Message] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def enter(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        self._task = asyncio.create_task(_awaited(self._app(scope, self._to_app.get, self._from_app.put)))
        self._to_app.put_nowait({"type": "lifespan.startup"})
        answer = await self._answer()
        if answer is not None and answer["type"] != "lifespan.startup.complete":
            await self.leave()
            raise RuntimeError(f"the API's lifespan did not start: {answer.get('message', answer['type'])}")

    async def leave(self) -> None:
        task = self._task
        if task is None:
            return
        self._task = None
        if not task.done():
            self._to_app.put_nowait({"type": "lifespan.shutdown"})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._answer(task), LIFESPAN_SECONDS)
        if not task.done():
            task.cancel()
        await asyncio.wait({task}, timeout=LIFESPAN_SECONDS)
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.warning("the API's lifespan ended with an error", exc_info=task.exception())

    async def _answer(self, task: asyncio.Task[None] | None = None) -> Message | None:
        """The app's next lifespan message; None when it ended without one (an app without a lifespan)."""
        task = task or self._task
        assert task is not None
        getting = asyncio.ensure_future(self._from_app.get())
        await asyncio.wait({getting, task}, return_when=asyncio.FIRST_COMPLETED)
        if getting.done():
            return getting.result()
        getting.cancel()
        if task.exception() is not None:
            raise RuntimeError("the API's lifespan failed") from task.exception()
        return None


class ApiThread:
    """Listens on ``host:port`` from :meth:`open` to :meth:`close`, whichever worker is attached."""

    def __init__(self, host: str, port: int, *, wait_seconds: float = WAIT_SECONDS) -> None:
        self.host, self.port, self.wait_seconds = host, port, wait_seconds
        self._worker: _Worker | None = None
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._listening = threading.Event()
        self._failed: BaseException | None = None
        #: Python's switch interval before :meth:`open` set :data:`SWITCH_INTERVAL_S`, restored by :meth:`close`.
        self._switch_interval: float | None = None

    # --- on the worker's loop -----------------------------------------------------------

    async def open(self) -> None:
        """Start the thread and wait until it listens (idempotent)."""
        if self._thread is None:
            import uvicorn

            config = uvicorn.Config(
                self, host=self.host, port=self.port, lifespan="off", loop="none", log_config=None, **UVICORN_OPTIONS
            )
            listening = self._listening

            class Server(uvicorn.Server):
                async def startup(self, sockets: Any = None) -> None:
                    await super().startup(sockets)  # exits (SystemExit) when it cannot listen
                    listening.set()

            self._server = Server(config)
            self._switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL_S))
            self._thread = threading.Thread(target=self._run, name="memstream-api", daemon=True)
            self._thread.start()
        await asyncio.to_thread(self._listening.wait, LISTEN_SECONDS)
        if self._failed is not None or not self._listening.is_set() or not self._server.started:
            raise RuntimeError(f"the HTTP API could not listen on {self.host}:{self.port}") from self._failed

    async def attach(self, app: ASGIApp, reads: ASGIApp | None = None) -> None:
        """Serve ``app`` on the running loop (its lifespan entered first), listening if not yet; and
        ``reads``, if given, for :data:`READ_PATHS` on the API's own loop."""
        lifespan = _Lifespan(app)
        await lifespan.enter()
        worker = _Worker(app, asyncio.get_running_loop(), lifespan=lifespan, reads=reads)
        try:
            await self.open()
            if reads is not None:
                worker.reads_lifespan = _Lifespan(reads)
                await self._on_api_loop(worker.reads_lifespan.enter())
        except BaseException:
            await self._leave(worker)
            raise
        self._worker = worker
        self._notify()

    async def detach(self) -> None:
        """Stop handing requests to the attached app: new ones wait for the next; those under way get
        :data:`FINISH_SECONDS`, then the lifespans are left, then they are cancelled. On the app's loop."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        worker.open = False
        self._notify()
        await self._leave(worker)

    async def _leave(self, worker: _Worker) -> None:
        if worker.reads_lifespan is not None:
            with contextlib.suppress(RuntimeError, TimeoutError):  # the API's loop is gone: nothing runs there
                await self._on_api_loop(_finish(worker.reading, worker.reads_lifespan))
        await _finish(worker.handling, worker.lifespan)

    async def _on_api_loop(self, work: Awaitable[T]) -> T:
        loop = self._loop
        if loop is None or loop.is_closed():
            raise RuntimeError("the API's loop is not running")
        done = asyncio.run_coroutine_threadsafe(_awaited(work), loop)
        # Bounded: a thread that died meanwhile would never answer.
        return await asyncio.wait_for(asyncio.wrap_future(done), 2 * (FINISH_SECONDS + LIFESPAN_SECONDS))

    async def close(self) -> None:
        """Stop listening and end the thread, within :data:`CLOSE_SECONDS` or so."""
        await self.detach()
        self._closing = True
        self._notify()
        thread, server = self._thread, self._server
        if thread is None:
            return
        server.should_exit = True
        await asyncio.to_thread(thread.join, CLOSE_SECONDS)
        if thread.is_alive():
            log.warning("the API's thread did not end within %.0fs; leaving it", CLOSE_SECONDS)
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None

    @property
    def serving(self) -> bool:
        return self._worker is not None

    def _notify(self) -> None:
        """Wake the requests waiting for a worker (on the API's loop)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                loop.call_soon_threadsafe(self._changed_now)

    # --- on the API's thread ------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # uvicorn exits (SystemExit) when it cannot listen
            self._failed = exc
            if not self._listening.is_set():
                log.debug("the API could not start", exc_info=True)
            else:
                log.warning("the API's server ended with an error", exc_info=True)
        finally:
            self._listening.set()
            with contextlib.suppress(RuntimeError):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        self._loop, self._changed = asyncio.get_running_loop(), asyncio.Event()
        await self._server.serve()

    def _changed_now(self) -> None:
        assert self._changed is not None
        self._changed.set()
        self._changed = asyncio.Event()

    async def _next_worker(self) -> _Worker | None:
        """The attached worker, waiting up to ``wait_seconds`` for one; None when there is none by then."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_seconds
        while True:
            changed, worker = self._changed, self._worker
            if worker is not None and worker.open:
                return worker
            if self._closing or loop.time() >= deadline or changed is None:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), deadline - loop.time())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """uvicorn's app: hand the request to the attached worker's app, on its loop."""
        api_loop = asyncio.get_running_loop()
        started = False

        async def across_receive() -> Message:  # called on the worker's loop
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_awaited(receive()), api_loop))

        async def across_send(message: Message) -> None:  # called on the worker's loop
            nonlocal started
            started = True
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_awaited(send(message)), api_loop))

        while True:
            worker = await self._next_worker()
            if worker is None:
                break
            if worker.reads is not None and scope["type"] == "http" and scope["path"] in READ_PATHS:
                await _handle_here(worker, scope, receive, send)
                return
            try:
                handled = asyncio.run_coroutine_threadsafe(
                    worker.handle(scope, across_receive, across_send), worker.loop
                )
            except RuntimeError:  # its loop is closed: it is being detached
                await asyncio.sleep(0.05)
                continue
            try:
                await asyncio.wrap_future(handled)
                return
            except _Retry:
                continue
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():  # this request was cancelled (uvicorn stopping)
                    handled.cancel()
                    raise
                if started:  # its worker was detached in the middle of the answer
                    return
                break
        if scope["type"] == "http":
            await _unavailable(send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1013, "reason": "memstream is restarting"})


async def _finish(handling: set[asyncio.Task[Any]], lifespan: _Lifespan | None) -> None:
    """The requests under way get :data:`FINISH_SECONDS`, then ``lifespan`` is left, then they get as
    long again, then what is left is cancelled (on the loop they run on)."""
    if handling:
        await asyncio.wait(set(handling), timeout=FINISH_SECONDS)
    if lifespan is not None:
        await lifespan.leave()
    if handling:
        await asyncio.wait(set(handling), timeout=FINISH_SECONDS)
    for task in set(handling):
        task.cancel()


async def _handle_here(worker: _Worker, scope: Scope, receive: Receive, send: Send) -> None:
    task, reads = asyncio.current_task(), worker.reads
    assert task is not None and reads is not None
    worker.reading.add(task)
    try:
        await reads(scope, receive, send)
    finally:
        worker.reading.discard(task)


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


async def _unavailable(send: Send) -> None:
    body = b'{"error": "memstream is restarting its pipeline; try again"}'
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [(b"content-type", b"application/json"), (b"retry-after", b"5")],
        }
    )
    await send({"type": "http.response.body", "body": body})
