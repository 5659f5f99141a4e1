"""How EdgeStore (the embedded Qdrant Edge shard) scales: load rate, single-upsert latency and
filtered search latency at 10k and 100k synthetic memories.

    .venv/bin/python -m bench.perf.store_scaling [--sizes 10000 100000] [--searches 200] [--projects 20]

Target: filtered search p95 < 10 ms at 100k.

The store is used exactly as the pipeline uses it: ``EdgeStore.upsert`` one memory at a time
(there is no batch upsert), every shard call on its one single-thread executor, and no
``optimize()`` call (EdgeStore never makes one), so searches run on whatever segments the
shard has after the load. The load submits ``LOAD_WINDOW`` upserts at a time with
``asyncio.gather``; the executor still runs them one by one, the window only keeps it busy.
``upsert_per_s`` is points over the time spent awaiting those upserts (building the synthetic
Memory structs is excluded; encoding them to payload, inside ``upsert``, is included).

The vector index (issue 18, point 4): ``--index`` runs, for each ``SIZE:PROJECTS`` scenario, the
same filtered searches on one shard before and after ``EdgeStore.build_index()`` (HNSW, built
in a child process while a writer keeps upserting), and the hybrid search both as the store
runs it now and with the old query (payloads of every candidate read and decoded), side by side:

    nice -n 19 .venv/bin/python -m bench.perf.store_scaling --index [--scenarios 100000:1 1000000:1000]

Its load is bulk (one shard update per ``BULK`` memories); memory (RSS) and disk are reported
per million memories.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import platform
import resource
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_edge import UpdateOperation

from memstream.identity import memory_id, project_key
from memstream.schemas import Memory
from memstream.schemas.codec import memory_from_payload
from memstream.schemas.memory import MEMORY_TYPES, HybridHit
from memstream.store.base import (
    BM25_VECTOR,
    DENSE_VECTOR,
    HYBRID_POOL_FACTOR,
    Leg,
    fuse,
    memory_select,
    query_terms,
)
from memstream.store.edge import EdgeStore, _point
from memstream.store.edge_index import hnsw_segments

MODEL = "bench-scaling"
SCOPES = 20
SUPERSEDED_FRACTION = 0.05
#: Upserts in flight at once during the load.
LOAD_WINDOW = 256
#: Single upserts timed one by one after the load.
EXTRA_UPSERTS = 500
#: Queries run before the timed ones (first-touch of mmaps and indexes), not counted.
WARMUP_SEARCHES = 10
SEARCH_LIMIT = 5
TARGET = "filtered search p95 < 10 ms at 100k"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.standard_normal((n, dim), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def _memory(i: int, scope_key: str, type_: str, superseded_by: str | None, tag: str) -> Memory:
    text = f"{tag} synthetic memory {i}: module m{i % 997} is built with target t{i % 101}."
    content_hash = hashlib.sha256(text.encode()).hexdigest()
    at = T0 + timedelta(seconds=i)
    return Memory(
        id=memory_id(scope_key, content_hash),
        text=text,
        type=type_,  # type: ignore[arg-type]
        scope="project",
        scope_key=scope_key,
        source_chunk=f"user: how is module m{i % 997} built?",
        created_at=at,
        updated_at=at,
        content_hash=content_hash,
        embedding_model=MODEL,
        session_id=f"s{i % 500}",
        project=f"/bench/project-{scope_key}",
        superseded_by=superseded_by,
    )


def _memories(rng: np.random.Generator, start: int, n: int, scopes: Sequence[str], tag: str) -> list[Memory]:
    scope_idx = rng.integers(0, len(scopes), n)
    type_idx = rng.integers(0, len(MEMORY_TYPES), n)
    superseded = rng.random(n) < SUPERSEDED_FRACTION
    out = []
    for j in range(n):
        i = start + j
        # The superseding memory need not exist for the filter; a stable fake id will do.
        by = memory_id(scopes[scope_idx[j]], f"newer-{tag}-{i}") if superseded[j] else None
        out.append(_memory(i, scopes[scope_idx[j]], MEMORY_TYPES[type_idx[j]], by, tag))
    return out


def _disk_mb(root: Path) -> float:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 1e6


def _pct(samples_s: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples_s) * 1000.0, q))


def _peak_rss_mb() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return peak / (1024 * 1024) if platform.system() == "Darwin" else peak / 1024


async def _measure_one(size: int, dim: int, searches: int, seed: int, root: Path, projects: int) -> dict[str, Any]:
    rng = np.random.default_rng([seed, size])
    scopes = [project_key(f"/bench/project-{k}") for k in range(projects)]
    store = EdgeStore(root, MODEL, dim)
    await store.open()
    try:
        # -- load ------------------------------------------------------------------
        load_s = 0.0
        for start in range(0, size, LOAD_WINDOW):
            n = min(LOAD_WINDOW, size - start)
            batch = _memories(rng, start, n, scopes, "load")
            vectors = _unit_vectors(rng, n, dim).tolist()
            began = time.perf_counter()
            await asyncio.gather(*(store.upsert(m, v) for m, v in zip(batch, vectors, strict=True)))
            load_s += time.perf_counter() - began

        # -- single upserts on the loaded shard, one at a time ------------------------
        extra = _memories(rng, size, EXTRA_UPSERTS, scopes, "extra")
        extra_vectors = _unit_vectors(rng, EXTRA_UPSERTS, dim).tolist()
        upsert_lat: list[float] = []
        for m, v in zip(extra, extra_vectors, strict=True):
            began = time.perf_counter()
            await store.upsert(m, v)
            upsert_lat.append(time.perf_counter() - began)

        # -- filtered search -------------------------------------------------------------
        queries = _unit_vectors(rng, WARMUP_SEARCHES + searches, dim).tolist()
        search_lat: list[float] = []
        hits = 0
        for q_i, query in enumerate(queries):
            scope = scopes[int(rng.integers(0, projects))]
            types = None
            if q_i % 2 == 1:
                picked = rng.choice(len(MEMORY_TYPES), size=3, replace=False)
                types = [MEMORY_TYPES[int(t)] for t in picked]
            began = time.perf_counter()
            found = await store.search(query, [scope], limit=SEARCH_LIMIT, types=types, include_superseded=False)
            elapsed = time.perf_counter() - began
            if q_i >= WARMUP_SEARCHES:
                search_lat.append(elapsed)
                hits += len(found)
            if any(r.memory.scope_key != scope or not r.memory.active for r in found):
                raise AssertionError("filtered search returned a memory outside its filter")

        # -- filtered hybrid search (BM25 + vector, Pipeline v2's decision query) ----------------
        hybrid_lat: list[float] = []
        for q_i, query in enumerate(_unit_vectors(rng, WARMUP_SEARCHES + searches, dim).tolist()):
            scope = scopes[int(rng.integers(0, projects))]
            text = f"how is module m{int(rng.integers(0, 997))} built with target t{int(rng.integers(0, 101))}"
            began = time.perf_counter()
            await store.hybrid_search(text, query, [scope], limit=SEARCH_LIMIT, min_score=0.0)
            if q_i >= WARMUP_SEARCHES:
                hybrid_lat.append(time.perf_counter() - began)

        info = await store._run(lambda s: s.info())  # read-only: what the search ran on
        await store._run(lambda s: s.flush())
        disk_mb = await asyncio.to_thread(_disk_mb, root)
    finally:
        await store.close()

    return {
        "size": size,
        "upsert_per_s": size / load_s,
        "upsert_p50_ms": _pct(upsert_lat, 50),
        "upsert_p95_ms": _pct(upsert_lat, 95),
        "search_p50_ms": _pct(search_lat, 50),
        "search_p95_ms": _pct(search_lat, 95),
        "search_p99_ms": _pct(search_lat, 99),
        "hybrid_p50_ms": _pct(hybrid_lat, 50),
        "hybrid_p95_ms": _pct(hybrid_lat, 95),
        "disk_mb": disk_mb,
        "projects": projects,
        "peak_rss_mb": _peak_rss_mb(),
        "load_s": load_s,
        "points": info.points_count,
        "segments": info.segments_count,
        "indexed_vectors": info.indexed_vectors_count,
        "mean_hits": hits / max(1, len(search_lat)),
    }


async def measure(
    sizes: Sequence[int] = (10_000, 100_000),
    dim: int = 384,
    searches: int = 200,
    seed: int = 0,
    projects: int = SCOPES,
) -> list[dict[str, Any]]:
    """One row per size, each on a fresh shard in its own temporary directory.

    ``peak_rss_mb`` is the process's peak so far (``ru_maxrss`` never goes down), so a row
    for a later size covers every size before it too.
    """
    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="memstream-bench-") as tmp:
            rows.append(await _measure_one(size, dim, searches, seed, Path(tmp), projects))
    return rows


#: Memories per shard update in the ``--index`` runs' bulk load.
BULK = 1000
#: The ``--index`` runs' scenarios: 100k memories in one project, 1M over 1,000 projects.
INDEX_SCENARIOS = ((100_000, 1), (1_000_000, 1000))
INDEX_TARGET = "filtered hybrid search p95 < 10 ms at 1M over 1,000 projects and at 100k in one project"
#: How often the writer upserts while the index is built (its latencies show any pause).
WRITER_INTERVAL_S = 0.01


async def _old_hybrid(store: EdgeStore, text: str, vector: list[float], scope: str) -> list[HybridHit]:
    """The hybrid query as the store ran it before issue 18: every candidate's payload read and decoded."""
    select = memory_select([scope], None, include_superseded=False)
    pool = SEARCH_LIMIT * HYBRID_POOL_FACTOR
    legs = [Leg(DENSE_VECTOR, vector, select, pool), Leg(BM25_VECTOR, query_terms(text), select, pool)]
    dense, lexical = await store._query(legs)
    return fuse(
        [(memory_from_payload(p), score) for _, p, score in dense],
        [(memory_from_payload(p), score) for _, p, score in lexical],
        alpha=0.7,
        min_score=0.0,
        limit=SEARCH_LIMIT,
    )


