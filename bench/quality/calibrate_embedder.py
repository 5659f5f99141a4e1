"""Measure the bundled embedder against the labelled pairs, and its throughput.

    .venv/bin/python -m bench.quality.calibrate_embedder [--prefix passage|query]   # from the repository root

Prints, per group, the cosine distances' min / median / max; then how many pairs of
each group fall in each band of ``BundledEmbedder.profile`` and how many land where
they should; then passages per second for a batch of 64 facts of ~100 characters.

``--prefix query`` embeds both sides with e5's "query: " prefix (the one its model
card gives for symmetric tasks) instead of the "passage: " the store uses, to show
what dedup would gain from it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from collections.abc import Callable

import numpy as np

from memstream.embed.base import DistanceProfile
from memstream.embed.bundled import BundledEmbedder
from tests.unit.calibration_pairs import GROUPS

#: Batches timed for throughput; the best and the median are printed.
RUNS = 5
BATCH = 64
#: Shortest fact in the throughput batch, in characters.
FACT_CHARS = 80


def expected(group: str, p: DistanceProfile) -> Callable[[float], bool]:
    """Where each group's pairs should land under profile ``p``."""
    return {
        "near_duplicate": lambda d: d <= p.dedup_general,
        "evolved_structural": lambda d: d <= p.dedup_structural,
        "contradiction": lambda d: d <= p.contradiction,
        "related": lambda d: d > p.dedup_structural,
        "unrelated": lambda d: d > p.contradiction,
    }[group]


async def embed(embedder: BundledEmbedder, texts: list[str], prefix: str) -> list[list[float]]:
    if prefix == "passage":
        return await embedder.embed_documents(texts)
    return [await embedder.embed_query(t) for t in texts]


async def distances(embedder: BundledEmbedder, prefix: str) -> dict[str, list[float]]:
    result: dict[str, list[float]] = {}
    for group, pairs in GROUPS.items():
        firsts = np.array(await embed(embedder, [a for a, _ in pairs], prefix))
        seconds = np.array(await embed(embedder, [b for _, b in pairs], prefix))
        result[group] = (1.0 - (firsts * seconds).sum(axis=1)).tolist()
    return result


def report(d: dict[str, list[float]], p: DistanceProfile) -> None:
    print(f"{'group':20} {'n':>3} {'min':>6} {'median':>6} {'max':>6}")
    for group, values in d.items():
        print(f"{group:20} {len(values):3} {min(values):6.3f} {statistics.median(values):6.3f} {max(values):6.3f}")

    print(f"\nprofile: general {p.dedup_general}, structural {p.dedup_structural}, contradiction {p.contradiction}")
    print(f"{'group':20} {'<=gen':>6} {'<=str':>6} {'<=con':>6} {'beyond':>6}  as expected")
    right = total = 0
    for group, values in d.items():
        bands = [
            sum(v <= p.dedup_general for v in values),
            sum(p.dedup_general < v <= p.dedup_structural for v in values),
            sum(p.dedup_structural < v <= p.contradiction for v in values),
            sum(v > p.contradiction for v in values),
        ]
        ok = sum(map(expected(group, p), values))
        right, total = right + ok, total + len(values)
        print(f"{group:20} {bands[0]:6} {bands[1]:6} {bands[2]:6} {bands[3]:6}  {ok}/{len(values)}")
    print(f"{'all':20} {'':27}  {right}/{total} ({right / total:.0%})")


def realistic_facts() -> list[str]:
    """:data:`BATCH` facts of ~100 characters, the length an extractor typically emits."""
    sentences = itertools.cycle([text for pairs in GROUPS.values() for pair in pairs for text in pair])
    facts: list[str] = []
    while len(facts) < BATCH:
        fact = next(sentences)
        while len(fact) < FACT_CHARS:
            fact = f"{fact}; {next(sentences)}"
        facts.append(fact)
    return facts


async def throughput(embedder: BundledEmbedder) -> None:
    facts = realistic_facts()
    await embedder.embed_documents(facts[:4])  # loads the model
    rates = []
    for _ in range(RUNS):
        started = time.perf_counter()
        await embedder.embed_documents(facts)
        rates.append(len(facts) / (time.perf_counter() - started))
    started = time.perf_counter()
    for fact in facts[:16]:
        await embedder.embed_documents([fact])
    single_ms = (time.perf_counter() - started) / 16 * 1000
    mean_chars = statistics.mean(map(len, facts))
    print(f"\nthroughput: {len(facts)} facts of {mean_chars:.0f} chars on average")
    print(f"  batch: best {max(rates):.1f}, median {statistics.median(rates):.1f} passages/s")
    print(f"  one at a time: {single_ms:.0f} ms per fact")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prefix", choices=("passage", "query"), default="passage")
    args = parser.parse_args()
    embedder = BundledEmbedder()
    try:
        report(await distances(embedder, args.prefix), embedder.profile)
        await throughput(embedder)
    finally:
        await embedder.close()


if __name__ == "__main__":
    asyncio.run(main())
