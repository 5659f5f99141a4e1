"""GET /events' hub: scoped fan-out, Last-Event-ID resume (from the ring and from the topic),
heartbeats, and a slow client dropped without holding up the others; then the route over HTTP."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import httpx
import uvicorn

from memstream.auth import TokenStore, user_principal
from memstream.identity import project_key, user_key
from memstream.schemas import MemoryUpdated
from memstream.serve.events import EventHub, Positions, Record, format_id, parse_id
from tests.unit.factories import memory

A, B = "/repos/alpha", "/repos/beta"
ALICE = user_principal("alice@example.com", [A])
BOB = user_principal("bob@example.com", [B])


def updated(n: int, scope_key: str) -> MemoryUpdated:
    return MemoryUpdated(
        change="created",
        memory=memory(f"m{n}", text=f"memory number {n}", scope_key=scope_key),
        op_id=f"op{n}",
        ts=datetime(2026, 1, 1, 0, 0, n % 60, tzinfo=UTC),
    )


class FakeSource:
    """The topic: ``history`` is what it already holds; ``push`` appends a live record."""

    def __init__(self, partitions: int = 2, history: list[Record] | None = None) -> None:
        self.history = list(history or [])
        self.partitions = partitions
        self.queue: asyncio.Queue[Record] = asyncio.Queue()
        self.ranges: list[tuple[Positions, Positions]] = []
        self.next = {p: 0 for p in range(partitions)}
        for record in self.history:
            self.next[record.partition] = record.offset + 1

    async def start(self) -> Positions:
        return dict(self.next)

    async def live(self) -> AsyncIterator[Record]:
        while True:
            yield await self.queue.get()

    async def read_range(self, starts: Positions, ends: Positions) -> list[Record]:
        self.ranges.append((dict(starts), dict(ends)))
        return [
            r
            for r in self.history
            if starts.get(r.partition, ends.get(r.partition, 0)) <= r.offset < ends.get(r.partition, 0)
        ]

    async def stop(self) -> None:
        return None

    def push(self, partition: int, event: MemoryUpdated) -> Record:
        record = Record(partition, self.next[partition], event)
        self.next[partition] += 1
        self.history.append(record)
        self.queue.put_nowait(record)
        return record


async def take(stream: AsyncIterator[bytes], count: int, timeout: float = 5.0) -> list[dict[str, str]]:
    """The next ``count`` messages (events, heartbeats), each as its fields; a chunk may hold several."""
    out: list[dict[str, str]] = []
    while len(out) < count:
        chunk = (await asyncio.wait_for(anext(stream), timeout)).decode()
        for message in chunk.split("\n\n"):
            if not message.strip() or message.startswith("retry:"):
                continue
            fields: dict[str, str] = {}
            for line in message.strip().splitlines():
                name, _, value = line.partition(":")
                fields[name or "comment"] = value.strip()
            out.append(fields)
    return out


def test_ids_round_trip_and_foreign_ids_are_ignored() -> None:
    assert parse_id(format_id({1: 7, 0: 12})) == {0: 12, 1: 7}
    assert format_id({1: 7, 0: 12}) == "0:12,1:7"
    for bad in ("", "abc", "0:x", "0:1,,1:2", "-1:3", "0:" + "9" * 50):
        assert parse_id(bad) is None


async def test_each_caller_gets_only_the_events_of_its_scopes() -> None:
    source = FakeSource()
    hub = EventHub(source)
    alice, bob = await hub.open_stream(ALICE, None), await hub.open_stream(BOB, None)
    # Subscribed (the first chunk, the retry hint, is yielded once registered).
    await anext(alice), await anext(bob)
    source.push(0, updated(1, project_key(B)))
    source.push(1, updated(2, project_key(A)))
    source.push(0, updated(3, user_key("alice@example.com")))
    source.push(1, updated(4, user_key("bob@example.com")))
    got_alice = await take(alice, 2)
    got_bob = await take(bob, 2)
    assert [json.loads(m["data"])["op_id"] for m in got_alice] == ["op2", "op3"]
    assert [json.loads(m["data"])["op_id"] for m in got_bob] == ["op1", "op4"]
    # The id is the caller's position after the event, every partition's, skipped events included.
    assert got_alice[-1]["id"] == "0:2,1:1"
    await hub.stop()


async def test_a_resume_gets_what_it_missed_from_the_ring_and_then_live_events() -> None:
    source = FakeSource()
    hub = EventHub(source)
    first = await hub.open_stream(ALICE, None)
    await anext(first)
    for n in range(1, 3):
        source.push(n % 2, updated(n, project_key(A)))
    seen = await take(first, 2)
    await first.aclose()  # the connection drops after two events, then three more are made
    for n in range(3, 6):
        source.push(n % 2, updated(n, project_key(A)))
    await _until(lambda: hub.held == 5)
    resumed = await hub.open_stream(ALICE, seen[-1]["id"])
    missed = await take(resumed, 3)
    assert [json.loads(m["data"])["op_id"] for m in missed] == ["op3", "op4", "op5"]
    source.push(0, updated(6, project_key(A)))
    assert json.loads((await take(resumed, 1))[0]["data"])["op_id"] == "op6"
    assert source.ranges == []  # the ring held it all: the topic was not read again
    await hub.stop()


async def test_a_resume_older_than_the_ring_reads_the_topic_first() -> None:
    history = [Record(0, n, updated(n, project_key(A))) for n in range(10)]
    source = FakeSource(partitions=1, history=history)
    hub = EventHub(source, ring=3)
    live = await hub.open_stream(ALICE, None)
    await anext(live)
    for n in range(10, 15):
        source.push(0, updated(n, project_key(A)))
    await take(live, 5)
    resumed = await hub.open_stream(ALICE, "0:4")
    got = [json.loads(m["data"])["op_id"] for m in await take(resumed, 11)]
    assert got == [f"op{n}" for n in range(4, 15)]
    assert source.ranges == [({0: 4}, {0: 12})]  # the ring holds 12..14
    await hub.stop()


async def test_a_quiet_stream_sends_heartbeats() -> None:
    hub = EventHub(FakeSource(), heartbeat_s=0.05)
    stream = await hub.open_stream(ALICE, None)
    beats = await take(stream, 2)
    assert all(b == {"comment": "heartbeat"} for b in beats)
    await hub.stop()


async def test_a_slow_client_is_dropped_and_the_others_keep_up() -> None:
    source = FakeSource()
    hub = EventHub(source, client_buffer=5)
    slow, fast = await hub.open_stream(ALICE, None), await hub.open_stream(ALICE, None)
    await anext(slow), await anext(fast)
    received: list[str] = []

    async def read_fast() -> None:
        async for chunk in fast:
            received.extend(m for m in chunk.decode().split("\n\n") if m.startswith("id:"))
            if len(received) == 50:
                return

    reader = asyncio.create_task(read_fast())
    for n in range(50):
        source.push(0, updated(n, project_key(A)))
        # The fast client reads each as it comes; the slow one reads nothing.
        await _until(partial(lambda count: len(received) > count, n))
    await asyncio.wait_for(reader, 5)
    assert hub.dropped == 1 and hub.clients == 1
    # The slow client gets what it had buffered, then the notice that it was dropped, and its stream ends.
    rest = [m for chunk in [c async for c in slow] for m in chunk.decode().split("\n\n") if m]
    assert rest[-1].startswith("event: dropped")
    # What it had buffered, sent in one write (the burst), then the notice.
    assert len([m for m in rest if m.startswith("id:")]) == 5
    await hub.stop()


async def _until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    """Wait for ``check`` to hold, failing at the deadline."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {check}")
        await asyncio.sleep(0.001)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_route_streams_over_http_to_a_token_holder_only(tmp_path: Path) -> None:
    from memstream.front.app import create_app
    from memstream.ports import Providers
    from memstream.serve.context import ApiContext
    from memstream.settings import Settings

    source = FakeSource()
    hub = EventHub(source)
    tokens = TokenStore(tmp_path / "tokens.json")
    alice_token, _ = tokens.create(ALICE)
    settings = Settings.from_env({}, data_dir=tmp_path)
    providers = Providers(settings=settings, embedder=None, store=None, llm=None, history=None)  # type: ignore[arg-type]
    app = create_app(ApiContext(providers=providers, tokens=tokens, events=hub, mcp=False))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(server.serve())
    try:
        await _until(lambda: server.started)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            refused = await client.get("/events")
            assert refused.status_code == 401
            headers = {"Authorization": f"Bearer {alice_token}"}
            async with client.stream("GET", "/events", headers=headers) as response:
                assert response.status_code == 200
                assert response.headers["content-type"].startswith("text/event-stream")
                lines = response.aiter_lines()
                await _until(lambda: hub.clients > 0)
                source.push(1, updated(1, project_key(B)))
                source.push(1, updated(2, project_key(A)))
                data = None
                while data is None:
                    line = await asyncio.wait_for(anext(lines), 5)
                    if line.startswith("data:"):
                        data = json.loads(line[5:])
                assert data["op_id"] == "op2"
    finally:
        server.should_exit = True
        await serving
