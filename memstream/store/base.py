"""The vector-store interface every backend implements, and the pieces its backends share.

One collection per embedding model (``memories__<model slug>``), so vectors of different
dimensions never mix. Every point carries two vectors: ``dense``, the embedding, and
``bm25``, the BM25 term weights of its text, which Qdrant scores with its IDF modifier.
Payload indexes on ``scope_key``, ``type``, ``status`` (``active`` / ``superseded``) and
``superseded_at``.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal, NamedTuple, Protocol

import msgspec
from qdrant_edge import Bm25, Bm25Config, TokenizerType

from memstream.schemas import Memory, Provenance, ScoredMemory
from memstream.schemas.codec import memory_from_payload
from memstream.schemas.memory import HybridHit
from memstream.store.points import IndexKind, Select

#: The dense vector holding each memory's embedding.
DENSE_VECTOR: Final = "dense"
#: The sparse vector holding each memory's BM25 term weights.
BM25_VECTOR: Final = "bm25"
#: Payload fields the filters use: keyword indexes keep filtered search exact and fast, the
#: datetime one lets the retention purge find old tombstones without reading every one.
MEMORY_INDEXES: Final[dict[str, IndexKind]] = {
    "scope_key": "keyword",
    "type": "keyword",
    "status": "keyword",
    "superseded_at": "datetime",
    # Listing newest first (``list``, the console) reads the first page of a scroll ordered by it,
    # where a sort would read every memory of the scopes: 1 s at 10k, growing with the store.
    "updated_at": "datetime",
    # Every read of a member's (not an admin's) keeps only their own conversations.
    "speaker": "keyword",
}

#: Memories are one- or two-sentence facts: about a dozen terms once stopwords are gone.
#: BM25's length normalization divides by it, so terms of a longer memory weigh less.
AVG_MEMORY_TERMS: Final = 12.0

#: Candidates each leg of a hybrid search fetches per hit asked for: a memory just past
#: ``limit`` in one leg can still make the top ``limit`` once both scores are combined.
HYBRID_POOL_FACTOR: Final = 4

#: The least each leg fetches under ``fusion="normalized"``: the pool's lowest score is the
#: leg's 0, so it must sit well below the top ``limit`` (bench/quality/retrieval.py, dev half).
NORMALIZED_POOL: Final = 50

#: How hybrid search turns the two legs' scores into one (see :func:`fuse` and :func:`fuse_normalized`).
Fusion = Literal["weighted", "normalized"]

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

    A leg weighted 0 is not run: otherwise Pipeline v2's single-score rule would let the
    other leg's hits in at full weight, and ``alpha=1`` would not be a vector search.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be within [0, 1], got {alpha}")
    return alpha > 0.0, alpha < 1.0


def bm25_score(raw: float) -> float:
    """A Qdrant BM25 score normalized to [0, 1), a better match scoring higher.

    Pipeline v2 normalizes SQLite FTS5's bm25() with ``1 / (1 + |score|)``. FTS5 scores are
    negative, more negative for a better match, so that formula hands the best match the
    lowest value. Qdrant's score is positive and higher is better; ``|s| / (1 + |s|)``,
    the spec's curve mirrored (``1 - 1 / (1 + |s|)``), keeps the ranking: 0 for no match,
    0.5 at a score of 1, towards 1 as the match strengthens.
    """
    return abs(raw) / (1.0 + abs(raw))


class Fused(NamedTuple):
    """A memory id's place in a hybrid search: its fused score and each leg's (None: not scored there)."""

    id: str
    score: float
    vector_score: float | None
    bm25_score: float | None


def fuse_scores(
    dense: Sequence[tuple[str, float]],
    lexical: Sequence[tuple[str, float]],
    *,
    alpha: float,
    min_score: float,
    limit: int,
) -> list[Fused]:
    """Pipeline v2's merge of the two legs' hits by memory id, best first (see :func:`fuse`)."""
    vector, bm25 = _leg_scores(dense, lexical)
    hits: list[Fused] = []
    for key in dict.fromkeys([*vector, *bm25]):
        v, b = vector.get(key), bm25.get(key)
        if v is None:
            score = bm25[key]
        elif b is None:
            score = v
        else:
            score = alpha * v + (1.0 - alpha) * b
        if score >= min_score:
            hits.append(Fused(key, score, v, b))
    return _best(hits, limit)


def fuse_scores_normalized(
    dense: Sequence[tuple[str, float]],
    lexical: Sequence[tuple[str, float]],
    *,
    alpha: float,
    min_score: float,
    limit: int,
) -> list[Fused]:
    """The weighted sum over scores each leg rescales to its own candidates, by memory id (see
    :func:`fuse_normalized`)."""
    raw_vector, raw_bm25 = _leg_scores(dense, lexical)
    vector, bm25 = leg_scaled(raw_vector), leg_scaled(raw_bm25)
    hits: list[Fused] = []
    for key in dict.fromkeys([*raw_vector, *raw_bm25]):
        score = alpha * vector.get(key, 0.0) + (1.0 - alpha) * bm25.get(key, 0.0)
        if score >= min_score:
            hits.append(Fused(key, score, raw_vector.get(key), raw_bm25.get(key)))
    return _best(hits, limit)


def _leg_scores(
    dense: Sequence[tuple[str, float]], lexical: Sequence[tuple[str, float]]
) -> tuple[dict[str, float], dict[str, float]]:
    """Each leg's scores by id on a 0–1 scale: cosine similarity clamped, raw BM25 squashed."""
    # Cosine similarity runs from -1 to 1, and float32 rounding can push it just past 1.
    return {key: min(1.0, max(0.0, score)) for key, score in dense}, {key: bm25_score(score) for key, score in lexical}


