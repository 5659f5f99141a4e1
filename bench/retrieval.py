"""Recall@5 and @10 on memstream's own labelled retrieval set (bench/retrieval/conversations.json):
vector only, BM25 only, hybrid (seed 003's fusion at MEMSTREAM_RECALL_ALPHA) and hybrid + rerank.

Every exchange (a user turn and the reply) is stored as raw mode stores it, one conversation memory,
all in one project: the haystack is every exchange of every conversation. A question counts as found
at k when one of the exchanges that answer it is among the top k. The embedder is the bundled one
(multilingual-e5-small), the store Qdrant Edge, searched through the same ``store.search`` and
``store.hybrid_search`` that recall uses. The reranker is a deterministic fake (query-term overlap),
through the same ``rerank_top`` (top 20) as the real ones: it measures the plumbing, not a model.

    .venv/bin/python -m bench.retrieval [--alphas 0.3,0.5,0.6,0.7,0.8,0.9]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from memstream.embed.bundled import BundledEmbedder
from memstream.identity import memory_id, normalize_content
from memstream.rerank import rerank_top
from memstream.schemas import Memory
from memstream.settings import Settings
from memstream.store.edge import EdgeStore

SET = Path(__file__).parent / "retrieval" / "conversations.json"
SCOPE = "p_retrieval"
KS = (5, 10)
_WORD = re.compile(r"[a-z0-9_]{3,}")


class OverlapReranker:
    """Deterministic stand-in for a reranker: more distinct query words in the text ranks higher."""

    name = "fake/overlap"

    async def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
        words = set(_WORD.findall(query.lower()))
        overlap = [len(words & set(_WORD.findall(doc.lower()))) for doc in documents]
        return sorted(range(len(documents)), key=lambda i: -overlap[i])  # stable: ties keep the search order

    async def close(self) -> None:
        return None


def exchange_memory(key: str, user: str, assistant: str, model: str) -> Memory:
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


def recall_at(ranked: list[list[str]], answers: list[set[str]], k: int) -> float:
    return sum(1 for ids, good in zip(ranked, answers, strict=True) if good & set(ids[:k])) / len(answers)


def minmax_score(leg: dict[str, tuple[float, float]], memory: str, alpha: float) -> float:
    """Each leg rescaled to [0, 1] over this query's candidates, then weighted."""

    def scaled(values: list[float], value: float) -> float:
        low, high = min(values), max(values)
        return (value - low) / (high - low) if high > low else 0.0

    vectors, lexical = [v for v, _ in leg.values()], [b for _, b in leg.values()]
    v, b = leg[memory]
    return alpha * scaled(vectors, v) + (1 - alpha) * scaled(lexical, b)


def zero_filled(leg: dict[str, tuple[float, float]], alpha: float) -> list[str]:
    """Candidates by the weighted sum of both legs' scores, a missing leg counting 0."""
    return sorted(leg, key=lambda i: -(alpha * leg[i][0] + (1 - alpha) * leg[i][1]))


def min_max(leg: dict[str, tuple[float, float]], alpha: float) -> list[str]:
    """Candidates by :func:`minmax_score`."""
    return sorted(leg, key=lambda i: -minmax_score(leg, i, alpha))


def rrf(leg: dict[str, tuple[float, float]], k: int) -> list[str]:
    by_vector = sorted(leg, key=lambda i: -leg[i][0])
    by_bm25 = [i for i in sorted(leg, key=lambda i: -leg[i][1]) if leg[i][1] > 0]
    score = {i: 1 / (k + by_vector.index(i) + 1) + (1 / (k + by_bm25.index(i) + 1) if i in by_bm25 else 0) for i in leg}
    return sorted(leg, key=lambda i: -score[i])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alphas", default="0.3,0.4,0.5,0.6,0.7,0.8,0.9")
    args = parser.parse_args()
    alpha = Settings.from_env({}).recall_alpha
    data = json.loads(SET.read_text())
    embedder = BundledEmbedder()
    with tempfile.TemporaryDirectory() as root:
        store = EdgeStore(Path(root), embedder.model, embedder.dim)
        await store.open()
        try:
            ids: dict[str, str] = {}
            exchanges = [
                (f"{name}:{i}", user, assistant)
                for name, turns in data["conversations"].items()
                for i, (user, assistant) in enumerate(turns)
            ]
            memories = [exchange_memory(key, u, a, embedder.model) for key, u, a in exchanges]
            vectors = await embedder.embed_documents([m.text for m in memories])
            for (key, _, _), memory, vector in zip(exchanges, memories, vectors, strict=True):
                ids[key] = memory.id
                await store.upsert(memory, vector)
            questions = data["questions"]
            answers = [{ids[a] for a in q["answers"]} for q in questions]
            queries = [await embedder.embed_query(q["q"]) for q in questions]

            async def ranked(alpha: float, *, rerank: bool = False) -> list[list[str]]:
                out = []
                for q, vector in zip(questions, queries, strict=True):
                    hits = await store.hybrid_search(q["q"], vector, [SCOPE], limit=20, alpha=alpha, min_score=0.0)
                    if rerank:
                        hits = await rerank_top(q["q"], hits, OverlapReranker(), top_n=20)
                    out.append([h.memory.id for h in hits])
                return out

            vector_only = [[h.memory.id for h in await store.search(v, [SCOPE], limit=20)] for v in queries]
            rows = {
                "vector": vector_only,
                "BM25": await ranked(0.0),
                f"hybrid (alpha {alpha})": await ranked(alpha),
                f"hybrid (alpha {alpha}) + rerank (fake)": await ranked(alpha, rerank=True),
            }
            print(f"{len(memories)} exchanges, {len(questions)} questions, embedder {embedder.model}")
            print(f"{'ranking':<36} " + " ".join(f"{'recall@' + str(k):>10}" for k in KS))
            for name, lists in rows.items():
                print(f"{name:<36} " + " ".join(f"{recall_at(lists, answers, k):>10.3f}" for k in KS))
            print("alpha sweep (hybrid, seed 003's fusion):")
            for a in (float(x) for x in args.alphas.split(",")):
                lists = await ranked(a)
                print(f"  alpha {a:.1f}: " + "  ".join(f"@{k} {recall_at(lists, answers, k):.3f}" for k in KS))
            # Other fusions tried, from both legs' normalized scores (alpha 0.5 runs both legs in full).
            legs = []
            for q, vector in zip(questions, queries, strict=True):
                hits = await store.hybrid_search(q["q"], vector, [SCOPE], limit=60, alpha=0.5, min_score=0.0)
                legs.append({h.memory.id: (h.vector_score or 0.0, h.bm25_score or 0.0) for h in hits})
            print("other fusions tried (not used):")
            for a in (float(x) for x in args.alphas.split(",")):
                zero = [zero_filled(leg, a) for leg in legs]
                scaled = [min_max(leg, a) for leg in legs]
                print(
                    f"  alpha {a:.1f}: missing leg = 0 "
                    + " ".join(f"@{k} {recall_at(zero, answers, k):.3f}" for k in KS)
                    + "   min-max per query "
                    + " ".join(f"@{k} {recall_at(scaled, answers, k):.3f}" for k in KS)
                )
            for kk in (10, 60):
                fused = [rrf(leg, kk) for leg in legs]
                print(
                    f"  reciprocal rank fusion k={kk}: "
                    + " ".join(f"@{k} {recall_at(fused, answers, k):.3f}" for k in KS)
                )
        finally:
            await store.close()
            await embedder.close()


if __name__ == "__main__":
    asyncio.run(main())
