"""The console's speed (issue 26, point 8), two measurements:

1. ``pages``: server time of every console page at ``--memories`` synthetic memories (default 10k;
   the issue's figure is at 100k: ``--memories 100000``). The real app (``memstream.front.app`` with the
   console) over an Edge store bulk-loaded as ``bench.perf.store_scaling`` loads it (random unit vectors, real
   BM25 terms), the bundled embedder for queries, a signed-in console session; each page is requested
   ``--requests`` times in process (httpx's ASGI transport: no socket, so the time is the server's).
   Target: every page's p95 < 200 ms at 100k.
2. ``events``: a real pipeline (embedded broker, edge store, raw mode) ingests ``--facts`` facts, once
   with no ``GET /events`` client and once with ``--clients`` clients holding a stream over HTTP and
   reading every event (in a child process, as clients are elsewhere), alternated ``--rounds`` times.
   Throughput is facts over the time from the first publish until every fact has its audit record.
   Target: with 100 clients within 10% of none.

    .venv/bin/python -m bench.read.console [pages|events|all] [--memories 100000] [--clients 100]

Each figure is printed with its comparison and the load average; the machine is shared, so read
the median and p95 beside the load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from qdrant_edge import UpdateOperation

from bench.perf.store_scaling import BULK, _memories, _unit_vectors
from memstream.auth import TokenStore, user_principal
from memstream.identity import project_key
from memstream.schemas import Fact, Provenance

PAGE_TARGET_MS = 200.0
EVENTS_TARGET = 0.10
#: Projects the synthetic memories are spread over (one user may read them all, as the local token can).
PROJECTS = 20
#: The synthetic corpus's random seed.
SEED = 26
#: What a kept corpus (``--corpus``) holds, written beside it once built.
CORPUS_MARKER = "bench-corpus.json"


def _pct(samples_ms: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples_ms), q))


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


async def _build_corpus(store: Any, memories: int, scopes: Sequence[str], index: bool, index_every: int) -> None:
    """Bulk-load the synthetic memories (precomputed random vectors, one shard update per BULK), and build
    the vector index a store taking them one by one would have built every ``index_every`` writes."""
    from memstream.store.edge import _point

    rng = np.random.default_rng(SEED)
    began = time.perf_counter()
    for start in range(0, memories, BULK):
        n = min(BULK, memories - start)
        batch = _memories(rng, start, n, scopes, "console")
        points = [_point(m, v) for m, v in zip(batch, _unit_vectors(rng, n, store.dim).tolist(), strict=True)]
        await store._run(lambda s, p=points: s.update(UpdateOperation.upsert_points(p)))
    await store._run(lambda s: s.flush())
    print(f"loaded {memories} memories over {PROJECTS} projects in {time.perf_counter() - began:.1f} s")
    if index and index_every and memories >= index_every:
        began = time.perf_counter()
        await store.build_index()
        print(f"built the vector index (as every {index_every} writes) in {time.perf_counter() - began:.1f} s")


@contextlib.asynccontextmanager
async def console_app(
    memories: int, index: bool = False, corpus: Path | None = None
) -> AsyncIterator[tuple[httpx.AsyncClient, dict[str, str], Any]]:
    """The real app (signed-in client), the pages to time and the store, over ``memories`` bulk-loaded memories.

    ``corpus``: a data directory kept between runs: built (and indexed) once, then opened as it is (the
    100k corpus with its vector index takes minutes to build on a busy machine, seconds to open)."""
    from memstream.bootstrap import build_providers
    from memstream.front.app import create_app
    from memstream.serve.context import ApiContext
    from memstream.settings import Settings
    from memstream.store.edge import EdgeStore

    with contextlib.ExitStack() as stack:
        if corpus is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="memstream-bench-console-")))
        else:
            data_dir = corpus
        wanted = {"memories": memories, "projects": PROJECTS, "seed": SEED, "indexed": index}
        marker = data_dir / CORPUS_MARKER
        kept = marker.exists() and json.loads(marker.read_text()) == wanted
        if corpus is not None and not kept:
            shutil.rmtree(data_dir, ignore_errors=True)
        data_dir.mkdir(parents=True, exist_ok=True)
        settings = Settings.from_env({}, data_dir=data_dir, graph_enabled=True)
        providers = build_providers(settings)
        await providers.open()
        try:
            store = providers.store
            assert isinstance(store, EdgeStore)
            scopes = [project_key(f"/bench/project-{k}") for k in range(PROJECTS)]
            if kept:
                print(f"opened the corpus in {data_dir}: {json.dumps(wanted)}")
            else:
                await _build_corpus(store, memories, scopes, index, settings.edge_index_every)
            if corpus is not None:
                marker.write_text(json.dumps(wanted))
            tokens = TokenStore(settings.tokens_file)
            token = tokens.create(user_principal("bench@example.com", all_projects=True, admin=True))[0]
            app = create_app(ApiContext(providers=providers, tokens=tokens, mcp=False))
            [some] = await store.list([scopes[0]], limit=1)
            project = scopes[0]
            views: dict[str, str] = {
                "memories (newest, one project)": f"/console/?project={project}",
                "memories (newest, every project)": "/console/",
                "memories (search)": f"/console/?q=how+is+module+m{17}+built&project={project}",
                "memories (search, every project)": "/console/?q=module+target+built",
                "memory": f"/console/memories/{some.id}",
                "sessions": f"/console/sessions?project={project}",
                "sessions (every project)": "/console/sessions",
                "memories (page 2, every project)": "",  # the Next link of the first page, below
                "session": f"/console/sessions/{some.session_id}?project={project}",
                "block": f"/console/block?project={project}",
                "live": "/console/live",
                "stats": "/console/stats",
                "pipeline": "/console/pipeline",
            }
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                code = await client.post("/console/codes", headers={"Authorization": f"Bearer {token}"})
                await client.get(code.json()["path"])
                first_page = (await client.get("/console/")).text
                after = first_page.split('rel="next"')[0].rsplit("after=", 1)[-1].split('"')[0].split("&")[0]
                views["memories (page 2, every project)"] = f"/console/?after={after}"
                yield client, views, store
        finally:
            await providers.close()


async def pages(memories: int, requests: int, index: bool = False, corpus: Path | None = None) -> list[dict[str, Any]]:
    rows = []
    async with console_app(memories, index, corpus) as (client, views, _store):
        for name, path in views.items():
            assert (await client.get(path)).status_code == 200, name  # warm: first touch of the shard
            times, cpu = [], []
            for _ in range(requests):
                began, began_cpu = time.perf_counter(), time.process_time()
                reply = await client.get(path)
                times.append((time.perf_counter() - began) * 1000)
                # The process's CPU (every thread: the event loop and the store's), which the load does not inflate.
                cpu.append((time.process_time() - began_cpu) * 1000)
                assert reply.status_code == 200, (name, reply.status_code)
            rows.append(
                {
                    "page": name,
                    "median_ms": statistics.median(times),
                    "p95_ms": _pct(times, 95),
                    "cpu_median_ms": statistics.median(cpu),
                    "cpu_p95_ms": _pct(cpu, 95),
                    "n": requests,
                }
            )
    return rows


async def profile(memories: int, requests: int, chosen: str, index: bool = False, corpus: Path | None = None) -> None:
    """Where the time of each page whose name contains ``chosen`` goes: cProfile of the event loop's side
    and, timed apart, every call run on the store's own thread (which cProfile does not see)."""
    async with console_app(memories, index, corpus) as (client, views, store):
        on_thread: dict[str, list[float]] = {}
        call = store._call

        def timed(fn: Any) -> Any:
            began = time.process_time()
            try:
                return call(fn)
            finally:
                name = getattr(fn, "__qualname__", repr(fn))
                on_thread.setdefault(name, []).append((time.process_time() - began) * 1000)

        store._call = timed
        for name, path in views.items():
            if chosen not in name:
                continue
            await client.get(path)
            on_thread.clear()
            profiler = cProfile.Profile(time.process_time)
            wall = time.perf_counter()
            profiler.enable()
            for _ in range(requests):
                await client.get(path)
            profiler.disable()
            wall_ms = (time.perf_counter() - wall) * 1000 / requests
            print(f"\n== {name} ({path}): {wall_ms:.1f} ms a request ({_load()})")
            print("   the store's thread, CPU ms a request:")
            for fn, spent in sorted(on_thread.items(), key=lambda kv: -sum(kv[1])):
                print(f"     {sum(spent) / requests:7.1f}  {len(spent) / requests:4.1f} calls  {fn}")
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
            print("   the event loop, CPU (cumulative, all requests):")
            print("\n".join("     " + line for line in out.getvalue().splitlines()[6:40]))