def _best(hits: list[Fused], limit: int) -> list[Fused]:
    """The ``limit`` best hits; ties go by id, so both backends return the same order."""
    hits.sort(key=lambda h: (-h.score, h.id))
    return hits[:limit]


def _hits(fused: Sequence[Fused], memories: Mapping[str, Memory]) -> list[HybridHit]:
    return [HybridHit(memories[f.id], f.score, f.vector_score, f.bm25_score) for f in fused if f.id in memories]


def fuse(
    dense: Sequence[tuple[Memory, float]],
    lexical: Sequence[tuple[Memory, float]],
    *,
    alpha: float,
    min_score: float,
    limit: int,
) -> list[HybridHit]:
    """Pipeline v2's merge of the two legs' hits, best first.

    ``dense`` carries Qdrant's cosine similarities, ``lexical`` its raw BM25 scores. By
    memory id: ``alpha × vector + (1 - alpha) × bm25`` when both legs scored a memory, the
    single score otherwise; hits under ``min_score`` are dropped. Ties go by id, so both
    backends return the same order. As in the spec, a weak BM25 match can rank a memory
    below where its vector score alone would put it.
    """
    fused = fuse_scores(
        [(m.id, s) for m, s in dense], [(m.id, s) for m, s in lexical], alpha=alpha, min_score=min_score, limit=limit
    )
    return _hits(fused, {m.id: m for m, _ in (*dense, *lexical)})


def leg_scaled(scores: Mapping[str, float]) -> dict[str, float]:
    """One leg's scores rescaled over its own candidates: the best 1, the lowest 0 (min-max).

    A leg with a single candidate, or all equal, scores them 1: each is that leg's best match.
    """
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high <= low:
        return dict.fromkeys(scores, 1.0)
    return {key: (value - low) / (high - low) for key, value in scores.items()}


