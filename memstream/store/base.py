"""The vector-store interface every backend implements, and the pieces its backends share.

One collection per embedding model (``memories__<model slug>``), so vectors of different
dimensions never mix. Every point carries two vectors: ``dense``, the embedding, and
``bm25``, the BM25 term weights of its text, which Qdrant scores with its IDF modifier.
Payload indexes on ``scope_key``, ``type``, ``status`` (``active`` / ``superseded``) and
``superseded_at``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Final, NamedTuple, Protocol

from qdrant_edge import Bm25, Bm25Config, TokenizerType

from memstream.schemas import Memory, Provenance, ScoredMemory
from memstream.schemas.memory import HybridHit

#: The sparse vector holding each memory's BM25 term weights.
BM25_VECTOR: Final = "bm25"

#: Memories are one- or two-sentence facts: about a dozen terms once stopwords are gone.
#: BM25's length normalization divides by it, so terms of a longer memory weigh less.
AVG_MEMORY_TERMS: Final = 12.0

#: Candidates each leg of a hybrid search fetches per hit asked for: a memory just past
#: ``limit`` in one leg can still make the top ``limit`` once both scores are combined.
HYBRID_POOL_FACTOR: Final = 4

# Qdrant's own BM25 tokenization (English stopwords and stemmer; a term's id is the murmur3
# hash of its stem, stable across processes and the same as Qdrant's server-side BM25).
# The code tokenizer also indexes the parts of ``getUserById`` and ``snake_case``.
_BM25 = Bm25(Bm25Config(k=1.2, b=0.75, avg_len=AVG_MEMORY_TERMS, tokenizer=TokenizerType.Code, language="english"))


def collection_name(embedding_model: str) -> str:
    """The collection that holds the vectors of one embedding model."""
    return "memories__" + re.sub(r"[^a-z0-9]+", "-", embedding_model.lower()).strip("-")


class Terms(NamedTuple):
    """A sparse vector, in the (indices, values) form both Qdrant SDKs take."""

    indices: list[int]
    values: list[float]


def document_terms(text: str) -> Terms:
    """A memory's stored BM25 vector: term frequencies saturated by k1 and normalized by length.

    IDF is not in it: Qdrant applies it at query time from the collection's statistics.
    """
    terms = _BM25.embed_document(text)
    return Terms(terms.indices, terms.values)


def query_terms(text: str) -> Terms:
    """A BM25 query: weight 1 per distinct term, so a point's score is its BM25 sum."""
    terms = _BM25.embed_query(text)
    return Terms(terms.indices, terms.values)


def hybrid_legs(alpha: float) -> tuple[bool, bool]:
    """Whether a hybrid search runs its (vector, BM25) legs for this ``alpha``.

    A leg weighted 0 is not run: otherwise seed 003's single-score rule would let the
    other leg's hits in at full weight, and ``alpha=1`` would not be a vector search.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be within [0, 1], got {alpha}")
    return alpha > 0.0, alpha < 1.0


def bm25_score(raw: float) -> float:
    """A Qdrant BM25 score normalized to [0, 1), a better match scoring higher.

    Seed 003 normalizes SQLite FTS5's bm25() with ``1 / (1 + |score|)``. FTS5 scores are
    negative, more negative for a better match, so that formula hands the best match the
    lowest value. Qdrant's score is positive and higher is better; ``|s| / (1 + |s|)``,
    the seed's curve mirrored (``1 - 1 / (1 + |s|)``), keeps the ranking: 0 for no match,
    0.5 at a score of 1, towards 1 as the match strengthens.
    """
    return abs(raw) / (1.0 + abs(raw))


def fuse(
    dense: Sequence[tuple[Memory, float]],
    lexical: Sequence[tuple[Memory, float]],
    *,
    alpha: float,
    min_score: float,
    limit: int,
) -> list[HybridHit]:
    """Seed 003's merge of the two legs' hits, best first.

    ``dense`` carries Qdrant's cosine similarities, ``lexical`` its raw BM25 scores. By
    memory id: ``alpha × vector + (1 - alpha) × bm25`` when both legs scored a memory, the
    single score otherwise; hits under ``min_score`` are dropped. Ties go by id, so both
    backends return the same order. As in the seed, a weak BM25 match can rank a memory
    below where its vector score alone would put it.
    """
    # Cosine similarity runs from -1 to 1, and float32 rounding can push it just past 1.
    vector = {m.id: min(1.0, max(0.0, score)) for m, score in dense}
    bm25 = {m.id: bm25_score(score) for m, score in lexical}
    memories = {m.id: m for m, _ in (*dense, *lexical)}
    hits: list[HybridHit] = []
    for memory_id, memory in memories.items():
        v, b = vector.get(memory_id), bm25.get(memory_id)
        if v is None:
            score = bm25[memory_id]
        elif b is None:
            score = v
        else:
            score = alpha * v + (1.0 - alpha) * b
        if score >= min_score:
            hits.append(HybridHit(memory, score, v, b))
    hits.sort(key=lambda h: (-h.score, h.memory.id))
    return hits[:limit]


def tombstone_since(memory: Memory) -> datetime:
    """When a tombstone's retention window opened: ``superseded_at``, else ``updated_at``."""
    return memory.superseded_at or memory.updated_at