async def pipeline_page(requests: int) -> dict[str, Any]:
    """The Pipeline page of a real running pipeline (embedded broker, maintenance worker, dead-letter
    topic), over HTTP on loopback: the page the ``pages`` run cannot show, since its app has no broker
    and no doctor (its "pipeline" row measures an empty page)."""
    from memstream.kafka.broker import free_port
    from memstream.settings import Settings
    from memstream.worker import runner

    with tempfile.TemporaryDirectory(prefix="memstream-bench-pipeline-") as tmp:
        settings = Settings.from_env({}, data_dir=Path(tmp), http_port=free_port(), topic_prefix="bench-pipeline")
        running = await runner.start(settings, loglevel="warning")
        try:
            admin = user_principal("ops@example.com", all_projects=True, admin=True)
            token = TokenStore(settings.tokens_file).create(admin)[0]
            async with httpx.AsyncClient(base_url=settings.api_url, timeout=60) as client:
                code = await client.post("/console/codes", headers={"Authorization": f"Bearer {token}"})
                await client.get(code.json()["path"])
                first = time.perf_counter()
                assert (await client.get("/console/pipeline")).status_code == 200
                first_ms = (time.perf_counter() - first) * 1000
                times = []
                for _ in range(requests):
                    began = time.perf_counter()
                    reply = await client.get("/console/pipeline")
                    times.append((time.perf_counter() - began) * 1000)
                    assert reply.status_code == 200, reply.status_code
                    await asyncio.sleep(0.5)  # spread over the cache's TTL: some loads find it stale
            doctor = getattr(running, "maintenance", None) is not None
        finally:
            await running.stop()
    return {"first_ms": first_ms, "median_ms": statistics.median(times), "p95_ms": _pct(times, 95), "doctor": doctor}


