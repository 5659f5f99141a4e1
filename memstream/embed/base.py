"""The embedder interface: documents for storage, queries for search (the extraction spec step 3)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec


class EmbeddingOutage(RuntimeError):
    """The embedding API is unreachable or overloaded: the same request may succeed later."""


class Embedder(Protocol):
    """Turns text into unit-length vectors of a fixed dimension."""

    #: Stable model name; it names the store collection, so vectors never mix.
    model: str
    dim: int
    #: Thresholds calibrated for this model.
    profile: DistanceProfile

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts for storage (Voyage ``input_type="document"``), in one batch."""

    async def embed_query(self, text: str) -> list[float]:
        """Embed a search query (Voyage ``input_type="query"``)."""

    async def close(self) -> None: ...


class DistanceProfile(msgspec.Struct, frozen=True):
    """Cosine-distance thresholds, which only mean something for the model they were set for.

    The extraction spec's 0.12 / 0.25 were set for voyage-code-3; a model whose distances are
    compressed (e5 puts unrelated sentences ~0.2 apart) needs its own calibrated values.
    """

    #: A new fact this close to a stored one of a general type is a duplicate.
    dedup_general: float
    #: The same for structural types, which evolve (the memory spec).
    dedup_structural: float
    #: Stored memories this close to a new fact are put to the LLM as possibly superseded.
    contradiction: float
    #: The decision stage's candidates (Pipeline v2) score at least this in hybrid search;
    #: 0: one minus the contradiction distance, for a model not measured for it.
    decision_min_score: float = 0.0
    #: Search's relevance floor (issue 25): a hit is kept when its cosine similarity to the query reaches
    #: this (or its BM25 match reaches MEMSTREAM_RECALL_BM25_FLOOR); 0: no floor, for a model not measured.
    recall_floor: float = 0.0

    @property
    def candidate_min_score(self) -> float:
        return self.decision_min_score or round(1.0 - self.contradiction, 4)
