"""The stored memory and its vocabulary: the 11 types and two scopes of the memory spec."""

from __future__ import annotations

from datetime import datetime
from typing import Final, Literal

import msgspec

MemoryType = Literal[
    "project-brief",
    "architecture",
    "tech-context",
    "product-context",
    "progress",
    "session-summary",
    "error-solution",
    "preference",
    "learned-pattern",
    "project-config",
    "conversation",
]

#: Every memory type, in the order the memory spec lists them: what extraction may produce.
MEMORY_TYPES: Final[tuple[str, ...]] = MemoryType.__args__  # type: ignore[attr-defined]

#: What Phase 2 (the consolidation spec) writes besides them: one consolidated summary per project,
#: shown at the top of the [MEMORY] block. Never extracted, deduplicated or aged.
CONSOLIDATED: Final = "consolidated"
#: A window of an ingested document (Pipeline v2's document ingest): written by the document agent,
#: searchable like any memory, never extracted, deduplicated against facts, aged or contradicted.
DOCUMENT_CHUNK: Final = "document_chunk"
StoredType = MemoryType | Literal["consolidated", "document_chunk"]

#: Types that represent evolving understanding: wider dedup distance (the memory spec).
STRUCTURAL_TYPES: Final[frozenset[str]] = frozenset(
    {"project-brief", "architecture", "tech-context", "product-context", "project-config"}
)

#: Types whose new memories are never checked for contradictions (the memory spec).
CONTRADICTION_EXEMPT_TYPES: Final[frozenset[str]] = frozenset(
    {"session-summary", "conversation", CONSOLIDATED, DOCUMENT_CHUNK}
)

#: Types whose default scope is the user rather than the project (the memory spec).
USER_SCOPED_TYPES: Final[frozenset[str]] = frozenset({"preference"})

Scope = Literal["project", "user"]

#: A memory forgotten on request is superseded by this marker (plus the operation id), not by
#: another memory.
FORGOTTEN_MARK: Final = "forgotten:"
#: A memory marked wrong (in the console) is superseded by this marker (plus the operation id).
WRONG_MARK: Final = "wrong:"


class Citation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A file a piece of memory speaks of, as it was when the turn was captured (issue 39).

    ``path`` is relative to ``repo`` (the git work tree's root) when the file is in one, else absolute.
    ``commit`` is the HEAD checked out when the turn was captured, ``dirty`` whether the tree had
    uncommitted changes then. ``start``/``end`` are the cited lines (1-based, inclusive; 0 for the whole
    file). ``fingerprint`` is a short hash of the cited region's text at capture ("" if it could not be read).
    """

    path: str
    repo: str = ""
    remote: str = ""
    commit: str = ""
    dirty: bool = False
    start: int = 0
    end: int = 0
    fingerprint: str = ""


class Provenance(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where a piece of memory came from (the capture spec): the source, and the file and line for a session file.

    ``source_type`` is the coding CLI (claude, codex, gemini, kimi) for captured sessions, else how the
    text arrived (publish, api, mcp, document, …). ``file`` and ``line`` are empty for what came from no file.
    """

    source_type: str
    session_id: str = ""
    file: str = ""
    line: int = 0
    #: The code the message spoke of: files its tool calls read or edited, paths its text named (issue 39).
    citations: list[Citation] = []
    #: Whose turns this source is (their user key, ``u_…``): a user's forget removes their sources from
    #: the facts others' turns also support, and the facts only theirs support. "" when not known.
    speaker: str = ""


class Memory(msgspec.Struct, tag="memory.v1", tag_field="schema", kw_only=True, frozen=True):
    """One stored memory: the fields of the extraction spec step 5 plus type, scope and supersession.

    ``id`` is derived from the scope key and the normalized content (see
    ``memstream.identity``), so replays and at-least-once delivery never duplicate.
    """

    id: str
    text: str
    type: StoredType
    scope: Scope
    #: Deterministic tag of the project directory (``p_…``) or user identity (``u_…``).
    scope_key: str
    #: The conversation excerpt that produced this fact.
    source_chunk: str = ""
    created_at: datetime
    updated_at: datetime
    content_hash: str
    embedding_model: str
    session_id: str = ""
    project: str = ""
    #: Id of the newer memory that supersedes this one; superseded memories stay
    #: stored for audit but never appear in search or the [MEMORY] block.
    superseded_by: str | None = None
    #: When it was superseded: the retention worker (Pipeline v2) hard-deletes tombstones
    #: once this is past their window. None on memories superseded before the field
    #: existed; their ``updated_at`` stands in for it.
    superseded_at: datetime | None = None
    #: Every source this memory's text came from, first seen first (the capture spec). A memory merged from
    #: several exchanges or refreshed by a later one lists each; it never names a source whose text it
    #: does not hold.
    sources: list[Provenance] = []
    #: How much the memory weighs, in [0, 1]; None where nothing set it. Document chunks: 0.3 (Pipeline v2).
    importance: float | None = None
    #: The title of the document a chunk comes from ("" for other memories).
    title: str = ""
    #: The id of the document a chunk comes from ("" for other memories).
    document_id: str = ""
    #: Whose words a conversation memory holds: the user key (``u_…``) of the exchange's speaker. Only
    #: the speaker reads it, unless its project shares its members' conversations (docs/security.md).
    #: "" for everything shared with the project (its facts, documents) and for memories stored before
    #: the field existed.
    speaker: str = ""

    @property
    def active(self) -> bool:
        return self.superseded_by is None


class ScoredMemory(msgspec.Struct, frozen=True):
    """A memory returned by a vector search, with its cosine distance to the query."""

    memory: Memory
    distance: float


class HybridHit(msgspec.Struct, frozen=True):
    """A memory returned by a hybrid (BM25 + vector) search, with its scores in [0, 1].

    ``score`` ranks the hits: Pipeline v2's ``alpha × vector + (1 - alpha) × bm25`` when both
    legs scored the memory, the one leg's score otherwise. A leg that did not is None.
    """

    memory: Memory
    score: float
    vector_score: float | None
    bm25_score: float | None
    #: What became of the code the memory cites, where recall checked it: "" (current, or not checked),
    #: ``changed``, ``moved`` or ``gone`` (memstream.recall.staleness).
    code: str = ""
