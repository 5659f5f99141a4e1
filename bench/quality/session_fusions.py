"""Session-fusion variants on both labelled sets at once (issue 40, fifth round): the coding-session set
(bench/quality/retrieval.py, 2,406 exchanges with distractors) and the everyday-chat set
(bench/quality/everyday.py, 7 two-person conversations, each its own project).

Each question's candidates are fetched once, as ``recall.search`` asks the store for them (hybrid, legs
min-max scaled per query, a pool of ``SESSION_POOL``, ``TIME_POOL`` when the query names a time); every
variant then only reorders those candidates (as session fusion does), and the time preference
(``said_then`` with ``anchored``) runs after it, as in search. Exchange and session recall@5/@10 per set and
split: ``dev`` may be tuned on, ``test`` is printed only with ``--test`` (for the one setting chosen).

    .venv/bin/python -m bench.quality.session_fusions [--everyday-cache F] [--coding-cache F] [--test]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from bench.quality import everyday, retrieval
from bench.quality.everyday_set import build as build_everyday
from memstream.embed.bundled import BundledEmbedder
from memstream.identity import memory_id
from memstream.recall import sessions
from memstream.recall.dates import TIME_POOL, anchored, said_then
from memstream.recall.search import SESSION_POOL
from memstream.rules.dates import time_named
from memstream.schemas import Memory
from memstream.schemas.memory import HybridHit
from memstream.settings import Settings
from memstream.store.edge import EdgeStore

KS = (5, 10)
Variant = Callable[[Sequence[HybridHit]], list[HybridHit]]


class Case(msgspec.Struct):
    """One question's candidates, what answers it, and where it is asked."""

    query: str
    split: str
    hits: list[HybridHit]
    answers: set[str]
    answer_sessions: set[str]
    now: datetime
    #: With ``--digest``: the rank of each session's digest point among the query's top 10 digests.
    digest: dict[str, int] = {}
    #: With ``--windows``: the query's best windows, each as a hit on its center exchange (the window's score).
    windows: list[HybridHit] = []


def _ordered(hits: Sequence[HybridHit], score: Sequence[float]) -> list[HybridHit]:
    order = sorted(range(len(hits)), key=lambda i: -score[i])
    return [msgspec.structs.replace(hits[i], score=score[i]) for i in order]


