"""Recall@5 and @10 on memstream's own labelled retrieval set (bench/quality/retrieval/conversations.json):
vector only, BM25 only, hybrid as recall ranked before issue 25 (Pipeline v2's weighted sum over per-query
min-max scaled legs, MEMSTREAM_RECALL_ALPHA), hybrid + session-aware fusion as recall ranks now
(``SESSION_WEIGHT`` in memstream.recall.sessions), hybrid + rerank, and the spec's raw-score
fusion for comparison.

Every exchange (a user turn and the reply) is stored as raw mode stores it, one conversation memory,
all in one project, its session the conversation it belongs to. The haystack is every exchange of the
labelled set plus ChatterBot's English dialogue corpus (chatterbot-corpus 1.3.3, BSD-3-Clause, read
from the installed package) as unlabelled distractors. A question counts as found at k when one of
the exchanges that answer it is among the top k; by session, when an exchange of a session that
answers it is (the measure of the public benchmark issue 25 cites).

The questions are split: ``dev`` may be tuned on (the alpha and session-weight sweeps and other fusions
are printed for it alone); ``test`` is only reported. The embedder is the bundled one
(multilingual-e5-small), the store Qdrant Edge, searched through the same ``store.search`` and
``store.hybrid_search`` that recall uses, with the candidate pool recall asks for. The reranker is a
deterministic fake (query-term overlap) through the same ``rerank_top`` (top 20) as the real ones: it
measures the plumbing, not a model.

    .venv/bin/python -m bench.quality.retrieval [--alphas 0.3,...,0.9] [--session-weights 0.1,...] [--no-distractors]
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
from typing import Any

import msgspec

from memstream.embed.bundled import BundledEmbedder
from memstream.identity import memory_id, normalize_content
from memstream.recall.rerank import rerank_top
from memstream.recall.search import SESSION_POOL
from memstream.recall.sessions import SESSION_WEIGHT, session_fusion
from memstream.schemas import Memory
from memstream.settings import Settings
from memstream.store.base import Fusion
from memstream.store.edge import EdgeStore

SET = Path(__file__).parent / "retrieval" / "conversations.json"
SCOPE = "p_retrieval"
KS = (5, 10)
#: Results a search returns (the API's default), and how many of them the reranker reorders.
LIMIT = 10
RERANK_TOP_N = 20
SPLITS = ("dev", "test")
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


def labelled_exchanges(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The labelled set's exchanges as (``<conversation>:<index>``, user, assistant)."""
    return [
        (f"{name}:{i}", user, assistant)
        for name, turns in data["conversations"].items()
        for i, (user, assistant) in enumerate(turns)
    ]