def fuse_normalized(
    dense: Sequence[tuple[Memory, float]],
    lexical: Sequence[tuple[Memory, float]],
    *,
    alpha: float,
    min_score: float,
    limit: int,
) -> list[HybridHit]:
    """Pipeline v2's weighted sum over scores each leg first rescales to its own candidates, best first.

    Each leg is min-max scaled over the top candidates it returned (:func:`leg_scaled`), then
    ``alpha × vector + (1 - alpha) × bm25``. A memory one leg did not return scores 0 in that leg:
    the leg ranks it below its lowest candidate, which already scales to 0. Why not the raw scores:
    the bundled e5 puts every passage's cosine within ~0.79–0.93 of a query, while BM25's
    ``|s| / (1 + |s|)`` spreads over 0–0.97, so a raw weighted sum is decided by whichever keyword
    overlap there is and the single-score rule lets an unmatched memory outrank a matched one
    (bench/quality/retrieval.py). Scaled, both legs span [0, 1] for every query and ``alpha`` means what it
    says. The hits keep their raw ``vector_score`` and ``bm25_score``; ``score`` is the fused one,
    relative to this query's candidates, so ``min_score`` here is no absolute similarity bar.
    Ties go by id.
    """
    fused = fuse_scores_normalized(
        [(m.id, s) for m, s in dense], [(m.id, s) for m, s in lexical], alpha=alpha, min_score=min_score, limit=limit
    )
    return _hits(fused, {m.id: m for m, _ in (*dense, *lexical)})


def memory_select(
    scope_keys: Sequence[str] | None,
    types: Sequence[str] | None = None,
    include_superseded: bool = True,
    exclude_ids: Sequence[str] = (),
    *,
    sessions: Sequence[str] | None = None,
    speaker: str | None = None,
    spoken_by: str | None = None,
    sourced_by: str | None = None,
) -> Select:
    """The memories in these scopes (None: every scope), of these types and sessions (None: every one).

    ``speaker``: a reader's user key, who reads only their own conversations and what is shared
    (speaker "", or none stored: memories from before the field); None reads every speaker's.
    ``spoken_by``: only the conversations of this speaker (a user's forget finds them so).
    ``sourced_by``: only the memories with a source of this speaker (the facts drawn from their turns).
    """
    absent_or = {} if speaker is None else {"speaker": sorted({speaker, ""})}
    all_of: dict[str, list[str]] = {}
    if scope_keys is not None:
        all_of["scope_key"] = list(scope_keys)
    if types is not None:
        all_of["type"] = list(types)
    if sessions is not None:
        all_of["session_id"] = list(sessions)
    if spoken_by is not None:
        all_of["speaker"] = [spoken_by]
    if sourced_by is not None:
        all_of["sources[].speaker"] = [sourced_by]
    if not include_superseded:
        # The keyword, not a bool: qdrant-edge-py 0.9 turns MatchValue(False) into 0.
        all_of["status"] = ["active"]
    return Select(all_of, exclude_ids=tuple(exclude_ids), absent_or=absent_or)


class Rewrite(NamedTuple):
    """A refreshed or superseded memory, and whether its point's vectors change with it."""

    memory: Memory
    #: A new dense vector, or new text and so new BM25 terms: one upsert then rewrites payload
    #: and both vectors, so they never disagree, even after a crash between two writes.
    #: Otherwise only the payload is overwritten.
    vectors: bool


def rewrite(old: Memory, changes: Mapping[str, Any], vector: Sequence[float] | None) -> Rewrite:
    """``old`` with ``changes`` applied, for a refresh (new text, maybe a new vector) or a supersede."""
    new = msgspec.structs.replace(old, **changes)
    return Rewrite(new, vector is not None or new.text != old.text)


class WithVectors(Protocol):
    """A point as either library reads it back with its vectors."""

    @property
    def id(self) -> object: ...

    @property
    def vector(self) -> object: ...


def dense_of(point: WithVectors) -> list[float]:
    """The dense vector of a point read with it."""
    vectors = point.vector
    if not isinstance(vectors, dict):
        raise ValueError(f"point {point.id} was read without its vectors")
    return [float(x) for x in vectors[DENSE_VECTOR]]


def tombstone_since(memory: Memory) -> datetime:
    """When a tombstone's retention window opened: ``superseded_at``, else ``updated_at``."""
    return memory.superseded_at or memory.updated_at


def oldest_tombstones(tombstones: Iterable[Memory], limit: int) -> list[Memory]:
    """At most ``limit`` tombstones, oldest first; ties by id, so both backends agree."""
    return sorted(tombstones, key=lambda m: (tombstone_since(m), m.id))[: max(0, limit)]


