"""Measure the decision stage's hybrid scores (Pipeline v2) on the labelled pairs.

    .venv/bin/python -m bench.quality.calibrate_decision [--alpha 0.7]   # from the repository root

Stores the first fact of every labelled pair in one scope of an embedded store, then,
for each second fact, runs the decision stage's hybrid search (vector + Qdrant's BM25)
and prints, per group, the min / median / max score of the pair's own first fact, and
the highest score any *other* stored fact got. A good ``min_score`` lets the pair in for
near-duplicates, evolutions and contradictions (the LLM should see them), and keeps out
unrelated facts (an LLM call that can only answer ADD).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from memstream.embed.bundled import BundledEmbedder
from memstream.identity import memory_id, normalize_content
from memstream.schemas import Memory
from memstream.store.edge import EdgeStore
from tests.unit.calibration_pairs import GROUPS

SCOPE = "p_calibration"


def stored(text: str, model: str) -> Memory:
    content = normalize_content(text)
    now = datetime.now(UTC)
    return Memory(
        id=memory_id(SCOPE, content.content_hash),
        text=content.storage,
        type="architecture",
        scope="project",
        scope_key=SCOPE,
        created_at=now,
        updated_at=now,
        content_hash=content.content_hash,
        embedding_model=model,
    )


def band(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{min(values):.3f} / {statistics.median(values):.3f} / {max(values):.3f}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alpha", type=float, default=0.7)
    args = parser.parse_args()
    embedder = BundledEmbedder()
    with tempfile.TemporaryDirectory() as root:
        store = EdgeStore(Path(root), embedder.model, embedder.dim)
        await store.open()
        try:
            firsts = [first for pairs in GROUPS.values() for first, _ in pairs]
            for text, vector in zip(firsts, await embedder.embed_documents(firsts), strict=True):
                await store.upsert(stored(text, embedder.model), vector)
            print(f"hybrid score (alpha={args.alpha}) of the pair's first fact; best other fact — min / median / max")
            for group, pairs in GROUPS.items():
                own: list[float] = []
                others: list[float] = []
                for first, second in pairs:
                    # The decide stage searches with the fact's document embedding, as stored.
                    (vector,) = await embedder.embed_documents([second])
                    hits = await store.hybrid_search(second, vector, [SCOPE], limit=10, alpha=args.alpha, min_score=0.0)
                    target = stored(first, embedder.model).id
                    own += [h.score for h in hits if h.memory.id == target]
                    others += [max((h.score for h in hits if h.memory.id != target), default=0.0)]
                print(f"  {group:<20} own {band(own):<24} best other {band(others)}")
        finally:
            await store.close()
            await embedder.close()


if __name__ == "__main__":
    asyncio.run(main())