def _by_session(hits: Sequence[HybridHit]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for hit in hits:
        if hit.memory.session_id:
            out.setdefault(hit.memory.session_id, []).append(hit.score)
    for scores in out.values():
        scores.sort(reverse=True)
    return out


def _best_other(scores: Sequence[float], own: float) -> float:
    if not scores:
        return 0.0
    return (scores[1] if len(scores) > 1 else 0.0) if own >= scores[0] else scores[0]


def best_other(weight: float) -> Variant:
    """The fusion before this round: each hit gains ``weight`` x the best other hit of its session, unsplit."""

    def rank(hits: Sequence[HybridHit]) -> list[HybridHit]:
        if weight <= 0.0:
            return list(hits)
        of = _by_session(hits)
        return _ordered(
            hits, [h.score + weight * _best_other(of.get(h.memory.session_id or "", []), h.score) for h in hits]
        )

    return rank


def recall_now(weight: float) -> Variant:
    """``recall.sessions.session_fusion`` as search runs it now (the split of ``per_size`` with power 1)."""
    return lambda hits: sessions.session_fusion(hits, weight)


def floored(weight: float, fraction: float) -> Variant:
    """Only hits scoring at least ``fraction`` of the top score vouch for their session."""

    def rank(hits: Sequence[HybridHit]) -> list[HybridHit]:
        if not hits:
            return []
        top = max(h.score for h in hits)
        strong = _by_session([h for h in hits if h.score >= fraction * top])
        return _ordered(
            hits,
            [
                h.score + weight * _best_other(strong.get(h.memory.session_id or "", []), h.score)
                if h.score >= fraction * top
                else h.score + weight * (strong.get(h.memory.session_id or "", [0.0]) or [0.0])[0]
                for h in hits
            ],
        )

    return rank


def per_size(weight: float, power: float) -> Variant:
    """The best other hit's support divided by (the session's hits in the pool - 1) ** ``power``."""

    def rank(hits: Sequence[HybridHit]) -> list[HybridHit]:
        of = _by_session(hits)
        score = []
        for h in hits:
            mine = of.get(h.memory.session_id or "", [])
            others = max(len(mine) - 1, 1)
            score.append(h.score + weight * _best_other(mine, h.score) / others**power)
        return _ordered(hits, score)

    return rank


def share(weight: float) -> Variant:
    """The best other hit's support times the session's share of the pool."""

    def rank(hits: Sequence[HybridHit]) -> list[HybridHit]:
        of = _by_session(hits)
        n = len(hits) or 1
        return _ordered(
            hits,
            [
                h.score
                + weight
                * _best_other(of.get(h.memory.session_id or "", []), h.score)
                * len(of.get(h.memory.session_id or "", []))
                / n
                for h in hits
            ],
        )

    return rank


def capped(weight: float, top: int) -> Variant:
    """Only the pool's ``top`` best hits vouch for their session."""

    def rank(hits: Sequence[HybridHit]) -> list[HybridHit]:
        best = sorted(hits, key=lambda h: -h.score)[:top]
        chosen = {id(h) for h in best}
        of = _by_session(best)
        score = []
        for h in hits:
            mine = of.get(h.memory.session_id or "", [])
            score.append(h.score + weight * (_best_other(mine, h.score) if id(h) in chosen else (mine or [0.0])[0]))
        return _ordered(hits, score)

    return rank


def rrf_sessions(k: int, weight: float) -> Variant:
    """Reciprocal rank fusion of the exchanges' order and their sessions' (a session ranked by its best hit)."""

    def rank(hits: Sequence[HybridHit]) -> list[HybridHit]:
        ordered = sorted(hits, key=lambda h: -h.score)
        places: dict[str, int] = {}
        for h in ordered:
            if h.memory.session_id and h.memory.session_id not in places:
                places[h.memory.session_id] = len(places)
        score = [
            1 / (k + n + 1) + (weight / (k + places[s] + 1) if (s := h.memory.session_id) else 0.0)
            for n, h in enumerate(ordered)
        ]
        return _ordered(ordered, score)

    return rank


def diverse(weight: float, cap: int, penalty: float) -> Variant:
    """Today's fusion, then each hit beyond a session's first ``cap`` loses ``penalty``."""

    def rank(hits: Sequence[HybridHit]) -> list[HybridHit]:
        fused = best_other(weight)(hits)
        seen: dict[str, int] = {}
        score = []
        for h in fused:
            s = h.memory.session_id or ""
            n = seen.get(s, 0)
            seen[s] = n + 1
            score.append(h.score - (penalty if s and n >= cap else 0.0))
        return _ordered(fused, score)

    return rank


def relative(weight: float) -> Variant:
    """The best other hit's support times its own share of the top score (weak mates vouch less)."""

    def rank(hits: Sequence[HybridHit]) -> list[HybridHit]:
        if not hits:
            return []
        top = max(h.score for h in hits) or 1.0
        of = _by_session(hits)
        return _ordered(
            hits,
            [
                h.score + weight * (o := _best_other(of.get(h.memory.session_id or "", []), h.score)) * o / top
                for h in hits
            ],
        )

    return rank


def recall(cases: Sequence[Case], ranked: Sequence[Sequence[HybridHit]], k: int, by_session: bool) -> float:
    found = 0
    for case, hits in zip(cases, ranked, strict=True):
        if by_session:
            found += any(h.memory.session_id in case.answer_sessions for h in hits[:k])
        else:
            found += any(h.memory.id in case.answers for h in hits[:k])
    return found / len(cases)


def ranked_by(variant: Variant, cases: Sequence[Case], prefer_time: bool | str = True) -> list[list[HybridHit]]:
    """``prefer_time``: True as search does (``anchored``), "clock" the span as of the clock, False none."""
    out = []
    for case in cases:
        hits = variant(case.hits)
        span = time_named(case.query, case.now) if prefer_time else None
        if span is not None and prefer_time is True:
            span = anchored(case.query, case.now, hits)
        out.append(said_then(hits, span))
    return out


def _session_members(stored: Sequence[Memory]) -> dict[tuple[str, str], list[int]]:
    """The positions of ``stored`` per (scope key, session), in stored order."""
    members: dict[tuple[str, str], list[int]] = {}
    for n, memory in enumerate(stored):
        members.setdefault((memory.scope_key, memory.session_id or ""), []).append(n)
    return members


def _mean(matrix: np.ndarray, of: Sequence[int]) -> list[float]:
    """The normalized mean of these rows' vectors (no new embedding)."""
    mean = matrix[list(of)].sum(axis=0)
    mean /= float(np.linalg.norm(mean)) or 1.0
    return [float(x) for x in mean]


async def _grain_search(
    root: Path,
    embedder: BundledEmbedder,
    points: Sequence[tuple[Memory, list[float]]],
    asks: Sequence[tuple[str, list[float], list[str]]],
    alpha: float,
    limit: int,
) -> list[list[HybridHit]]:
    """A grain's ``points`` in a store of their own, and each ask's best ``limit`` of them (recall's hybrid)."""
    store = EdgeStore(root / f"grain-{len(points)}-{limit}", embedder.model, embedder.dim)
    await store.open()
    try:
        for memory, vector in points:
            await store.upsert(memory, vector)
        return [
            await store.hybrid_search(
                query, vector, scopes, limit=limit, alpha=alpha, min_score=0.0, fusion="normalized"
            )
            for query, vector, scopes in asks
        ]
    finally:
        await store.close()


async def digest_ranks(
    root: Path,
    embedder: BundledEmbedder,
    stored: Sequence[Memory],
    vectors: Sequence[Sequence[float]],
    asks: Sequence[tuple[str, list[float], list[str]]],
    alpha: float,
) -> list[dict[str, int]]:
    """The session grain of ``bench.quality.everyday --digest`` (no new embedding): per session one point,
    its vector the normalized mean of its exchanges', its text theirs joined; each ask's top 10 digests."""
    matrix = np.asarray(vectors, dtype=np.float32)
    points = [
        (
            msgspec.structs.replace(
                stored[of[0]],
                id=memory_id(scope_key, f"digest {name}"),
                text="\n".join(stored[m].text for m in of),
                session_id=name,
            ),
            _mean(matrix, of),
        )
        for (scope_key, name), of in _session_members(stored).items()
    ]
    found = await _grain_search(root, embedder, points, asks, alpha, 10)
    return [{h.memory.session_id or "": rank for rank, h in enumerate(hits)} for hits in found]


async def window_hits(
    root: Path,
    embedder: BundledEmbedder,
    stored: Sequence[Memory],
    vectors: Sequence[Sequence[float]],
    asks: Sequence[tuple[str, list[float], list[str]]],
    alpha: float,
) -> list[list[HybridHit]]:
    """The window grain with no new embedding (as ``bench.quality.retrieval --mean-windows``): per exchange
    a window of it and its neighbours in its session (one before, one after), its vector the normalized
    mean of theirs, its text theirs joined; each ask's best ``SESSION_POOL`` windows as hits on their center."""
    matrix = np.asarray(vectors, dtype=np.float32)
    center: dict[str, Memory] = {}
    points = []
    for (scope_key, _), of in _session_members(stored).items():
        for i, n in enumerate(of):
            around = of[max(0, i - 1) : i + 2]
            window = msgspec.structs.replace(
                stored[n], id=memory_id(scope_key, f"window {n}"), text="\n".join(stored[m].text for m in around)
            )
            center[window.id] = stored[n]
            points.append((window, _mean(matrix, around)))
    found = await _grain_search(root, embedder, points, asks, alpha, SESSION_POOL)
    return [[msgspec.structs.replace(h, memory=center[h.memory.id]) for h in hits] for hits in found]


def with_windows(ranked: Sequence[HybridHit], windows: Sequence[HybridHit], share: float) -> list[HybridHit]:
    """Each exchange's score: (1 - share) x its fused score + share x its best window's score."""
    by_id: dict[str, HybridHit] = {}
    score: dict[str, float] = {}
    for h in ranked:
        by_id.setdefault(h.memory.id, h)
        score[h.memory.id] = max(score.get(h.memory.id, 0.0), (1 - share) * h.score)
    seen: set[str] = set()
    for w in windows:
        if w.memory.id in seen:
            continue
        seen.add(w.memory.id)
        by_id.setdefault(w.memory.id, w)
        score[w.memory.id] = score.get(w.memory.id, 0.0) + share * w.score
    order = sorted(score, key=lambda i: -score[i])
    return [msgspec.structs.replace(by_id[i], score=score[i]) for i in order]


def with_digest(ranked: Sequence[HybridHit], ranks: dict[str, int], share: float) -> list[HybridHit]:
    """Reciprocal rank fusion (k 10) of the exchange's rank and its session digest's, as the everyday bench."""
    score = [
        1 / (10 + r) + (share / (10 + ranks[s]) if (s := h.memory.session_id or "") in ranks else 0.0)
        for r, h in enumerate(ranked)
    ]
    return _ordered(ranked, score)


async def _pool(store: EdgeStore, query: str, vector: list[float], scopes: list[str], now: datetime, alpha: float):
    span = time_named(query, now)
    pool = max(10, SESSION_POOL, TIME_POOL if span is not None else 0)
    return await store.hybrid_search(query, vector, scopes, limit=pool, alpha=alpha, min_score=0.0, fusion="normalized")


async def everyday_cases(
    root: Path, embedder: BundledEmbedder, cache: Path | None, alpha: float, digest: bool = False, windows: bool = False
) -> list[Case]:
    now = datetime.fromisoformat("2026-11-29T12:00:00+00:00")
    data = build_everyday()
    store = EdgeStore(root / "everyday", embedder.model, embedder.dim)
    await store.open()
    try:
        stored, ids = everyday.memories(data, embedder.model)
        vectors = await retrieval.embedded(embedder, [m.text for m in stored], cache)
        for memory, vector in zip(stored, vectors, strict=True):
            await store.upsert(memory, vector)
        session = {m.id: m.session_id or "" for m in stored}
        out, asks = [], []
        for q in data["questions"]:
            vector = await embedder.embed_query(q["q"])
            scopes = [f"p_everyday_{q['conversation']}"]
            hits = await _pool(store, q["q"], vector, scopes, now, alpha)
            good = {ids[a] for a in q["answers"]}
            out.append(Case(q["q"], q["split"], hits, good, {session[g] for g in good}, now))
            asks.append((q["q"], vector, scopes))
        if digest:
            for case, ranks in zip(out, await digest_ranks(root, embedder, stored, vectors, asks, alpha), strict=True):
                case.digest = ranks
        if windows:
            for case, found in zip(out, await window_hits(root, embedder, stored, vectors, asks, alpha), strict=True):
                case.windows = found
        return out
    finally:
        await store.close()


async def coding_cases(
    root: Path, embedder: BundledEmbedder, cache: Path | None, alpha: float, digest: bool = False, windows: bool = False
) -> list[Case]:
    now = datetime.fromisoformat("2026-11-29T12:00:00+00:00")
    data = json.loads(retrieval.SET.read_text())
    store = EdgeStore(root / "coding", embedder.model, embedder.dim)
    await store.open()
    try:
        exchanges = retrieval.labelled_exchanges(data) + retrieval.distractors()
        memories = [retrieval.exchange_memory(key, u, a, embedder.model) for key, u, a in exchanges]
        vectors = await retrieval.embedded(embedder, [m.text for m in memories], cache)
        ids = {}
        for (key, _, _), memory, vector in zip(exchanges, memories, vectors, strict=True):
            ids[key] = memory.id
            await store.upsert(memory, vector)
        session = {m.id: m.session_id or "" for m in memories}
        out, asks = [], []
        for q in data["questions"]:
            vector = await embedder.embed_query(q["q"])
            hits = await _pool(store, q["q"], vector, [retrieval.SCOPE], now, alpha)
            good = {ids[a] for a in q["answers"]}
            out.append(Case(q["q"], q["split"], hits, good, {session[g] for g in good}, now))
            asks.append((q["q"], vector, [retrieval.SCOPE]))
        if digest:
            for case, ranks in zip(
                out, await digest_ranks(root, embedder, memories, vectors, asks, alpha), strict=True
            ):
                case.digest = ranks
        if windows:
            for case, found in zip(out, await window_hits(root, embedder, memories, vectors, asks, alpha), strict=True):
                case.windows = found
        return out
    finally:
        await store.close()


def per_size_diverse(weight: float, power: float, cap: int, penalty: float) -> Variant:
    """``per_size``, then each hit beyond a session's first ``cap`` loses ``penalty``."""

    def rank(hits: Sequence[HybridHit]) -> list[HybridHit]:
        return diverse(0.0, cap, penalty)(per_size(weight, power)(hits))

    return rank


def variants2() -> dict[str, tuple[Variant, bool | str]]:
    """The second, finer grid around the first one's best."""
    out: dict[str, tuple[Variant, bool | str]] = {
        "best other x 0.2, span as of the clock": (best_other(0.2), "clock"),
        "best other x 0.2": (best_other(0.2), True),
        "recall's session_fusion now, x 0.2": (recall_now(0.2), True),
        "recall's session_fusion now, x 0.2, no time": (recall_now(0.2), False),
    }
    for w in (0.15, 0.2, 0.25, 0.3):
        for p in (0.75, 1.0, 1.5, 2.0):
            out[f"per size ** {p}, x {w}"] = (per_size(w, p), True)
    for w in (0.15, 0.2, 0.25):
        for cap in (1, 2, 3):
            for pen in (0.05, 0.075, 0.1, 0.15):
                out[f"fusion {w} + cap {cap}/session, -{pen}"] = (diverse(w, cap, pen), True)
    for w in (0.2, 0.3):
        for cap in (1, 2):
            for pen in (0.05, 0.1):
                out[f"per size ** 1.0 x {w} + cap {cap}, -{pen}"] = (per_size_diverse(w, 1.0, cap, pen), True)
    return out


def variants() -> dict[str, tuple[Variant, bool | str]]:
    """Name → (reordering, time preference on)."""
    out: dict[str, tuple[Variant, bool | str]] = {
        "no fusion, no time": (best_other(0.0), False),
        "today's fusion 0.2, no time": (best_other(0.2), False),
    }
    for w in (0.0, 0.05, 0.1, 0.15, 0.2, 0.3):
        out[f"best other x {w}"] = (best_other(w), True)
    for w in (0.1, 0.2, 0.3):
        for f in (0.5, 0.7, 0.85):
            out[f"floor {f} of top, x {w}"] = (floored(w, f), True)
    for w in (0.2, 0.3):
        for p in (0.5, 1.0):
            out[f"per size ** {p}, x {w}"] = (per_size(w, p), True)
    for w in (0.5, 1.0, 2.0):
        out[f"share of pool, x {w}"] = (share(w), True)
    for w in (0.1, 0.2, 0.3):
        for top in (5, 10):
            out[f"capped pool top {top}, x {w}"] = (capped(w, top), True)
    for w in (0.2, 0.3, 0.5):
        out[f"relative (o/top), x {w}"] = (relative(w), True)
    for k in (5, 10, 60):
        for w in (0.25, 0.5, 1.0):
            out[f"rrf exchanges+sessions k {k}, share {w}"] = (rrf_sessions(k, w), True)
    for w in (0.1, 0.2):
        for cap in (1, 2):
            for pen in (0.05, 0.1, 0.2):
                out[f"fusion {w} + cap {cap}/session, -{pen}"] = (diverse(w, cap, pen), True)
    return out


def report(sets: dict[str, list[Case]], chosen: dict[str, tuple[Variant, bool | str]], splits: Sequence[str]) -> None:
    head = "".join(f"  {n[:8] + ' ' + s:>14} @5    @10 s@5   s@10" for n in sets for s in splits)
    print(f"  {'variant':<44}{head}")
    for name, (variant, prefer) in chosen.items():
        cells = []
        for cases in sets.values():
            for split in splits:
                picked = [c for c in cases if c.split == split]
                ranked = ranked_by(variant, picked, prefer)
                cells.append(
                    "   "
                    + " ".join(f"{recall(picked, ranked, k, s):.3f}" for s in (False, True) for k in KS)
                    .replace("0.", ".")
                    .rjust(26)
                )
        print(f"  {name:<44}" + "".join(cells))


def grain_rows(
    sets: dict[str, list[Case]],
    grain: str,
    shares: Sequence[float],
    add: Callable[[list[HybridHit], Case, float], list[HybridHit]],
) -> None:
    """One row per share of a second grain added after recall's fusion and time preference, dev halves."""
    fusion = recall_now(sessions.SESSION_WEIGHT)
    for share in shares:
        cells = []
        for cases in sets.values():
            picked = [c for c in cases if c.split == "dev"]
            ranked = [add(r, c, share) for r, c in zip(ranked_by(fusion, picked), picked, strict=True)]
            cells.append(
                "   "
                + " ".join(f"{recall(picked, ranked, k, s):.3f}" for s in (False, True) for k in KS)
                .replace("0.", ".")
                .rjust(26)
            )
        print(f"  {f'split fusion + time + {grain}, share {share}':<44}" + "".join(cells))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--everyday-cache", type=Path)
    parser.add_argument("--coding-cache", type=Path)
    parser.add_argument("--grid", type=int, default=1, choices=(1, 2), help="the first grid or the finer second")
    parser.add_argument("--windows", action="store_true", help="also the mean-vector window grain, dev only")
    parser.add_argument("--digest", action="store_true", help="also the session digest grain, dev halves only")
    parser.add_argument("--test", nargs="*", help="also report the test halves of these variants (by name)")
    args = parser.parse_args()
    alpha = Settings.from_env({}).recall_alpha
    embedder = BundledEmbedder()
    try:
        with tempfile.TemporaryDirectory() as root:
            sets = {
                "everyday": await everyday_cases(
                    Path(root), embedder, args.everyday_cache, alpha, args.digest, args.windows
                ),
                "coding": await coding_cases(Path(root), embedder, args.coding_cache, alpha, args.digest, args.windows),
            }
    finally:
        await embedder.close()
    every: dict[str, Any] = variants() if args.grid == 1 else variants2()
    print(f"grid {args.grid}: dev halves (exchange @5 @10, session @5 @10)")
    report(sets, every, ("dev",))
    if args.digest:
        print("the session digest grain after recall's fusion and time preference, dev halves")
        grain_rows(sets, "digest", (0.0, 0.25, 0.5, 1.0), lambda r, c, share: with_digest(r, c.digest, share))
    if args.windows:
        print("the window grain (mean vectors, one exchange each side) after recall's fusion and time, dev halves")
        grain_rows(sets, "windows", (0.0, 0.2, 0.3, 0.5), lambda r, c, share: with_windows(r, c.windows, share))
    if args.test:
        print("test halves, reported once")
        report(sets, {n: every[n] for n in args.test}, ("dev", "test"))


if __name__ == "__main__":
    asyncio.run(main())
