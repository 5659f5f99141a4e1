"""Recall@5 and @10 on memstream's long everyday-chat set (bench/quality/everyday_set.py, issue 40).

Seven conversations between two named friends over ten dated sessions each (``everyday_set.py`` says how
the set was made). Every exchange is stored as raw mode stores a chat: one conversation memory
``[user] …\\n[assistant] …``, said (``created_at``) on its session's date, its session the session; each
conversation in a project of its own, searched alone (as the hidden benchmark searches each conversation's
project). The questions are asked after the last session, as of ``--now`` (default 2026-11-29: the
benchmark asks long after the chats were held).

A question counts as found at k when one of the exchanges that answer it is among the top k; by session,
when an exchange of a session that answers it is. Figures per split (``dev`` may be tuned on, ``test`` is
only reported) and per kind of question.

    .venv/bin/python -m bench.quality.everyday [--cache FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from bench.quality.everyday_set import build as build_everyday
from bench.quality.retrieval import embedded, exchange_memory, recall_at
from memstream.embed.bundled import BundledEmbedder
from memstream.identity import memory_id
from memstream.recall.dates import TIME_POOL, anchored, said_then
from memstream.recall.search import SESSION_POOL
from memstream.recall.sessions import SESSION_WEIGHT, session_fusion
from memstream.rules.dates import time_named
from memstream.schemas import Memory
from memstream.schemas.memory import HybridHit
from memstream.settings import Settings
from memstream.store.edge import EdgeStore

KS = (5, 10)
LIMIT = 10
SPLITS = ("dev", "test")
KINDS = ("single-hop", "multi-hop", "temporal", "open-domain", "names a time")

Ranker = Callable[[dict[str, Any], list[float]], Awaitable[list[HybridHit]]]


def memories(data: dict[str, Any], model: str) -> tuple[list[Memory], dict[str, str]]:
    """Each exchange as raw mode stores it, said on its session's day (a minute apart); and key → id."""
    out, ids = [], {}
    for name, conversation in data["conversations"].items():
        for session in conversation["sessions"]:
            day = datetime.fromisoformat(session["date"])
            for i, (user, reply) in enumerate(session["exchanges"]):
                key = f"{session['name']}:{i}"
                memory = exchange_memory(key, user, reply, model)
                when = day + timedelta(minutes=i)
                memory = msgspec.structs.replace(
                    memory,
                    scope_key=f"p_everyday_{name}",
                    # Raw mode's id: the same words said twice in one conversation are one memory.
                    id=memory_id(f"p_everyday_{name}", memory.content_hash),
                    created_at=when,
                    updated_at=when,
                )
                ids[key] = memory.id
                out.append(memory)
    return out, ids


def _relative(q: dict[str, Any], end: datetime) -> dict[str, Any] | None:
    """``q`` asking "last <Month>" instead of "in <Month> <Year>", when that means the same month as of the
    conversation's last session (the month is one of the twelve before the end's); else None."""
    m = re.search(r"\bin ([A-Z][a-z]+) (\d{4})\b", q["q"])
    if m is None:
        return None
    asked = q["q"].replace(m[0], f"last {m[1]}")
    meant, relative = time_named(m[0], end), time_named(asked, end)
    if meant is None or relative is None or (meant.start, meant.end) != (relative.start, relative.end):
        return None
    return {**q, "q": asked}


def _names_time(q: dict[str, Any]) -> str:
    return "names a time" if time_named(q["q"], datetime.now(UTC)) is not None else ""


def table(
    title: str,
    rows: dict[str, list[list[str]]],
    questions: Sequence[dict[str, Any]],
    ids: dict[str, str],
    session: dict[str, str],
) -> None:
    print(title)
    print(
        f"  {'ranking':<52} {'split':<6} {'n':>4} {'@5':>6} {'@10':>6} {'sess@5':>7} {'sess@10':>7}"
        "  by kind @10 (exchange)"
    )
    for name, lists in rows.items():
        for split in SPLITS:
            chosen = [i for i, q in enumerate(questions) if q["split"] == split]
            picked = [lists[i] for i in chosen]
            good = [{ids[a] for a in questions[i]["answers"]} for i in chosen]
            cells = [recall_at(picked, good, k) for k in KS]
            by_session = [[session[m] for m in ranked] for ranked in picked]
            good_sessions = [{session[g] for g in answers} for answers in good]
            cells += [recall_at(by_session, good_sessions, k) for k in KS]
            kinds = []
            for kind in KINDS:
                of = [n for n, i in enumerate(chosen) if kind in (questions[i]["kind"], _names_time(questions[i]))]
                if of:
                    kinds.append(f"{kind} {recall_at([picked[n] for n in of], [good[n] for n in of], 10):.3f}")
            print(
                f"  {name:<52} {split:<6} {len(chosen):>4} "
                + " ".join(f"{c:>6.3f}" if n < 2 else f"{c:>7.3f}" for n, c in enumerate(cells))
                + "  "
                + ", ".join(kinds)
            )