async def _searches(store: EdgeStore, scopes: Sequence[str], dim: int, searches: int, seed: int) -> dict[str, float]:
    """Filtered vector, hybrid and old-query hybrid latencies (ms) over the same seeded queries."""
    rng = np.random.default_rng([seed, 42])
    lat: dict[str, list[float]] = {"search": [], "hybrid": [], "hybrid_old": []}
    for q_i in range(WARMUP_SEARCHES + searches):
        scope = scopes[int(rng.integers(0, len(scopes)))]
        vector = _unit_vectors(rng, 1, dim)[0].tolist()
        text = f"how is module m{int(rng.integers(0, 997))} built with target t{int(rng.integers(0, 101))}"
        began = time.perf_counter()
        found = await store.search(vector, [scope], limit=SEARCH_LIMIT)
        t_search = time.perf_counter() - began
        began = time.perf_counter()
        hits = await store.hybrid_search(text, vector, [scope], limit=SEARCH_LIMIT, min_score=0.0)
        t_hybrid = time.perf_counter() - began
        began = time.perf_counter()
        old = await _old_hybrid(store, text, vector, scope)
        t_old = time.perf_counter() - began
        if any(r.memory.scope_key != scope or not r.memory.active for r in found):
            raise AssertionError("filtered search returned a memory outside its filter")
        if [h.memory.id for h in hits] != [h.memory.id for h in old]:
            raise AssertionError("the hybrid query and the old one disagree")
        if q_i >= WARMUP_SEARCHES:
            lat["search"].append(t_search)
            lat["hybrid"].append(t_hybrid)
            lat["hybrid_old"].append(t_old)
    return {f"{k}_p{q}_ms": _pct(v, q) for k, v in lat.items() for q in (50, 95)}