class IndexHealth(NamedTuple):
    """What the maintenance worker (Pipeline v2) reads of a store's indexes and storage."""

    #: Every stored memory, superseded ones (tombstones) included.
    memories: int
    superseded: int
    #: Memories without their BM25 terms: hybrid search's lexical leg cannot find them.
    missing_sparse: int
    #: Memories without their embedding: vector search cannot find them.
    missing_dense: int
    #: Payload indexes of :data:`MEMORY_INDEXES` the collection lacks (none known in local mode).
    missing_indexes: tuple[str, ...]


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

    async def set_importance(self, memory_id: str, importance: float | None) -> Memory | None:
        """Set (None: clear) a memory's importance, as a pin or unpin does; None if missing."""

    async def purge_superseded(self, before: datetime, *, limit: int = 500) -> list[Memory]:
        """Hard-delete at most ``limit`` memories superseded before ``before``; returns them.

        The retention worker's tombstone step (Pipeline v2). A memory superseded before
        ``superseded_at`` existed counts from its ``updated_at``. Active memories are never
        touched. When more than ``limit`` are due, which go first is unspecified: the next
        sweep takes the rest.
        """

    async def tombstones(self, before: datetime, *, limit: int = 500) -> list[Memory]:
        """The memories ``purge_superseded(before)`` would delete, oldest first, at most ``limit``.

        Deletes nothing: the retention worker unlinks them from the graph before purging.
        Oldest by :func:`tombstone_since`, ties by id.
        """

    # -- repairs (the maintenance worker's, Pipeline v2) -------------------------------------

    async def index_health(self) -> IndexHealth:
        """Counts of stored memories, tombstones, memories lacking either vector, and missing indexes."""

    async def repair_sparse_vectors(self, *, limit: int = 500) -> int:
        """Give BM25 terms to at most ``limit`` memories without them; how many were repaired."""

    async def repair_indexes(self) -> list[str]:
        """Create the payload indexes the collection lacks; the fields indexed."""

    async def lacking_dense(self, *, limit: int = 100) -> list[Memory]:
        """At most ``limit`` memories stored without their embedding (to re-embed and upsert)."""

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
        speaker: str | None = None,
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
        fusion: Fusion = "weighted",
        speaker: str | None = None,
    ) -> list[HybridHit]:
        """Active memories by Pipeline v2's BM25 + vector score, best first.

        ``text`` is the BM25 query and ``vector`` its embedding; ``alpha`` weighs the vector
        leg. ``fusion="weighted"`` (:func:`fuse`, the decision stage's: absolute scores, so a
        calibrated ``min_score`` means "similar enough") fetches ``limit × HYBRID_POOL_FACTOR``
        candidates per leg; ``"normalized"`` (:func:`fuse_normalized`, recall's: the best order)
        at least ``NORMALIZED_POOL``.
        """

    async def list(
        self,
        scope_keys: Sequence[str] | None,
        *,
        types: Sequence[str] | None = None,
        include_superseded: bool = False,
        limit: int = 1000,
        sessions: Sequence[str] | None = None,
        before: datetime | None = None,
        speaker: str | None = None,
        spoken_by: str | None = None,
        sourced_by: str | None = None,
    ) -> list[Memory]:
        """Memories in the given scopes (None: every scope), newest ``updated_at`` first; ``sessions``:
        only those of these sessions (a timeline's thread, a session in the console); ``before``: only
        those updated at or before it (the next page of a newest-first listing); ``speaker``,
        ``spoken_by`` and ``sourced_by`` as :func:`memory_select` says."""

    async def count(
        self, scope_keys: Sequence[str] | None = None, *, include_superseded: bool = True, speaker: str | None = None
    ) -> int: ...

    async def scopes(self, *, limit: int = 1000) -> dict[str, int]:
        """Every scope key holding memories (at most ``limit``), with how many each holds (a facet
        over the keyword index: no memory is read)."""