def _facts(n: int, round_: int, project: str) -> list[Fact]:
    from datetime import UTC, datetime

    key = project_key(project)
    now = datetime.now(UTC)
    return [
        Fact(
            fact_id=f"bench-{round_}-{i}",
            text=f"Round {round_}: module m{i} of the console bench is built with target t{i % 37} and tool z{i}",
            type="tech-context",
            scope="project",
            scope_key=key,
            project=project,
            session_id=f"bench-{round_}",
            sources=[Provenance(source_type="bench", session_id=f"bench-{round_}")],
            ts=now,
        )
        for i in range(n)
    ]


async def _client(base: str, token: str, got: list[int], connected: list[int]) -> None:
    async with (
        httpx.AsyncClient(base_url=base, timeout=None) as client,
        client.stream("GET", "/events", headers={"Authorization": f"Bearer {token}"}) as response,
    ):
        connected[0] += 1
        # Counted in the raw bytes: a client's parsing is its own machine's cost, not the server's.
        async for chunk in response.aiter_raw():
            got[0] += chunk.count(b"\ndata: ")


async def clients(base: str, token: str, n: int) -> None:
    """The ``clients`` mode, run in a child process (as real clients are elsewhere): ``n`` streams read
    until standard input closes; prints "ready" once all are connected, then the events read."""
    got, connected = [0], [0]
    tasks = [asyncio.create_task(_client(base, token, got, connected)) for _ in range(n)]
    deadline = time.monotonic() + 120
    while connected[0] < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{connected[0]} of {n} /events clients connected in 2 minutes")
        await asyncio.sleep(0.05)
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.read)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(got[0], flush=True)


