"""A query that names a time prefers memories said then (issue 40.2).

"What did we decide yesterday?", "the trip last May": :func:`memstream.rules.dates.time_named` reads the
span, and each candidate said inside it (its ``created_at``: when the turn was said, for a raw exchange)
gains ``weight`` on its score. A gain, not a filter: a memory outside the span still shows when nothing
inside it matches, and a query naming no time is ranked as before. Nothing is fetched: it reorders the
candidates the hybrid search already holds (a named time widens the pool to ``TIME_POOL``).

A relative time ("last May", "on Friday", "two weeks ago") is read as of the search's clock, unless no
candidate was said in that span: then it is read as of the newest candidate (:func:`anchored`), the end of
the conversation the search found. A chat imported or replayed long after it was held ("what was Jonah
reading last May?", asked in 2026 of a 2023 conversation) then means the May before the chat's end, as
its speakers meant it. Only the order of the fused candidates changes: the stored text, terms and vectors
(which the decision and contradiction gates read) do not.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

import msgspec

from memstream.rules.dates import Span, time_named
from memstream.schemas.memory import HybridHit

#: What a memory said in the named span gains, on the fused score's 0-1 scale: a little more than the
#: session's vouching (``recall.sessions.SESSION_WEIGHT``), so that among close matches the one said
#: then comes first, never enough to lift an unrelated memory over a good match. Not tuned on labelled
#: data (bench/retrieval's set has no dates).
TIME_WEIGHT: Final = 0.25
#: Candidates a search that names a time ranks at least: memories said then may sit lower in the pool.
TIME_POOL: Final = 50


def said_then(hits: Sequence[HybridHit], span: Span | None, weight: float = TIME_WEIGHT) -> list[HybridHit]:
    """``hits`` with ``weight`` added to the score of each said inside ``span``, best first (ties keep
    the incoming order); the hits unchanged when no span is named."""
    if span is None or weight <= 0.0:
        return list(hits)
    scored = [msgspec.structs.replace(hit, score=hit.score + weight) if _inside(hit, span) else hit for hit in hits]
    order = sorted(range(len(scored)), key=lambda i: -scored[i].score)
    return [scored[i] for i in order]


def _inside(hit: HybridHit, span: Span) -> bool:
    when: datetime = hit.memory.created_at
    return span.holds(when)


def anchored(query: str, now: datetime, hits: Sequence[HybridHit]) -> Span | None:
    """The span ``query`` names as of ``now``; when none of ``hits`` was said in it and the words are
    relative (they name another span as of another day), the span as of the newest hit instead."""
    span = time_named(query, now)
    if span is None or not hits or any(_inside(hit, span) for hit in hits):
        return span
    newest = max(hit.memory.created_at for hit in hits)
    if newest.tzinfo is None and now.tzinfo is not None:
        newest = newest.replace(tzinfo=now.tzinfo)
    again = time_named(query, newest)
    return again if again is not None else span
