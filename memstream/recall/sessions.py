"""Session-aware fusion: an exchange's session vouches for it (issue 25.9).

A conversation is about a few things at a time: when several exchanges of one session match a query,
that session is likely where the answer was said, and its exchanges deserve a place above a lone
exchange of another session that matches about as well. Each hit's fused score gains ``weight`` times
the best score among the *other* hits of its session in the candidate pool, divided by how many other
hits of its session the pool holds: a session vouches with one share, split among its hits, so a session
that matches a little everywhere (the small talk of an everyday chat) cannot lift all its hits over the
best match of another (issue 40). Memories without a session (facts, documents) are ranked on their own
score. Nothing is fetched: it reorders the candidates the hybrid search already holds, so it costs
microseconds. The fused score replaces the hit's score, so what search shows is what it ranked by.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from memstream.schemas.memory import HybridHit

#: How much the best other hit of a session adds to a hit's score (split among the session's other hits):
#: chosen on the dev halves of bench/quality/retrieval.py (coding sessions; 0.05-0.3 within one question of
#: each other at recall@5, 0.2 with a pool of 20 the best at 10) and bench/quality/everyday.py (everyday chat;
#: 0.15-0.3 with the split all above the unsplit fusion, bench/quality/session_fusions.py).
SESSION_WEIGHT: Final = 0.2


def session_fusion(hits: Sequence[HybridHit], weight: float) -> list[HybridHit]:
    """``hits`` reordered by score plus ``weight`` × the best other score of the hit's session ÷ the number
    of its session's other hits in ``hits``, each hit's ``score`` now that fused score: the score shown is
    the one ranked by (issue 37.6), and a later step that re-sorts by score (a query naming a time,
    ``recall.dates``) keeps the fusion's order. The legs' own scores (``vector_score``, ``bm25_score``)
    are untouched. Ties keep the incoming order.
    """
    if weight <= 0.0 or len(hits) < 2:
        return list(hits)
    scores: dict[str, list[float]] = {}
    for hit in hits:
        if hit.memory.session_id:
            scores.setdefault(hit.memory.session_id, []).append(hit.score)
    # Per session: its best score, its second best, and its share: one per session, split among a hit's
    # other hits in the pool (the whole weight for a session of two).
    shares = {
        session: (top[0], top[1] if len(top) > 1 else 0.0, weight / max(len(of) - 1, 1))
        for session, of in scores.items()
        for top in (sorted(of, reverse=True)[:2],)
    }

    def support(hit: HybridHit) -> float:
        if not hit.memory.session_id:
            return hit.score
        first, second, share = shares[hit.memory.session_id]
        # The best score among the session's other hits: its second best when this hit is the best.
        return hit.score + share * (second if hit.score >= first else first)

    fused = [msgspec.structs.replace(hit, score=support(hit)) for hit in hits]
    order = sorted(range(len(fused)), key=lambda i: -fused[i].score)
    return [fused[i] for i in order]