async def events(facts: int, clients: int, rounds: int) -> list[dict[str, Any]]:
    from memstream.intake.publish import publish_events
    from memstream.kafka.broker import free_port
    from memstream.settings import Settings
    from memstream.topics import FACTS
    from memstream.worker import runner

    rows = []
    with tempfile.TemporaryDirectory(prefix="memstream-bench-events-") as tmp:
        settings = Settings.from_env({}, data_dir=Path(tmp), http_port=free_port(), topic_prefix="bench-console")
        running = await runner.start(settings, loglevel="warning")
        try:
            token = TokenStore(settings.tokens_file).create(user_principal("bench@example.com", all_projects=True))[0]
            project = "/bench/events"
            key = project_key(project)
            # Warm-up: the embedder and every stage touched once, not timed.
            await _ingest(running, publish_events, FACTS, _facts(20, -1, project), key)
            for r in range(rounds):
                for with_clients in (0, clients):
                    child = None
                    if with_clients:
                        child = await asyncio.create_subprocess_exec(
                            sys.executable,
                            "-m",
                            "bench.read.console",
                            "clients",
                            "--url",
                            settings.api_url,
                            "--token",
                            token,
                            "--clients",
                            str(with_clients),
                            stdin=asyncio.subprocess.PIPE,
                            stdout=asyncio.subprocess.PIPE,
                        )
                        assert child.stdout is not None
                        ready = await asyncio.wait_for(child.stdout.readline(), 150)
                        assert ready.strip() == b"ready", ready
                    batch = _facts(facts, r * 2 + bool(with_clients), project)
                    seconds = await _ingest(running, publish_events, FACTS, batch, key)
                    read = 0
                    if child is not None:
                        out, _ = await asyncio.wait_for(child.communicate(b""), 60)
                        read = int(out.split()[-1])
                    rows.append(
                        {"round": r, "clients": with_clients, "facts_per_s": facts / seconds, "events_read": read}
                    )
                    print(rows[-1], flush=True)
        finally:
            await running.stop()
    return rows


async def _ingest(running: Any, publish_events: Any, topic: Any, batch: list[Fact], key: str) -> float:
    """Seconds from the first publish until every fact of the batch has its audit record (created, or
    deduped into another memory): the whole way through decide, store and history."""
    history = running.providers.history
    wanted = {f.fact_id for f in batch}
    began = time.perf_counter()
    await publish_events(running.bootstrap, running.settings.topic_prefix, topic, [(f.scope_key, f) for f in batch])
    deadline = began + 600
    while True:
        seen = {r.fact_id for r in await history.for_scope(key, limit=len(batch) * 4)}
        if wanted <= seen:
            return time.perf_counter() - began
        if time.perf_counter() > deadline:
            raise TimeoutError(f"the pipeline recorded {len(wanted & seen)} of {len(wanted)} facts in 10 minutes")
        await asyncio.sleep(0.1)


