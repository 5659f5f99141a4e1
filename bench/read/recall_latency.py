"""The read path's latency at 10k memories, with and without session-aware fusion (issue 25.9), and
for a query naming a time (issue 40.2, a pool of 50):
``recall.search.search_scopes`` as the API, the CLI and MCP call it (query embedding by the bundled
embedder, hybrid search on the edge store, fusion), in process, without HTTP. Target: p95 < 50 ms.

    .venv/bin/python -m bench.read.recall_latency [--memories 10000] [--queries 200]

The memories are synthetic raw-mode exchanges (sessions of 10, words drawn from a fixed vocabulary
so BM25 has terms to score), with random unit vectors: the store's cost depends on the count and
the filter, not on what the vectors mean. Queries are three to five words of the same vocabulary.
Each query runs once per variant, the variants interleaved, so the machine's load falls on both
alike; the load average is printed beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from memstream.embed.bundled import BundledEmbedder
from memstream.identity import memory_id, normalize_content
from memstream.ports import Providers
from memstream.recall.search import search_scopes
from memstream.recall.sessions import SESSION_WEIGHT
from memstream.schemas import Memory
from memstream.settings import Settings
from memstream.store.edge import EdgeStore

SCOPE = "p_latency"
#: Words of the synthetic exchanges and queries.
WORDS: tuple[str, ...] = tuple(
    " ".join(
        [
            "deploy cache index migration token cookie session queue worker retry timeout port nginx redis postgres",
            "kafka topic partition offset schema version release branch merge rebase lint test fixture mock build",
            "docker image volume secret vault rotate certificate domain proxy header cors csrf login signup invoice",
            "payment refund webhook export import csv report dashboard chart metric alert trace span log error",
            "crash",
        ]
    ).split()
)


def exchange(rng: random.Random) -> str:
    question = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))
    answer = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
    return f"[user] {question}?\n[assistant] {answer}."


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rng = random.Random(25)
    np_rng = np.random.default_rng(25)
    embedder = BundledEmbedder()
    with tempfile.TemporaryDirectory() as root:
        store = EdgeStore(Path(root), embedder.model, embedder.dim)
        await store.open()
        try:
            now = datetime.now(UTC)
            vectors = np_rng.standard_normal((args.memories, embedder.dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            for i in range(args.memories):
                content = normalize_content(exchange(rng))
                memory = Memory(
                    id=memory_id(SCOPE, f"{i}:{content.content_hash}"),
                    text=content.storage,
                    type="conversation",
                    scope="project",
                    scope_key=SCOPE,
                    created_at=now,
                    updated_at=now,
                    content_hash=content.content_hash,
                    embedding_model=embedder.model,
                    session_id=f"s{i // 10}",
                )
                await store.upsert(memory, vectors[i].tolist())
            # Search reads no audit history: none is opened.
            no_history: Any = None
            providers = Providers(
                settings=Settings.from_env({}), embedder=embedder, store=store, llm=None, history=no_history
            )
            variants = {"hybrid (session fusion off)": 0.0, "hybrid + session fusion (default)": SESSION_WEIGHT}
            # A query naming a time (issue 40.2) widens the pool to recall.dates.TIME_POOL: its own row.
            named = "default, query naming a time"
            queries = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 5))) for _ in range(args.queries)]
            for weight in variants.values():  # warm up: the model, the shard's caches
                await search_scopes(providers, queries[0], [SCOPE], limit=10, session_weight=weight)
            times: dict[str, list[float]] = {name: [] for name in [*variants, named]}
            for query in queries:
                for name, weight in variants.items():
                    start = time.perf_counter()
                    await search_scopes(providers, query, [SCOPE], limit=10, session_weight=weight)
                    times[name].append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                await search_scopes(providers, f"{query} last May", [SCOPE], limit=10)
                times[named].append((time.perf_counter() - start) * 1000)
            load = os.getloadavg()
            print(
                f"search_scopes at {args.memories} memories, {args.queries} queries each, "
                f"load average {load[0]:.1f} / {load[1]:.1f} (1 / 5 min) on {os.cpu_count()} cores"
            )
            for name, ms in times.items():
                p95 = statistics.quantiles(ms, n=20)[-1]
                print(f"  {name:<36} median {statistics.median(ms):6.1f} ms   p95 {p95:6.1f} ms   (target p95 < 50 ms)")
        finally:
            await store.close()
            await embedder.close()


if __name__ == "__main__":
    asyncio.run(main())