def distractors() -> list[tuple[str, str, str]]:
    """ChatterBot's English corpus as (key, user, reply) exchanges: each conversation's turns paired in order.

    The key is ``chatterbot-<file>-<conversation>:<exchange>``: each conversation is a session."""
    import chatterbot_corpus
    import yaml

    root = Path(chatterbot_corpus.__file__).parent / "data" / "english"
    out: list[tuple[str, str, str]] = []
    for path in sorted(root.glob("*.yml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        turns = [[str(t) for t in conversation] for conversation in data["conversations"]]
        for c, conversation in enumerate(turns):
            pairs = [(conversation[i], conversation[i + 1]) for i in range(0, len(conversation) - 1, 2)]
            out.extend((f"chatterbot-{path.stem}-{c}:{n}", user, reply) for n, (user, reply) in enumerate(pairs))
    return out


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
        # The session is the conversation (``name:index`` keys): session-aware fusion reads it.
        session_id=key.rsplit(":", 1)[0],
    )


def recall_at(ranked: Sequence[Sequence[str]], answers: Sequence[set[str]], k: int) -> float:
    return sum(1 for ids, good in zip(ranked, answers, strict=True) if good & set(ids[:k])) / len(answers)


def sessions_of(ranked: Sequence[Sequence[str]], session: dict[str, str]) -> list[list[str]]:
    """Each ranking as the sessions of its hits, in order: session recall counts a question found when
    an exchange of a session that answers it is among the top k (as the held-out benchmark of issue 25)."""
    return [[session[i] for i in ids] for ids in ranked]


def rrf(vector: Sequence[str], bm25: Sequence[str], k: int) -> list[str]:
    """Reciprocal rank fusion of two ranked id lists."""
    score: dict[str, float] = {}
    for ranking in (vector, bm25):
        for rank, memory in enumerate(ranking):
            score[memory] = score.get(memory, 0.0) + 1 / (k + rank + 1)
    return sorted(score, key=lambda i: (-score[i], i))


def windows(exchanges: Sequence[tuple[str, str, str]], reach: int) -> list[tuple[str, str]]:
    """(center key, text) per exchange: the exchanges ``reach`` before and after it in its session, and
    itself (``reach`` 1: six turns), as the window grain indexes them."""
    by_session: dict[str, list[tuple[str, str, str]]] = {}
    for exchange in exchanges:
        by_session.setdefault(exchange[0].rsplit(":", 1)[0], []).append(exchange)
    out = []
    for turns in by_session.values():
        for i, (key, _, _) in enumerate(turns):
            around = turns[max(0, i - reach) : i + reach + 1]
            out.append((key, "\n".join(f"[user] {u}\n[assistant] {a}" for _, u, a in around)))
    return out


def mean_windows(
    exchanges: Sequence[tuple[str, str, str]], vectors: Sequence[Sequence[float]], reach: int, trailing: bool = False
) -> list[tuple[str, str, list[float]]]:
    """(key, text, vector) per window with no new embedding: the window's dense vector is the normalized
    mean of its exchanges' vectors (already computed when they were stored), its text their concatenation
    (for BM25). ``trailing``: the window is the exchange and the ``2 × reach`` before it (what a stage can
    build the moment the exchange arrives, with no wait for the next); else it is centered on it."""
    by_session: dict[str, list[int]] = {}
    for n, exchange in enumerate(exchanges):
        by_session.setdefault(exchange[0].rsplit(":", 1)[0], []).append(n)
    out = []
    for members in by_session.values():
        for i, n in enumerate(members):
            around = members[max(0, i - 2 * reach) : i + 1] if trailing else members[max(0, i - reach) : i + reach + 1]
            total = [sum(vectors[m][d] for m in around) for d in range(len(vectors[n]))]
            norm = sum(x * x for x in total) ** 0.5 or 1.0
            text = "\n".join(f"[user] {exchanges[m][1]}\n[assistant] {exchanges[m][2]}" for m in around)
            out.append((exchanges[n][0], text, [x / norm for x in total]))
    return out


async def embedded(embedder: BundledEmbedder, texts: Sequence[str], cache: Path | None) -> list[list[float]]:
    """The passages' vectors, read from ``cache`` (a JSON map text hash → vector) when there, so runs
    on a busy machine re-embed only what changed. The cache is a scratch file, never committed."""
    import hashlib

    known = _read_cache(cache)
    keys = [hashlib.sha256(f"{embedder.model}\0{t}".encode()).hexdigest() for t in texts]
    missing = [i for i, k in enumerate(keys) if k not in known]
    if missing:
        for i, vector in zip(missing, await embedder.embed_documents([texts[i] for i in missing]), strict=True):
            known[keys[i]] = [float(x) for x in vector]
        if cache is not None:
            _write_cache(cache, known)
    return [known[k] for k in keys]


def _read_cache(cache: Path | None) -> dict[str, list[float]]:
    return json.loads(cache.read_text()) if cache is not None and cache.exists() else {}


def _write_cache(cache: Path, known: dict[str, list[float]]) -> None:
    cache.write_text(json.dumps(known))


async def mean_window_grain(
    exchanges_store: EdgeStore,
    embedder: BundledEmbedder,
    root: Path,
    exchanges: Sequence[tuple[str, str, str]],
    vectors: Sequence[Sequence[float]],
    ids: dict[str, str],
    questions: Sequence[dict[str, Any]],
    queries: Sequence[Sequence[float]],
    alpha: float,
    weight: float,
    trailing: bool,
) -> dict[str, list[list[str]]]:
    """As :func:`window_grain`, but the windows cost no embedding (:func:`mean_windows`)."""
    store = EdgeStore(root / ("trailing" if trailing else "mean"), embedder.model, embedder.dim)
    await store.open()
    try:
        center: dict[str, str] = {}
        for key, text, vector in mean_windows(exchanges, vectors, 1, trailing):
            memory = exchange_memory(key, text, "", embedder.model)
            memory = msgspec.structs.replace(memory, text=text, session_id=key.rsplit(":", 1)[0])
            center[memory.id] = ids[key]
            await store.upsert(memory, vector)
        return await _grain_rankings(exchanges_store, store, center, questions, queries, alpha, weight)
    finally:
        await store.close()


_MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


def session_day(session: str) -> datetime:
    """A made-up day for a session, spread over 2024-2025 by a hash of its name (the set has no dates)."""
    import hashlib
    from datetime import timedelta

    days = int(hashlib.sha256(session.encode()).hexdigest(), 16) % 730
    return datetime(2024, 1, 1, 12, tzinfo=UTC) + timedelta(days=days)


async def dated(
    embedder: BundledEmbedder,
    root: Path,
    memories: Sequence[Memory],
    vectors: Sequence[Sequence[float]],
    ids: dict[str, str],
    questions: Sequence[dict[str, Any]],
    alpha: float,
    weight: float,
) -> dict[str, list[list[str]]]:
    """The set dated (issue 40.2): each session said on a made-up day (:func:`session_day`), each question
    asked as "… (in <month> <year>)" of its first answer's session, ranked as recall ranks a query naming
    a time (pool ``TIME_POOL``, session fusion, ``said_then``), the span read as of the clock or anchored
    (``recall.dates.anchored``). The day is in no stored term or vector (issue 40: that moved the gates)."""
    from memstream.recall.dates import TIME_POOL, anchored, said_then
    from memstream.rules.dates import time_named

    stamped = [msgspec.structs.replace(m, created_at=session_day(m.session_id or "")) for m in memories]
    session_of = {ids[a]: a.rsplit(":", 1)[0] for q in questions for a in q["answers"]}
    asked = []
    for q in questions:
        day = session_day(session_of[ids[q["answers"][0]]])
        asked.append(f"{q['q']} (in {_MONTH_NAMES[day.month - 1]} {day.year})")
    queries = [await embedder.embed_query(text) for text in asked]
    now = datetime(2026, 1, 1, tzinfo=UTC)
    out: dict[str, list[list[str]]] = {}
    store = EdgeStore(root / "dated", embedder.model, embedder.dim)
    await store.open()
    try:
        for memory, vector in zip(stamped, vectors, strict=True):
            await store.upsert(memory, vector)
        for prefer in ("no time preference", "time preferred (said_then)", "time preferred, anchored"):
            ranked = []
            for text, vector in zip(asked, queries, strict=True):
                hits = await store.hybrid_search(
                    text, vector, [SCOPE], limit=TIME_POOL, alpha=alpha, min_score=0.0, fusion="normalized"
                )
                hits = session_fusion(hits, weight)
                if prefer != "no time preference":
                    span = anchored(text, now, hits) if "anchored" in prefer else time_named(text, now)
                    hits = said_then(hits, span)
                ranked.append([h.memory.id for h in hits])
            out[prefer] = ranked
    finally:
        await store.close()
    return out


async def window_grain(
    exchanges_store: EdgeStore,
    embedder: BundledEmbedder,
    root: Path,
    exchanges: Sequence[tuple[str, str, str]],
    ids: dict[str, str],
    questions: Sequence[dict[str, Any]],
    queries: Sequence[Sequence[float]],
    alpha: float,
    weight: float,
) -> dict[str, list[list[str]]]:
    """Rankings with a second grain: each exchange's window in a store of its own (so neither grain's BM25
    statistics move the other's), searched as recall searches; a window hit ranks its center exchange."""
    store = EdgeStore(root / "windows", embedder.model, embedder.dim)
    await store.open()
    try:
        grain = windows(exchanges, 1)
        texts = [text for _, text in grain]
        started = asyncio.get_running_loop().time()
        vectors = await embedder.embed_documents(texts)
        took = asyncio.get_running_loop().time() - started
        center: dict[str, str] = {}
        for (key, text), vector in zip(grain, vectors, strict=True):
            memory = exchange_memory(key, text, "", embedder.model)
            memory = msgspec.structs.replace(memory, text=text, session_id=key.rsplit(":", 1)[0])
            center[memory.id] = ids[key]
            await store.upsert(memory, vector)
        print(f"window grain: {len(grain)} windows embedded in {took:.1f} s ({len(grain) / took:.1f}/s)")
        return await _grain_rankings(exchanges_store, store, center, questions, queries, alpha, weight)
    finally:
        await store.close()


async def _grain_rankings(
    exchanges_store: EdgeStore,
    windows_store: EdgeStore,
    center: dict[str, str],
    questions: Sequence[dict[str, Any]],
    queries: Sequence[Sequence[float]],
    alpha: float,
    weight: float,
) -> dict[str, list[list[str]]]:
    out: dict[str, list[list[str]]] = {}
    pool = max(LIMIT, SESSION_POOL)
    per_query = []
    for q, vector in zip(questions, queries, strict=True):
        hits = await exchanges_store.hybrid_search(
            q["q"], vector, [SCOPE], limit=pool, alpha=alpha, min_score=0.0, fusion="normalized"
        )
        window_hits = await windows_store.hybrid_search(
            q["q"], vector, [SCOPE], limit=pool, alpha=alpha, min_score=0.0, fusion="normalized"
        )
        per_query.append((hits, window_hits))
    out["exchanges only + session fusion (recall now)"] = [
        [h.memory.id for h in session_fusion(hits, weight)] for hits, _ in per_query
    ]
    out["windows only (center exchange)"] = [_dedup([center[h.memory.id] for h in w]) for _, w in per_query]
    for k in (10, 60):
        out[f"exchange + window, RRF k={k}"] = [
            rrf([h.memory.id for h in session_fusion(hits, weight)], [center[h.memory.id] for h in w], k)
            for hits, w in per_query
        ]
    for share in (0.1, 0.2, 0.3, 0.5, 0.7):
        ranked = []
        for hits, w in per_query:
            score: dict[str, float] = {}
            for hit in session_fusion(hits, weight):
                score[hit.memory.id] = score.get(hit.memory.id, 0.0) + (1 - share) * hit.score
            for hit in w:
                score[center[hit.memory.id]] = score.get(center[hit.memory.id], 0.0) + share * hit.score
            ranked.append(sorted(score, key=lambda i: (-score[i], i)))
        out[f"exchange + window, scores summed, window share {share}"] = ranked
    return out


def _dedup(ids: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ids))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alphas", default="0.3,0.4,0.5,0.6,0.7,0.8,0.9")
    parser.add_argument("--session-weights", default="0.1,0.2,0.3,0.4,0.5")
    parser.add_argument("--no-distractors", action="store_true", help="the labelled exchanges alone")
    parser.add_argument(
        "--grains",
        action="store_true",
        help="also index a window of neighbouring exchanges per exchange (issue 40.1) and compare fusions",
    )
    parser.add_argument(
        "--mean-windows",
        action="store_true",
        help="windows whose vector is the mean of their exchanges' (no new embedding; centered and trailing)",
    )
    parser.add_argument(
        "--dated", action="store_true", help="each session on a made-up day, each question naming its month"
    )
    parser.add_argument("--cache", type=Path, help="a scratch JSON file of passage vectors reused between runs")
    args = parser.parse_args()
    alphas = [float(x) for x in args.alphas.split(",")]
    weights = [float(x) for x in args.session_weights.split(",")]
    alpha, weight = Settings.from_env({}).recall_alpha, SESSION_WEIGHT
    data = json.loads(SET.read_text())
    embedder = BundledEmbedder()
    with tempfile.TemporaryDirectory() as root:
        store = EdgeStore(Path(root), embedder.model, embedder.dim)
        await store.open()
        try:
            exchanges = labelled_exchanges(data)
            labelled = len(exchanges)
            if not args.no_distractors:
                exchanges += distractors()
            memories = [exchange_memory(key, u, a, embedder.model) for key, u, a in exchanges]
            vectors = await embedded(embedder, [m.text for m in memories], args.cache)
            ids: dict[str, str] = {}
            for (key, _, _), memory, vector in zip(exchanges, memories, vectors, strict=True):
                ids[key] = memory.id
                await store.upsert(memory, vector)
            questions = data["questions"]
            queries = [await embedder.embed_query(q["q"]) for q in questions]

            async def ranked(
                a: float, fusion: Fusion, *, rerank: bool = False, session_weight: float = 0.0
            ) -> list[list[str]]:
                # The candidates search asks the store for, as recall.search does: ten hits, or the
                # session pool when session-aware fusion is on (the legs' pools follow from it).
                pool = max(LIMIT, SESSION_POOL) if session_weight > 0 else LIMIT
                if rerank:
                    pool = max(pool, RERANK_TOP_N)
                out = []
                for q, vector in zip(questions, queries, strict=True):
                    hits = await store.hybrid_search(
                        q["q"], vector, [SCOPE], limit=pool, alpha=a, min_score=0.0, fusion=fusion
                    )
                    hits = session_fusion(hits, session_weight)
                    if rerank:
                        hits = await rerank_top(q["q"], hits, OverlapReranker(), top_n=RERANK_TOP_N)
                    out.append([h.memory.id for h in hits])
                return out

            vector_only = [[h.memory.id for h in await store.search(v, [SCOPE], limit=50)] for v in queries]
            bm25_only = await ranked(0.0, "weighted")
            rows: dict[str, list[list[str]]] = {
                "vector": vector_only,
                "BM25": bm25_only,
                f"hybrid (alpha {alpha}, legs scaled per query): before": await ranked(alpha, "normalized"),
                f"hybrid + session fusion (weight {weight}): recall's default": await ranked(
                    alpha, "normalized", session_weight=weight
                ),
                f"hybrid (alpha {alpha}, scaled) + rerank (fake)": await ranked(alpha, "normalized", rerank=True),
                "hybrid, the spec's raw scores, alpha 0.7": await ranked(0.7, "weighted"),
                "hybrid, the spec's raw scores, alpha 0.9": await ranked(0.9, "weighted"),
            }

            session = {m.id: m.session_id for m in memories}

            def table(title: str, rows: dict[str, list[list[str]]], splits: Sequence[str]) -> None:
                print(title)
                head = " ".join(f"{s + ' @' + str(k):>10}" for s in splits for k in KS)
                print(f"  {'ranking':<60} {head} {'(sessions)':>10} {head}")
                for name, lists in rows.items():
                    cells, by_session = [], []
                    for split in splits:
                        chosen = [i for i, q in enumerate(questions) if q["split"] == split]
                        picked = [lists[i] for i in chosen]
                        good = [{ids[a] for a in questions[i]["answers"]} for i in chosen]
                        cells += [f"{recall_at(picked, good, k):>10.3f}" for k in KS]
                        good_sessions = [{session[g] for g in answers} for answers in good]
                        by_session += [
                            f"{recall_at(sessions_of(picked, session), good_sessions, k):>10.3f}" for k in KS
                        ]
                    print(f"  {name:<60} " + " ".join(cells) + f" {'':>10} " + " ".join(by_session))

            counts = {s: sum(1 for q in questions if q["split"] == s) for s in SPLITS}
            print(
                f"{len(memories)} exchanges ({labelled} labelled, {len(memories) - labelled} distractors), "
                f"{len(questions)} questions (dev {counts['dev']}, test {counts['test']}), embedder {embedder.model}"
            )
            table("recall@k: dev may be tuned on, test is only reported (never tuned on)", rows, SPLITS)
            sweep: dict[str, Any] = {}
            for a in alphas:
                sweep[f"scaled legs, alpha {a:.1f}"] = await ranked(a, "normalized")
            for a in alphas:
                sweep[f"the spec's raw scores, alpha {a:.1f}"] = await ranked(a, "weighted")
            for w in weights:
                sweep[f"scaled legs, alpha {alpha}, session fusion {w:.2f}"] = await ranked(
                    alpha, "normalized", session_weight=w
                )
            for k in (10, 60):
                sweep[f"reciprocal rank fusion, k={k}"] = [
                    rrf(v, b, k) for v, b in zip(vector_only, bm25_only, strict=True)
                ]
            table("fusions compared, dev only (what alpha and the fusion were chosen on)", sweep, ("dev",))
            if args.grains:
                grained = await window_grain(
                    store, embedder, Path(root), exchanges, ids, questions, queries, alpha, weight
                )
                table("window grain (issue 40.1): dev may be tuned on, test is only reported", grained, SPLITS)
            if args.dated:
                table(
                    "dated set (issue 40.2): dev may be tuned on, test only reported",
                    await dated(embedder, Path(root), memories, vectors, ids, questions, alpha, weight),
                    SPLITS,
                )
            if args.mean_windows:
                for trailing in (False, True):
                    grained = await mean_window_grain(
                        store,
                        embedder,
                        Path(root),
                        exchanges,
                        vectors,
                        ids,
                        questions,
                        queries,
                        alpha,
                        weight,
                        trailing,
                    )
                    kind = "trailing (the exchange and the two before it)" if trailing else "centered"
                    table(f"mean-vector windows, {kind}: dev may be tuned on, test only reported", grained, SPLITS)
        finally:
            await store.close()
            await embedder.close()


if __name__ == "__main__":
    asyncio.run(main())