def oldest_tombstones(tombstones: Iterable[Memory], limit: int) -> list[Memory]:
    """At most ``limit`` tombstones, oldest first; ties by id, so both backends agree."""
    return sorted(tombstones, key=lambda m: (tombstone_since(m), m.id))[: max(0, limit)]


class MemoryStore(Protocol):
    """Memories with their vectors, for one embedding model.

    Reads never return superseded memories unless asked; writes are idempotent by id.
    """

    embedding_model: str
    dim: int

    async def open(self) -> None:
        """Create the collection and payload indexes if they are missing (idempotent).

        A collection from before the ``bm25`` vector gets it, and its memories their terms;
        on a server too old to add a vector, hybrid search runs its vector leg alone.
        """

    async def close(self) -> None: ...

    async def upsert(self, memory: Memory, vector: Sequence[float]) -> None:
        """Insert or replace a memory with its vector."""

    async def refresh(
        self,
        memory_id: str,
        *,
        text: str,
        updated_at: datetime,
        source_chunk: str | None = None,
        vector: Sequence[float] | None = None,
        session_id: str | None = None,
        sources: Sequence[Provenance] | None = None,
    ) -> Memory | None:
        """Refresh an existing memory's text and ``updated_at`` (and, given, its session and sources,
        which must be those of the new text); None if it does not exist."""

    async def supersede(self, memory_id: str, superseded_by: str, *, at: datetime | None = None) -> Memory | None:
        """Mark a memory superseded ``at`` (default now, UTC); it stays stored but leaves search.

        None if missing.
        """

    async def delete(self, memory_id: str) -> Memory | None:
        """Delete a memory; returns what was deleted, None if it did not exist."""

    async def purge_superseded(self, before: datetime, *, limit: int = 500) -> list[Memory]:
        """Hard-delete at most ``limit`` memories superseded before ``before``; returns them.

        The retention worker's tombstone step (seed 003). A memory superseded before
        ``superseded_at`` existed counts from its ``updated_at``. Active memories are never
        touched. When more than ``limit`` are due, which go first is unspecified: the next
        sweep takes the rest.
        """

    async def tombstones(self, before: datetime, *, limit: int = 500) -> list[Memory]:
        """The memories ``purge_superseded(before)`` would delete, oldest first, at most ``limit``.

        Deletes nothing: the retention worker unlinks them from the graph before purging.
        Oldest by :func:`tombstone_since`, ties by id.
        """

    async def get(self, memory_id: str) -> Memory | None: ...

    async def vector(self, memory_id: str) -> list[float] | None:
        """The stored vector of a memory, None if it does not exist."""

    async def search(
        self,
        vector: Sequence[float],
        scope_keys: Sequence[str],
        *,
        limit: int = 10,
        types: Sequence[str] | None = None,
        max_distance: float | None = None,
        include_superseded: bool = False,
        exclude_ids: Sequence[str] = (),
    ) -> list[ScoredMemory]:
        """Nearest memories by cosine distance (0 = identical), closest first."""

    async def hybrid_search(
        self,
        text: str,
        vector: Sequence[float],
        scope_keys: Sequence[str],
        *,
        limit: int = 5,
        alpha: float = 0.7,
        min_score: float = 0.3,
        types: Sequence[str] | None = None,
        exclude_ids: Sequence[str] = (),
    ) -> list[HybridHit]:
        """Active memories by seed 003's BM25 + vector score (see :func:`fuse`), best first.

        ``text`` is the BM25 query and ``vector`` its embedding; ``alpha`` weighs the vector
        leg. Each leg fetches ``limit × HYBRID_POOL_FACTOR`` candidates.
        """

    async def list(
        self,
        scope_keys: Sequence[str] | None,
        *,
        types: Sequence[str] | None = None,
        include_superseded: bool = False,
        limit: int = 1000,
    ) -> list[Memory]:
        """Memories in the given scopes (None: every scope), newest ``updated_at`` first."""

    async def count(self, scope_keys: Sequence[str] | None = None, *, include_superseded: bool = True) -> int: ...
