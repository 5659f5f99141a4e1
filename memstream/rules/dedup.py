"""The extraction spec step 4: is a new fact a duplicate of a stored or just-decided memory?

A duplicate refreshes the existing memory (text and ``updated_at``) instead of adding one.
Candidates come from two places: the store, and the dedup agent's table of memories it
decided on but the store may not show yet, so back-to-back duplicates are caught too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from memstream.schemas import STRUCTURAL_TYPES, RecentMemory, ScoredMemory

if TYPE_CHECKING:
    from memstream.embed.base import DistanceProfile

#: Types that merge only when their content is exactly the same (the content hash, checked before
#: any distance): a conversation exchange is evidence of what was said, and two different exchanges
#: stay two memories however close their embeddings are (raw mode merged distinct exchanges at e5
#: distances of 0.02-0.07 under the 0.05 calibrated on short facts).
EXACT_ONLY_TYPES: frozenset[str] = frozenset({"conversation"})


class Duplicate(msgspec.Struct, frozen=True):
    memory_id: str
    distance: float


def threshold(fact_type: str, profile: DistanceProfile) -> float:
    """0.25 for structural types, 0.12 for general ones (for voyage-code-3; per profile)."""
    return profile.dedup_structural if fact_type in STRUCTURAL_TYPES else profile.dedup_general


def cosine_distance(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    va, vb = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    denom = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return 1.0 - float(va @ vb) / denom if denom else 1.0


def cosine_distances(vector: Sequence[float] | np.ndarray, memories: Sequence[RecentMemory]) -> np.ndarray:
    """The cosine distance from ``vector`` to each memory's, in one matrix product.

    The decide stage measures every fact against its project's recent memories; one by one,
    converting the fact's vector again for each, this was 1.5% of a worker's CPU (py-spy).
    """
    if not memories:
        return np.empty(0, dtype=np.float32)
    v = np.asarray(vector, dtype=np.float32)
    matrix = np.stack([m.array() for m in memories])
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(v)
    dots = matrix @ v
    safe = np.where(norms > 0, norms, 1.0)
    return np.where(norms > 0, 1.0 - dots / safe, 1.0)


def find_duplicate(
    fact_type: str,
    vector: Sequence[float],
    stored: Iterable[ScoredMemory],
    recent: Sequence[RecentMemory],
    profile: DistanceProfile,
) -> Duplicate | None:
    """The closest memory of the same type within the type's dedup distance, if any.

    Only the same type: a session summary that repeats an architecture fact must not
    rewrite it, since the type decides aging and where a memory shows in the block. Never for
    ``EXACT_ONLY_TYPES``, which only exact duplicates merge.
    """
    if fact_type in EXACT_ONLY_TYPES:
        return None
    limit = threshold(fact_type, profile)
    best: Duplicate | None = None
    for hit in stored:
        if hit.memory.type != fact_type:
            continue
        if hit.distance <= limit and (best is None or hit.distance < best.distance):
            best = Duplicate(hit.memory.id, hit.distance)
    same_type = [m for m in recent if m.type == fact_type]
    for memory, distance in zip(same_type, cosine_distances(vector, same_type).tolist(), strict=True):
        if distance <= limit and (best is None or distance < best.distance):
            best = Duplicate(memory.id, distance)
    return best


def remember(
    recent: Sequence[RecentMemory], memory: RecentMemory, *, now: float, keep_seconds: float, keep: int
) -> list[RecentMemory]:
    """The recent list with ``memory`` added (replacing its id), expired and bounded."""
    kept = [m for m in recent if m.id != memory.id and now - m.decided_at <= keep_seconds]
    kept.append(memory)
    return kept[-keep:]
