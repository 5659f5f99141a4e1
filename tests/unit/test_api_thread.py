"""memstream.worker.api_thread: the API's socket outlives the app it serves (issue 35.7)."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from memstream.kafka.broker import free_port
from memstream.worker.api_thread import SWITCH_INTERVAL_S, ApiThread


def make_app(name: str, seen: dict[str, object]) -> Starlette:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        seen[f"{name} entered on"] = threading.get_ident()
        yield
        seen[f"{name} left"] = True

    async def who(request: Request) -> JSONResponse:
        seen["handled on"] = threading.get_ident()
        client = request.client
        return JSONResponse({"app": name, "client": client.host if client else None})

    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"app": name, "body": (await request.body()).decode()})

    async def stream(request: Request) -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            for n in range(3):
                yield f"data: {n}\n\n".encode()
                await asyncio.sleep(0.01)

        return StreamingResponse(chunks(), media_type="text/event-stream")

    routes = [Route("/who", who), Route("/echo", echo, methods=["POST"]), Route("/stream", stream)]
    return Starlette(routes=routes, lifespan=lifespan)


def test_requests_reach_the_attached_app_on_its_loop_and_wait_through_a_swap() -> None:
    seen: dict[str, object] = {}
    port = free_port()

    async def scenario() -> None:
        api = ApiThread("127.0.0.1", port)
        await api.attach(make_app("first", seen))
        try:
            here = threading.get_ident()
            assert seen["first entered on"] == here
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                answer = await client.get("/who")
                assert answer.json() == {"app": "first", "client": "127.0.0.1"}
                assert seen["handled on"] == here  # the worker's loop, not the API's thread
                assert (await client.post("/echo", content=b"x" * 100_000)).json()["body"] == "x" * 100_000
                streamed = await client.get("/stream")
                assert streamed.text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"

                await api.detach()  # as a fresh start does: the socket stays, requests wait
                assert seen["first left"] is True
                waiting = asyncio.create_task(client.get("/who"))
                done, _ = await asyncio.wait({waiting}, timeout=0.5)
                assert not done  # waiting, not refused
                await api.attach(make_app("second", seen))
                assert (await waiting).json()["app"] == "second"
        finally:
            await api.close()
        assert seen["second left"] is True
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            try:
                await client.get("/who")
                raise AssertionError("the API still answers after close")
            except httpx.ConnectError:
                pass

    asyncio.run(scenario())


def test_a_request_gets_503_when_no_app_comes_back_in_time() -> None:
    port = free_port()

    async def scenario() -> None:
        api = ApiThread("127.0.0.1", port, wait_seconds=0.2)
        await api.attach(make_app("only", {}))
        await api.detach()
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                answer = await client.get("/who")
                assert answer.status_code == 503
                assert answer.headers["retry-after"] == "5"
        finally:
            await api.close()

    asyncio.run(scenario())


def test_a_port_taken_is_said() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        async def scenario() -> str:
            api = ApiThread("127.0.0.1", port)
            try:
                await api.attach(make_app("only", {}))
            except RuntimeError as exc:
                return str(exc)
            finally:
                await api.close()
            return "attached"

        assert asyncio.run(scenario()) == f"the HTTP API could not listen on 127.0.0.1:{port}"


def test_reads_are_answered_on_the_api_thread_while_the_worker_loop_is_busy() -> None:
    """Issue 42: a search waited for the worker's loop, busy with a backlog. With a reads app attached,
    /search is answered on the API's own loop; the other routes still go to the worker's loop."""
    seen: dict[str, object] = {}
    port = free_port()
    answered = threading.Event()
    answers: list[dict[str, object]] = []

    def search() -> None:
        import json
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/search", timeout=30) as response:
            answers.append(json.loads(response.read()))
        answered.set()

    async def scenario() -> None:
        api = ApiThread("127.0.0.1", port)
        reads = Starlette(routes=[Route("/search", lambda request: JSONResponse({"thread": threading.get_ident()}))])
        await api.attach(make_app("worker", seen), reads)
        try:
            asker = threading.Thread(target=search)
            asker.start()
            # The worker's loop is busy (a backlog's batch): the search is answered meanwhile, elsewhere.
            assert answered.wait(10), "the search waited for the worker's loop"
            asker.join()
            assert answers[0]["thread"] != threading.get_ident()
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                assert (await client.get("/who")).json()["app"] == "worker"
        finally:
            await api.close()

    asyncio.run(scenario())


def test_the_gil_changes_hands_within_a_millisecond_while_the_api_serves() -> None:
    """Issue 42: the API's loop needs the GIL at every wake-up (a socket, the query embedding's answer, each
    store call), and during a backlog the worker's loop held it for up to Python's default 5 ms each time.
    While the API's thread runs, the switch interval is at most SWITCH_INTERVAL_S; closing restores it."""
    before = sys.getswitchinterval()
    port = free_port()

    async def scenario() -> float:
        api = ApiThread("127.0.0.1", port)
        await api.attach(make_app("only", {}))
        try:
            return sys.getswitchinterval()
        finally:
            await api.close()

    assert before > SWITCH_INTERVAL_S  # Python's default, 5 ms
    assert asyncio.run(scenario()) <= SWITCH_INTERVAL_S
    assert sys.getswitchinterval() == before