async def live_latency(samples: int) -> list[float]:
    """Seconds from publishing a user/assistant exchange (as an agent host does) until its memory's
    event reaches a ``GET /events`` client: the Live view's delay (issue 26: within 2 s)."""
    from memstream.intake.publish import make_turn, publish
    from memstream.kafka.broker import free_port
    from memstream.settings import Settings
    from memstream.worker import runner

    out: list[float] = []
    with tempfile.TemporaryDirectory(prefix="memstream-bench-live-") as tmp:
        settings = Settings.from_env({}, data_dir=Path(tmp), http_port=free_port(), topic_prefix="bench-live")
        running = await runner.start(settings, loglevel="warning")
        try:
            token = TokenStore(settings.tokens_file).create(user_principal("bench@example.com", all_projects=True))[0]
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                httpx.AsyncClient(base_url=settings.api_url, timeout=None) as client,
                client.stream("GET", "/events", headers=headers) as response,
            ):
                lines = response.aiter_lines()
                for i in range(samples + 1):  # the first warms every stage up, not counted
                    marker = f"zq{i}x{time.time_ns()}"
                    turns = [
                        make_turn(
                            session_id=f"live-{i}", project="/bench/live", role="user", content=f"Where is {marker}?"
                        ),
                        make_turn(
                            session_id=f"live-{i}",
                            project="/bench/live",
                            role="assistant",
                            content=f"{marker} is in b.",
                        ),
                    ]
                    began = time.perf_counter()
                    await publish(running.bootstrap, settings.topic_prefix, turns)
                    while True:
                        line = await asyncio.wait_for(anext(lines), 120)
                        if line.startswith("data:") and marker in line:
                            break
                    if i:
                        out.append(time.perf_counter() - began)
        finally:
            await running.stop()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "what", nargs="?", choices=("pages", "pipeline", "events", "live", "all", "clients"), default="all"
    )
    parser.add_argument("--samples", type=int, default=10, help="live: exchanges timed")
    parser.add_argument("--url", default="", help="clients mode: the API to follow")
    parser.add_argument("--token", default="", help="clients mode: the bearer token")
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--facts", type=int, default=200)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--corpus", type=Path, default=None, help="pages: a data directory to keep the corpus in between runs"
    )
    parser.add_argument("--profile", default="", help="pages: profile the pages whose name contains this")
    parser.add_argument(
        "--index",
        action="store_true",
        help="pages: build the vector index a store taking the writes one by one would have (slow at 100k)",
    )
    args = parser.parse_args()
    if args.what == "clients":
        asyncio.run(clients(args.url, args.token, args.clients))
        return
    if args.what == "pages" and args.profile:
        asyncio.run(profile(args.memories, args.requests, args.profile, index=args.index, corpus=args.corpus))
        return
    if args.what in ("pages", "all"):
        rows = asyncio.run(pages(args.memories, args.requests, index=args.index, corpus=args.corpus))
        print(f"\nconsole pages at {args.memories} memories, {args.requests} requests each ({_load()})")
        print(f"target: every page p95 < {PAGE_TARGET_MS:.0f} ms server time at 100k")
        for row in rows:
            verdict = "ok" if row["p95_ms"] < PAGE_TARGET_MS else "OVER"
            print(
                f"  {row['page']:<36} median {row['median_ms']:7.1f} ms   p95 {row['p95_ms']:7.1f} ms   {verdict}"
                f"   (CPU median {row['cpu_median_ms']:6.1f} ms, p95 {row['cpu_p95_ms']:6.1f} ms)"
            )
    if args.what in ("pipeline", "all"):
        row = asyncio.run(pipeline_page(args.requests))
        print(f"\nPipeline page of a running pipeline, {args.requests} requests 0.5 s apart ({_load()})")
        print(f"  first load {row['first_ms']:.0f} ms (reads the dead letters and runs the doctor)")
        verdict = "ok" if row["p95_ms"] < PAGE_TARGET_MS else "OVER"
        print(f"  median {row['median_ms']:.1f} ms   p95 {row['p95_ms']:.1f} ms   {verdict}")
    if args.what in ("live", "all"):
        waits = asyncio.run(live_latency(args.samples))
        print(
            f"\nturn published -> its memory-updated event at a GET /events client, {len(waits)} exchanges ({_load()})"
        )
        median, p95 = statistics.median(waits), _pct(waits, 95)
        print(f"  median {median:.2f} s   p95 {p95:.2f} s   (target: within 2 s)  {'ok' if p95 < 2 else 'OVER'}")
    if args.what in ("events", "all"):
        rows = asyncio.run(events(args.facts, args.clients, args.rounds))
        none = [r["facts_per_s"] for r in rows if r["clients"] == 0]
        some = [r["facts_per_s"] for r in rows if r["clients"] > 0]
        change = statistics.median(some) / statistics.median(none) - 1
        print(f"\npipeline throughput while ingesting {args.facts} facts, {args.rounds} rounds each ({_load()})")
        for label, runs in (("no /events client", none), (f"{args.clients} /events clients", some)):
            each = ", ".join(f"{x:.1f}" for x in runs)
            print(f"  {label:<22} median {statistics.median(runs):6.1f} facts/s  ({each})")
        read = [r["events_read"] for r in rows if r["clients"] > 0]
        print(f"  events the clients read per round: {read} (each client every event of its scopes)")
        verdict = "ok" if change > -EVENTS_TARGET else "OVER"
        print(f"  change with clients: {change:+.1%} (target: within {EVENTS_TARGET:.0%})  {verdict}")


if __name__ == "__main__":
    main()