async def digest_rows(
    root: Path,
    embedder: BundledEmbedder,
    stored: Sequence[Memory],
    vectors: Sequence[Sequence[float]],
    questions: Sequence[dict[str, Any]],
    queries: Sequence[list[float]],
    rows: dict[str, list[list[str]]],
    alpha: float,
    now: datetime,
) -> dict[str, list[list[str]]]:
    """A session-level grain (issue 40.3) that costs no embedding: per session one point whose vector is
    the normalized mean of its exchanges' and whose text is theirs joined, in a store of its own. A query
    searches both; each exchange gains ``share`` x its session's digest score (scaled per query)."""
    store = EdgeStore(root / "digests", embedder.model, embedder.dim)
    await store.open()
    try:
        members: dict[tuple[str, str], list[int]] = {}
        for n, memory in enumerate(stored):
            members.setdefault((memory.scope_key, memory.session_id or ""), []).append(n)
        for (scope_key, name), of in members.items():
            total = [sum(vectors[m][d] for m in of) for d in range(len(vectors[of[0]]))]
            norm = sum(x * x for x in total) ** 0.5 or 1.0
            text = "\n".join(stored[m].text for m in of)
            digest = msgspec.structs.replace(
                stored[of[0]], id=memory_id(scope_key, f"digest {name}"), text=text, session_id=name
            )
            await store.upsert(digest, [x / norm for x in total])
        digests = []
        for q, vector in zip(questions, queries, strict=True):
            hits = await store.hybrid_search(
                q["q"],
                vector,
                [f"p_everyday_{q['conversation']}"],
                limit=10,
                alpha=alpha,
                min_score=0.0,
                fusion="normalized",
            )
            digests.append({h.memory.session_id: rank for rank, h in enumerate(hits)})
    finally:
        await store.close()
    out: dict[str, list[list[str]]] = {}
    by_id = {m.id: m for m in stored}
    base = rows["recall's default (hybrid + sessions + said_then)"]
    plain = rows["hybrid, no session fusion, no time"]
    for label, ranked in (("recall's default", base), ("hybrid alone", plain)):
        for share in (0.25, 0.5, 1.0):
            fused = []
            for ids_, scores in zip(ranked, digests, strict=True):
                # Reciprocal rank fusion (k 10) of the exchange's rank and its session digest's rank.
                score = {
                    i: 1 / (10 + r)
                    + (share / (10 + scores[sid]) if (sid := by_id[i].session_id or "") in scores else 0.0)
                    for r, i in enumerate(ids_)
                }
                fused.append(sorted(score, key=lambda i: -score[i]))
            out[f"{label} + digest, share {share}"] = fused
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, help="a scratch JSON file of passage vectors reused between runs")
    parser.add_argument(
        "--digest", action="store_true", help="also a session grain: mean vector and joined text per session (40.3)"
    )
    parser.add_argument("--now", default="2026-11-29T12:00:00+00:00", help="when the questions are asked")
    args = parser.parse_args()
    now = datetime.fromisoformat(args.now)
    alpha = Settings.from_env({}).recall_alpha
    data = build_everyday()
    questions = data["questions"]
    embedder = BundledEmbedder()
    with tempfile.TemporaryDirectory() as root:
        store = EdgeStore(Path(root), embedder.model, embedder.dim)
        await store.open()
        try:
            stored, ids = memories(data, embedder.model)
            vectors = await embedded(embedder, [m.text for m in stored], args.cache)
            for memory, vector in zip(stored, vectors, strict=True):
                await store.upsert(memory, vector)
            session = {m.id: m.session_id or "" for m in stored}
            queries = [await embedder.embed_query(q["q"]) for q in questions]

            def scope(q: dict[str, Any]) -> list[str]:
                return [f"p_everyday_{q['conversation']}"]

            async def recall_default(q: dict[str, Any], vector: list[float]) -> list[HybridHit]:
                """As recall.search ranks (its store-side steps: pool, session fusion, said_then)."""
                span = time_named(q["q"], now)
                pool = max(LIMIT, SESSION_POOL, TIME_POOL if span is not None else 0)
                hits = await store.hybrid_search(
                    q["q"], vector, scope(q), limit=pool, alpha=alpha, min_score=0.0, fusion="normalized"
                )
                return said_then(session_fusion(hits, SESSION_WEIGHT), span)

            async def run(ranker: Ranker) -> list[list[str]]:
                return [
                    [h.memory.id for h in (await ranker(q, v))[:50]] for q, v in zip(questions, queries, strict=True)
                ]

            in_scope: dict[str, list[Memory]] = {}
            for memory in stored:
                in_scope.setdefault(memory.scope_key, []).append(memory)

            def variant(*, weight: float = SESSION_WEIGHT, prefer: bool = True, leg: bool = False) -> Ranker:
                async def rank(q: dict[str, Any], vector: list[float]) -> list[HybridHit]:
                    span = time_named(q["q"], now) if prefer else None
                    pool = max(LIMIT, SESSION_POOL, TIME_POOL if span is not None else 0)
                    hits = await store.hybrid_search(
                        q["q"], vector, scope(q), limit=pool, alpha=alpha, min_score=0.0, fusion="normalized"
                    )
                    if leg and span is not None:
                        # Emulates a store filter on the span: every memory said outside it is left out.
                        outside = [m.id for m in in_scope[scope(q)[0]] if not span.holds(m.created_at)]
                        inside = await store.hybrid_search(
                            q["q"],
                            vector,
                            scope(q),
                            limit=LIMIT,
                            alpha=alpha,
                            min_score=0.0,
                            fusion="normalized",
                            exclude_ids=outside,
                        )
                        seen = {h.memory.id for h in hits}
                        hits = [*hits, *(h for h in inside if h.memory.id not in seen)]
                    return said_then(session_fusion(hits, weight), span)

                return rank

            rows: dict[str, list[list[str]]] = {
                "vector": [
                    [h.memory.id for h in await store.search(v, scope(q), limit=LIMIT)]
                    for q, v in zip(questions, queries, strict=True)
                ],
                "BM25": [
                    [
                        h.memory.id
                        for h in await store.hybrid_search(
                            q["q"], v, scope(q), limit=LIMIT, alpha=0.0, min_score=0.0, fusion="weighted"
                        )
                    ]
                    for q, v in zip(questions, queries, strict=True)
                ],
                "recall's default (hybrid + sessions + said_then)": await run(recall_default),
                "hybrid, no session fusion, no time": await run(variant(weight=0.0, prefer=False)),
                "hybrid + sessions, no time": await run(variant(prefer=False)),
                "default + span leg (emulated filter)": await run(variant(leg=True)),
            }
            turns = sum(2 * len(s["exchanges"]) for c in data["conversations"].values() for s in c["sessions"])
            print(
                f"{len(stored)} exchanges ({turns} turns) in {len(data['conversations'])} conversations, "
                f"{len(questions)} questions, embedder {embedder.model}, asked as of {now.date()}"
            )
            table("recall@k: dev may be tuned on, test only reported", rows, questions, ids, session)
            if args.digest:
                table(
                    "session digest grain (no new embedding), dev may be tuned on, test only reported",
                    await digest_rows(Path(root), embedder, stored, vectors, questions, queries, rows, alpha, now),
                    questions,
                    ids,
                    session,
                )
            # The same questions that name a month, as friends would ask them at the end of the chat:
            # "last <Month>" (relative), asked in 2026 of a conversation held in 2023-2024.
            ends = {
                n: max(datetime.fromisoformat(x["date"]) for x in c["sessions"])
                for n, c in data["conversations"].items()
            }
            relative = [r for q in questions if (r := _relative(q, ends[q["conversation"]])) is not None]
            vectors_relative = [await embedder.embed_query(q["q"]) for q in relative]

            def as_asked(anchor: bool) -> Ranker:
                async def rank(q: dict[str, Any], vector: list[float]) -> list[HybridHit]:
                    span = time_named(q["q"], now)
                    pool = max(LIMIT, SESSION_POOL, TIME_POOL if span is not None else 0)
                    hits = await store.hybrid_search(
                        q["q"], vector, scope(q), limit=pool, alpha=alpha, min_score=0.0, fusion="normalized"
                    )
                    hits = session_fusion(hits, SESSION_WEIGHT)
                    return said_then(hits, anchored(q["q"], now, hits) if anchor else span)

                return rank

            relative_rows = {
                name: [
                    [h.memory.id for h in (await ranker(q, v))[:LIMIT]]
                    for q, v in zip(relative, vectors_relative, strict=True)
                ]
                for name, ranker in (
                    ("last <Month>, read as of the clock (main)", as_asked(False)),
                    ("last <Month>, anchored at the newest candidate", as_asked(True)),
                )
            }
            table(
                f"{len(relative)} questions asked with 'last <Month>' instead of '<Month> <Year>'",
                relative_rows,
                relative,
                ids,
                session,
            )
        finally:
            await store.close()
            await embedder.close()


if __name__ == "__main__":
    asyncio.run(main())