def _rss_mb() -> float:
    """The process's resident memory now (Linux), MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


async def _build_under_writes(
    store: EdgeStore, rng: np.random.Generator, scopes: Sequence[str], dim: int, start: int
) -> dict[str, Any]:
    """Build the index while a writer upserts every ``WRITER_INTERVAL_S``; the build's report, the writes' latency."""
    build = asyncio.create_task(store.build_index())
    latencies: list[float] = []
    i = start
    began = time.perf_counter()
    while not build.done():
        (m,) = _memories(rng, i, 1, scopes, "during")
        vector = _unit_vectors(rng, 1, dim)[0].tolist()
        t = time.perf_counter()
        await store.upsert(m, vector)
        latencies.append(time.perf_counter() - t)
        i += 1
        await asyncio.sleep(WRITER_INTERVAL_S)
    report = await build
    return {
        "build_s": time.perf_counter() - began,
        "child_s": report["seconds"],
        "written_during_build": len(latencies),
        "write_p50_ms_during_build": _pct(latencies, 50),
        "write_max_ms_during_build": max(latencies) * 1000.0,
        "hnsw_segments": hnsw_segments(store.path),
    }


async def measure_index(
    size: int, projects: int, *, dim: int = 384, searches: int = 200, seed: int = 0
) -> dict[str, Any]:
    """One scenario of the ``--index`` run on a fresh shard: searches before and after the index build."""
    rng = np.random.default_rng([seed, size, projects])
    scopes = [project_key(f"/bench/project-{k}") for k in range(projects)]
    rss_base = _rss_mb()
    with tempfile.TemporaryDirectory(prefix="memstream-bench-") as tmp:
        root = Path(tmp)
        store = EdgeStore(root, MODEL, dim)
        await store.open()
        try:
            load_s = 0.0
            for start in range(0, size, BULK):
                n = min(BULK, size - start)
                points = [
                    _point(m, v)
                    for m, v in zip(
                        _memories(rng, start, n, scopes, "load"), _unit_vectors(rng, n, dim).tolist(), strict=True
                    )
                ]
                began = time.perf_counter()
                await store._run(lambda s, p=points: s.update(UpdateOperation.upsert_points(p)))  # type: ignore[misc]
                load_s += time.perf_counter() - began
            await store._run(lambda s: s.flush())
            before = await _searches(store, scopes, dim, searches, seed)
            rss_before = _rss_mb() - rss_base
            disk_before = await asyncio.to_thread(_disk_mb, root)
            build = await _build_under_writes(store, rng, scopes, dim, size)
            after = await _searches(store, scopes, dim, searches, seed)
            rss_after = _rss_mb() - rss_base
            await store._run(lambda s: s.flush())
            disk_after = await asyncio.to_thread(_disk_mb, root)
            stored = (await store._run(lambda s: s.info())).points_count
        finally:
            await store.close()
    per_million = 1_000_000 / stored
    return {
        "size": size,
        "projects": projects,
        "points": stored,
        "bulk_load_per_s": size / load_s,
        **{f"before_{k}": v for k, v in before.items()},
        **{f"after_{k}": v for k, v in after.items()},
        **build,
        "rss_mb_per_million_before": rss_before * per_million,
        "rss_mb_per_million_after": rss_after * per_million,
        "disk_mb_per_million_before": disk_before * per_million,
        "disk_mb_per_million_after": disk_after * per_million,
        "peak_rss_mb": _peak_rss_mb(),
        "child_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def format_index(rows: Sequence[dict[str, Any]]) -> str:
    """The ``--index`` rows, before and after side by side."""
    lines = [
        f"{'scenario':>22} {'':>6} {'search p50':>10} {'search p95':>10} {'hybrid p50':>10} "
        f"{'hybrid p95':>10} {'old-query hybrid p95':>20}"
    ]
    for row in rows:
        name = f"{row['size']:,} / {row['projects']:,} proj."
        for when in ("before", "after"):
            lines.append(
                f"{name:>22} {when:>6} {row[f'{when}_search_p50_ms']:>10.2f} {row[f'{when}_search_p95_ms']:>10.2f} "
                f"{row[f'{when}_hybrid_p50_ms']:>10.2f} {row[f'{when}_hybrid_p95_ms']:>10.2f} "
                f"{row[f'{when}_hybrid_old_p95_ms']:>20.2f}"
            )
            name = ""
        lines.append(
            f"{'':>22} build {row['build_s']:.0f} s (child {row['child_s']:.0f} s, {row['hnsw_segments']} HNSW "
            f"segments); {row['written_during_build']:,} upserts meanwhile, "
            f"p50 {row['write_p50_ms_during_build']:.2f} ms, "
            f"max {row['write_max_ms_during_build']:.0f} ms (the copy and the swap)"
        )
        lines.append(
            f"{'':>22} per million memories: RSS {row['rss_mb_per_million_before']:,.0f} MB unindexed, "
            f"{row['rss_mb_per_million_after']:,.0f} MB indexed; disk {row['disk_mb_per_million_before']:,.0f} MB"
            f" unindexed, {row['disk_mb_per_million_after']:,.0f} MB indexed; "
            f"bulk load {row['bulk_load_per_s']:,.0f}/s; peak RSS {row['peak_rss_mb']:,.0f} MB, "
            f"index child {row['child_peak_rss_mb']:,.0f} MB"
        )
    return "\n".join(lines)


COLUMNS = (
    ("size", "{:>8,}"),
    ("upsert_per_s", "{:>12,.0f}"),
    ("upsert_p50_ms", "{:>13.3f}"),
    ("upsert_p95_ms", "{:>13.3f}"),
    ("search_p50_ms", "{:>13.3f}"),
    ("search_p95_ms", "{:>13.3f}"),
    ("search_p99_ms", "{:>13.3f}"),
    ("hybrid_p50_ms", "{:>13.3f}"),
    ("hybrid_p95_ms", "{:>13.3f}"),
    ("peak_rss_mb", "{:>11.0f}"),
    ("disk_mb", "{:>8.0f}"),
    ("segments", "{:>8}"),
    ("indexed_vectors", "{:>15,}"),
)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    header = " ".join(f"{name:>{len(fmt.format(rows[0][name]))}}" for name, fmt in COLUMNS) if rows else ""
    lines = [header]
    lines += [" ".join(fmt.format(row[name]) for name, fmt in COLUMNS) for row in rows]
    return "\n".join(lines)


def _scenario(text: str) -> tuple[int, int]:
    size, _, projects = text.partition(":")
    return int(size), int(projects or 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--projects", type=int, default=SCOPES, help="project scopes the memories spread over")
    parser.add_argument("--index", action="store_true", help="searches before and after the vector index is built")
    parser.add_argument(
        "--scenarios",
        type=_scenario,
        nargs="+",
        default=list(INDEX_SCENARIOS),
        help="SIZE:PROJECTS pairs for --index (default 100000:1 1000000:1000)",
    )
    args = parser.parse_args()
    machine = (
        f"machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    )
    if args.index:
        began = time.perf_counter()
        print(machine)
        print(
            f"EdgeStore, dim={args.dim}, {len(MEMORY_TYPES)} types, ~{SUPERSEDED_FRACTION:.0%} superseded, bulk load; "
            f"{args.searches} searches (scope + active, limit {SEARCH_LIMIT}) after {WARMUP_SEARCHES} warm-up, "
            "the same queries before and after the index build (ms)",
            flush=True,
        )
        rows = []
        for n, p in args.scenarios:
            rows.append(asyncio.run(measure_index(n, p, dim=args.dim, searches=args.searches, seed=args.seed)))
            print(format_index(rows[-1:]), flush=True)
        print(f"target: {INDEX_TARGET}")
        for row in rows:
            p95 = row["after_hybrid_p95_ms"]
            print(
                f"  {'met' if p95 < 10 else 'MISSED'}: hybrid p95 {p95:.2f} ms at {row['size']:,} / {row['projects']:,}"
            )
        print(f"run took {time.perf_counter() - began:.0f} s")
        return

    rows = asyncio.run(measure(tuple(args.sizes), args.dim, args.searches, args.seed, args.projects))
    print(machine)
    print(
        f"EdgeStore, dim={args.dim}, {args.projects} project scopes, {len(MEMORY_TYPES)} types, "
        f"~{SUPERSEDED_FRACTION:.0%} superseded; load window {LOAD_WINDOW}, "
        f"{EXTRA_UPSERTS} timed single upserts, {args.searches} searches "
        f"(scope + active, types on half, limit {SEARCH_LIMIT}) after {WARMUP_SEARCHES} warm-up"
    )
    print(format_table(rows))
    for row in rows:
        per_million = 1_000_000 / (row["size"] + EXTRA_UPSERTS)
        print(
            f"  {row['size']:,}: linear extrapolation to a million memories: "
            f"disk {row['disk_mb'] * per_million:,.0f} MB,"
            f" peak RSS {row['peak_rss_mb'] * per_million:,.0f} MB (an upper bound: RSS includes the interpreter)"
        )
    print(f"target: {TARGET}")
    at_100k = [r for r in rows if r["size"] >= 100_000]
    if at_100k:
        p95 = at_100k[-1]["search_p95_ms"]
        print(f"  {'met' if p95 < 10 else 'MISSED'}: p95 {p95:.3f} ms at {at_100k[-1]['size']:,}")


if __name__ == "__main__":
    main()
