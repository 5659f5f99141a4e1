"""Calibrates search's relevance floor on bench/quality/retrieval's labelled set (issue 25).

    .venv/bin/python -m bench.quality.relevance_floor

Search ranks by the fused score, which is relative to the query's own candidates: the best candidate
scores near 1 however unrelated it is, so it cannot say "nothing here is relevant". The floor is
absolute instead: a hit is kept when its cosine similarity to the query reaches ``vector`` or its
BM25 match (squashed to 0-1) reaches ``bm25``.

Half the set's sessions are stored (every other one, as raw mode stores them: one conversation memory
per exchange). A question answered in a stored session is a positive: the floor must keep its answer.
A question answered only in a session left out is a negative: nothing stored answers it, and the
floor should leave its search empty. The sweep runs on the dev split's questions; the chosen pair is
then reported once on the test split.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.embed.bundled import BundledEmbedder
from memstream.identity import memory_id, normalize_content
from memstream.schemas import Memory
from memstream.store.edge import EdgeStore

SET = Path(__file__).resolve().parent / "retrieval" / "conversations.json"
SCOPE = "p_floorbench0000"
VECTORS = (0.0, 0.79, 0.80, 0.81, 0.82, 0.83, 0.84, 0.85, 0.86, 0.87, 0.88, 0.89, 0.90)
BM25S = (0.5, 0.7, 0.8, 0.9, 2.0)


def exchange(key: str, user: str, assistant: str, model: str) -> Memory:
    text = f"[user] {user}\n[assistant] {assistant}"
    content = normalize_content(text)
    now = datetime.now(UTC)
    return Memory(
        id=memory_id(SCOPE, content.content_hash),
        text=content.storage,
        type="conversation",
        scope="project",
        scope_key=SCOPE,
        created_at=now,
        updated_at=now,
        content_hash=content.content_hash,
        embedding_model=model,
        session_id=key,
    )


def kept(hit: Any, vector: float, bm25: float) -> bool:
    """Over the floor: a vector floor of 0 and a BM25 floor past 1 are no floor at all."""
    if vector == 0.0 and bm25 > 1.0:
        return True
    return (vector > 0.0 and (hit.vector_score or 0.0) >= vector) or (hit.bm25_score or 0.0) >= bm25


def shown(r: dict[str, Any], vector: float, bm25: float, gate: bool) -> list[Any]:
    """The hits a search shows: per hit, those over the floor; as a gate, all of them if any is over it."""
    over = [h for h in r["hits"] if kept(h, vector, bm25)]
    if gate:
        return list(r["hits"]) if over else []
    return over


def rates(rows: list[dict[str, Any]], vector: float, bm25: float, gate: bool) -> tuple[float, float, float]:
    """(share of positives whose answer is in the top 10 and kept, of those found at all; share of
    positives' answers in the kept top 5; share of negatives left empty)."""
    positives = [r for r in rows if r["positive"]]
    negatives = [r for r in rows if not r["positive"]]

    def answer_kept(r: dict[str, Any], k: int) -> bool:
        return any(h.memory.session_id in r["answers"] for h in shown(r, vector, bm25, gate)[:k])

    found = [r for r in positives if any(h.memory.session_id in r["answers"] for h in r["hits"])]
    at10 = sum(answer_kept(r, 10) for r in found) / max(1, len(found))
    at5 = sum(answer_kept(r, 5) for r in positives) / max(1, len(positives))
    empty = sum(not shown(r, vector, bm25, gate) for r in negatives) / max(1, len(negatives))
    return at10, at5, empty


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vector", type=float, default=0.0, help="the chosen vector floor to report on test")
    parser.add_argument("--bm25", type=float, default=2.0, help="the chosen BM25 floor to report on test")
    parser.add_argument("--gate", action="store_true", help="report the floor as a gate (all hits or none) on test")
    args = parser.parse_args()
    data = json.loads(SET.read_text())
    sessions = list(data["conversations"])
    stored = set(sessions[::2])
    embedder = BundledEmbedder()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as root:
        store = EdgeStore(Path(root), embedder.model, embedder.dim)
        await store.open()
        try:
            memories = [
                exchange(f"{name}:{i}", user, assistant, embedder.model)
                for name in sessions
                if name in stored
                for i, (user, assistant) in enumerate(data["conversations"][name])
            ]
            vectors = await embedder.embed_documents([m.text for m in memories])
            for memory, vector in zip(memories, vectors, strict=True):
                await store.upsert(memory, vector)
            for question in data["questions"]:
                answers = set(question["answers"])
                in_store = {a for a in answers if a.split(":")[0] in stored}
                if in_store and in_store != answers:
                    continue  # answered partly in a stored session: neither a clean positive nor a negative
                hits = await store.hybrid_search(
                    question["q"],
                    await embedder.embed_query(question["q"]),
                    [SCOPE],
                    limit=10,
                    alpha=0.5,
                    min_score=0.0,
                    fusion="normalized",
                )
                rows.append({"split": question["split"], "positive": bool(in_store), "answers": answers, "hits": hits})
        finally:
            await store.close()
            await embedder.close()
    dev = [r for r in rows if r["split"] == "dev"]
    test = [r for r in rows if r["split"] == "test"]
    print(
        f"stored: {len(stored)} of {len(sessions)} sessions ({len(memories)} exchanges); "
        f"dev {sum(r['positive'] for r in dev)} positives, {sum(not r['positive'] for r in dev)} negatives"
    )
    print(f"{'':13}{'per hit':^24}{'as a gate':^24}   (dev)")
    print(f"{'vector':>7}{'bm25':>6}" + f"{'kept@10':>9}{'kept@5':>8}{'empty':>7}" * 2)
    for floor_v in VECTORS:
        for floor_b in BM25S:
            cells = [*rates(dev, floor_v, floor_b, False), *rates(dev, floor_v, floor_b, True)]
            print(
                f"{floor_v:>7.2f}{floor_b:>6.2f}"
                + "".join(f"{c:>{w}.3f}" for c, w in zip(cells, [9, 8, 7] * 2, strict=True))
            )
    at10, at5, empty = rates(test, args.vector, args.bm25, args.gate)
    _, bare5, _ = rates(test, 0.0, 2.0, False)
    print(
        f"test ({sum(r['positive'] for r in test)} positives, {sum(not r['positive'] for r in test)} negatives), "
        f"vector {args.vector} bm25 {args.bm25} {'as a gate' if args.gate else 'per hit'}: "
        f"kept@10 {at10:.3f}  kept@5 {at5:.3f} (no floor: {bare5:.3f})  empty {empty:.3f}"
    )


if __name__ == "__main__":
    asyncio.run(main())