class Leg(NamedTuple):
    """One nearest-neighbour query: a dense vector or BM25 terms, over the memories ``select`` keeps."""

    using: str
    query: list[float] | Terms
    select: Select
    limit: int
    #: The lowest similarity returned; None returns ``limit`` whatever their score.
    score_threshold: float | None = None
    #: False: the hits come without their payloads (an empty dict), read later for the few kept.
    with_payload: bool = True


#: A leg's hits, best first: each point's id, its payload (empty when the leg left it out) and score.
LegHits = list[tuple[str, dict[str, Any], float]]


class QdrantMemories(ABC):
    """The MemoryStore logic both backends share; each supplies the reads and writes below.

    What stays in each backend is what must run as one step there: a read-modify-write
    (refresh, supersede, delete, purge) is one call on Edge's shard thread.
    """

    embedding_model: str
    dim: int
    #: False on a collection that predates the ``bm25`` vector on a server too old to add
    #: it: its points carry no terms and hybrid search runs the vector leg alone.
    _bm25: bool = True

    @abstractmethod
    async def _query(self, legs: Sequence[Leg]) -> list[LegHits]:
        """Run the legs together; their hits in the same order."""

    @abstractmethod
    async def _payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The payloads of the points with these ids that exist, by id."""

    async def _query_then_read(
        self, legs: Sequence[Leg], pick: Callable[[list[LegHits]], Sequence[Fused]]
    ) -> tuple[list[Fused], dict[str, dict[str, Any]]]:
        """Run the legs, ``pick`` the hits to keep, and read only their payloads.

        A backend that can do both in one step (Edge: one call on the shard's thread) overrides it,
        so no write lands between the search and the read.
        """
        picked = list(pick(await self._query(legs)))
        return picked, await self._payloads([f.id for f in picked])

    @abstractmethod
    async def _count(self, select: Select) -> int: ...

    @abstractmethod
    async def _replace(self, memory_id: str, changes: dict[str, Any], vector: list[float] | None) -> Memory | None:
        """Apply ``changes`` (and ``vector``) to a stored memory as :func:`rewrite` says; None if missing."""

    @abstractmethod
    async def _count_lacking(self, vector_name: str) -> int:
        """How many points lack the named vector."""

    @abstractmethod
    async def _missing_indexes(self) -> tuple[str, ...]:
        """The fields of :data:`MEMORY_INDEXES` without their payload index."""

    async def index_health(self) -> IndexHealth:
        # Each counted on its own: all minus active, read at two moments, went below zero
        # when the pipeline stored a memory in between.
        return IndexHealth(
            memories=await self._count(Select()),
            superseded=await self._count(Select({"status": ["superseded"]})),
            missing_sparse=await self._count_lacking(BM25_VECTOR) if self._bm25 else 0,
            missing_dense=await self._count_lacking(DENSE_VECTOR),
            missing_indexes=await self._missing_indexes(),
        )

    # -- writes ------------------------------------------------------------------

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
        changes: dict[str, Any] = {"text": text, "updated_at": updated_at}
        if source_chunk is not None:
            changes["source_chunk"] = source_chunk
        if session_id is not None:
            changes["session_id"] = session_id
        if sources is not None:
            changes["sources"] = list(sources)
        return await self._replace(memory_id, changes, None if vector is None else [float(x) for x in vector])

    async def set_importance(self, memory_id: str, importance: float | None) -> Memory | None:
        return await self._replace(memory_id, {"importance": importance}, None)

    async def supersede(self, memory_id: str, superseded_by: str, *, at: datetime | None = None) -> Memory | None:
        changes = {"superseded_by": superseded_by, "superseded_at": at or datetime.now(UTC)}
        return await self._replace(memory_id, changes, None)

    # -- reads -------------------------------------------------------------------

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
        speaker: str | None = None,
    ) -> list[ScoredMemory]:
        nearest = Leg(
            DENSE_VECTOR,
            [float(x) for x in vector],
            memory_select(scope_keys, types, include_superseded, exclude_ids, speaker=speaker),
            limit,
            # Cosine in Qdrant is a similarity; the store speaks distance = 1 - score.
            score_threshold=None if max_distance is None else 1.0 - max_distance,
        )
        (hits,) = await self._query([nearest])
        asked = set(scope_keys)  # checked as in hybrid_search: the filter may name the scopes left out
        # float32 rounding can push an identical vector's score just past 1.
        return [
            ScoredMemory(memory_from_payload(p), max(0.0, 1.0 - score))
            for _, p, score in hits
            if p.get("scope_key") in asked
        ]

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
        fusion: Fusion = "weighted",
        speaker: str | None = None,
    ) -> list[HybridHit]:
        run_dense, run_bm25 = hybrid_legs(alpha)
        select = memory_select(scope_keys, types, include_superseded=False, exclude_ids=exclude_ids, speaker=speaker)
        pool = limit * HYBRID_POOL_FACTOR if fusion == "weighted" else max(limit * HYBRID_POOL_FACTOR, NORMALIZED_POOL)
        # The legs return ids and scores only: of their 2 × pool candidates only the fused top
        # ``limit`` are read and decoded (at 1M memories that was most of a hybrid search's time).
        legs: list[Leg] = []
        if run_dense:
            legs.append(Leg(DENSE_VECTOR, [float(x) for x in vector], select, pool, with_payload=False))
        terms = query_terms(text)
        if run_bm25 and self._bm25 and terms.indices:  # a text of stopwords alone has no terms
            legs.append(Leg(BM25_VECTOR, terms, select, pool, with_payload=False))
        if not legs:
            return []
        merge = fuse_scores if fusion == "weighted" else fuse_scores_normalized

        def pick(results: list[LegHits]) -> list[Fused]:
            by_leg = {
                leg.using: [(key, score) for key, _, score in hits] for leg, hits in zip(legs, results, strict=True)
            }
            dense, lexical = by_leg.get(DENSE_VECTOR, []), by_leg.get(BM25_VECTOR, [])
            return merge(dense, lexical, alpha=alpha, min_score=min_score, limit=limit)

        fused, payloads = await self._query_then_read(legs, pick)
        # The filter may name the scopes it leaves out (EdgeStore's ``excluding``): what is read back is
        # checked against the scopes asked for all the same, so no cache can widen what a reader sees.
        asked = set(scope_keys)
        memories = {key: memory_from_payload(p) for key, p in payloads.items() if p.get("scope_key") in asked}
        return _hits(fused, memories)

    async def count(
        self, scope_keys: Sequence[str] | None = None, *, include_superseded: bool = True, speaker: str | None = None
    ) -> int:
        return await self._count(memory_select(scope_keys, include_superseded=include_superseded, speaker=speaker))

    async def scopes(self, *, limit: int = 1000) -> dict[str, int]:
        return await self._facet("scope_key", limit)

    @abstractmethod
    async def _facet(self, key: str, limit: int) -> dict[str, int]:
        """The values of a keyword-indexed field and how many points hold each, most first."""

    @abstractmethod
    async def _newest(self, select: Select, limit: int, before: datetime | None = None) -> list[dict[str, Any]]:
        """Payloads of the ``limit`` memories ``select`` keeps with the newest ``updated_at`` (at or before
        ``before`` when given), newest first."""

    # Last: below it, ``list`` in an annotation would name this method, not the builtin.
    async def list(
        self,
        scope_keys: Sequence[str] | None,
        *,
        types: Sequence[str] | None = None,
        include_superseded: bool = False,
        limit: int = 1000,
        sessions: Sequence[str] | None = None,
        before: datetime | None = None,
        speaker: str | None = None,
        spoken_by: str | None = None,
        sourced_by: str | None = None,
    ) -> list[Memory]:
        select = memory_select(
            scope_keys,
            types,
            include_superseded,
            sessions=sessions,
            speaker=speaker,
            spoken_by=spoken_by,
            sourced_by=sourced_by,
        )
        payloads = await self._newest(select, limit, before)
        memories = [memory_from_payload(p) for p in payloads]
        # Equal times come back in any order; by id, both backends agree.
        memories.sort(key=lambda m: (m.updated_at, m.id), reverse=True)
        return memories
