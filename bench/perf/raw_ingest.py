"""Raw-mode ingest through the pipeline against the bundled embedder alone, on the same exchanges.

    nice -n 10 .venv/bin/python -m bench.perf.raw_ingest [--sessions 4] [--turns 4] [--rounds 2]

Issue 18, point 2: a backlog of exchanges should become searchable at ≥ 90% of the rate the
embedder embeds the same texts on its own. Each round embeds the exchanges standalone
(``BundledEmbedder.embed_documents``, batches of ``MEMSTREAM_EMBED_BATCH`` as the embed stage
takes them), then runs them through the pipeline in raw mode (no LLM: each exchange is one
``conversation`` memory), publish to memory-updated; the rates of one round share the machine's
mood. The texts are ``bench.perf.embedder``'s conversational replies after a question, each tagged
so its memory can be recognised.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Mapping
from typing import Any

from bench.perf import embedder as embedder_bench
from bench.perf import pipeline
from memstream.embed.bundled import BundledEmbedder
from memstream.settings import Settings


async def standalone(texts: list[str], batch: int, threads: int = 0) -> float:
    """Passages/s of a fresh bundled embedder on ``texts`` (the model loaded first, unmeasured)."""
    embedder = BundledEmbedder(threads=threads)
    try:
        await embedder.embed_documents(texts[:1])
        began = time.perf_counter()
        for i in range(0, len(texts), batch):
            await embedder.embed_documents(texts[i : i + batch])
        return len(texts) / (time.perf_counter() - began)
    finally:
        await embedder.close()


async def rounds_of(
    sessions: int, turns: int, rounds: int, threads: int = 0, overrides: Mapping[str, Any] | None = None
) -> list[tuple[float, float, float]]:
    """(standalone passages/s, pipeline exchanges/s, pipeline CPU ms per exchange) per round;
    ``overrides``: settings the pipeline runs with (``fetch_idle_wait_ms=20``, say)."""
    replies = embedder_bench.answers(sessions * turns)
    texts = [
        embedder_bench.raw_exchange(f"question {t}", pipeline.reply_text(s, t, sessions, replies))
        for t in range(turns)
        for s in range(sessions)
    ]
    batch = Settings().embed_batch
    pairs: list[tuple[float, float, float]] = []
    for _ in range(rounds):
        alone = await standalone(texts, batch, threads)
        piped = await pipeline.run(
            sessions=sessions,
            turns_per_session=turns,
            llm_latency=0.0,
            embedder="bundled",
            overrides={"anthropic_api_key": "", "embed_threads": threads, **(overrides or {})},
            replies=replies,
        )
        if not piped.order_kept:
            raise AssertionError("raw ingest broke the order of a session")
        pairs.append((alone, piped.turns_per_s, piped.cpu_ms_per_turn))
    return pairs


async def measure(sessions: int, turns: int, rounds: int, threads: int) -> None:
    pairs = await rounds_of(sessions, turns, rounds, threads)
    for alone, rate, cpu in pairs:
        print(
            f"  round: standalone {alone:.2f} passages/s, pipeline {rate:.2f} exchanges/s "
            f"(×{rate / alone:.2f}), {cpu:.0f} ms CPU/turn"
        )
    ratios = [p[1] / p[0] for p in pairs]
    print(
        f"load {os.getloadavg()} on {os.cpu_count()} cores; {sessions * turns} exchanges, {rounds} rounds, "
        f"engine threads {threads or 'default'}"
    )
    print(
        f"raw ingest: pipeline / standalone ×{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}); "
        f"standalone {statistics.median(p[0] for p in pairs):.2f} passages/s, "
        f"pipeline {statistics.median(p[1] for p in pairs):.2f} exchanges/s (medians)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="MEMSTREAM_EMBED_THREADS for both; 0: the default")
    args = parser.parse_args()
    asyncio.run(measure(args.sessions, args.turns, args.rounds, args.threads))


if __name__ == "__main__":
    main()
