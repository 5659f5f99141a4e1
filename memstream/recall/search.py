"""The read side: semantic search and the [MEMORY] block of the memory spec (plus Phase 2's summary).

Superseded memories never appear here; they stay in the store for audit only.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

import msgspec

from memstream.recall import injected as injected_settings
from memstream.recall import staleness
from memstream.recall.answers import preview
from memstream.recall.dates import TIME_POOL, anchored, said_then
from memstream.recall.sessions import SESSION_WEIGHT, session_fusion
from memstream.rules.dates import time_named
from memstream.schemas import CONSOLIDATED, DOCUMENT_CHUNK, MEMORY_TYPES, Memory
from memstream.schemas.injected import ContextSettings
from memstream.schemas.memory import HybridHit
from memstream.store.graph import GraphStore

if TYPE_CHECKING:
    from memstream.ports import Providers
    from memstream.recall.rerank import Reranker

log = logging.getLogger(__name__)


class Relevant(Protocol):
    """A search result as the block shows it: a hybrid hit, or a vector hit (``ScoredMemory``)."""

    @property
    def memory(self) -> Memory: ...


#: The memory spec: block sections and the memory types that fill them, in display order.
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Project Brief", ("project-brief", "project-config")),
    ("Architecture", ("architecture",)),
    ("Tech Context", ("tech-context",)),
    ("Product Context", ("product-context",)),
    ("Progress & Status", ("progress",)),
    ("Last Session", ("session-summary", "conversation")),
    ("User Preferences", ("preference",)),
)
RELEVANT = "Relevant to Current Task"
#: Phase 2's consolidated summary of the project (the consolidation spec), shown first.
CONSOLIDATED_TITLE = "Consolidated Memory"
#: Most memories shown per section, newest first.
SECTION_LIMIT = 10
#: The latest session context shown under "Last Session".
LAST_SESSION_LIMIT = 3
#: Semantic results in the "Relevant to Current Task" section.
RELEVANT_LIMIT = 5
#: With the graph boost, candidates fetched per result asked for: a boosted memory can
#: only climb into the results from among the candidates the vector search found.
BOOST_POOL = 3
#: How long past its own deadline the graph store may take to return what it has found
#: (it checks the deadline between steps) before search goes on without the boost.
BOOST_GRACE_S = 0.25


#: Candidates search ranks at least when session-aware fusion is on: enough for a session's other
#: exchanges to be among them (bench/quality/retrieval.py, dev half: 20 with weight 0.2 beat 12 with any weight).
SESSION_POOL = 20


#: How search treats document chunks: with the memories, left out, or alone.
DOCUMENT_FILTERS: tuple[str, ...] = ("include", "exclude", "only")


def scopes(project_key: str, user_key: str) -> list[str]:
    return [key for key in (project_key, user_key) if key]


def searched_types(documents: str) -> list[str] | None:
    """The memory types a search with this document filter looks at (None: every type)."""
    if documents == "include":
        return None
    if documents == "exclude":
        return [*MEMORY_TYPES, CONSOLIDATED]
    if documents == "only":
        return [DOCUMENT_CHUNK]
    raise ValueError(f"documents must be one of {', '.join(DOCUMENT_FILTERS)}, got {documents!r}")


async def search(
    providers: Providers,
    query: str,
    project_key: str,
    user_key: str = "",
    *,
    limit: int = 10,
    reranker: Reranker | None = None,
    documents: str = "include",
) -> list[HybridHit]:
    """The memories that best match the query in the project and the user's scope, best first."""
    return await search_scopes(
        providers, query, scopes(project_key, user_key), limit=limit, reranker=reranker, documents=documents
    )


async def search_scopes(
    providers: Providers,
    query: str,
    keys: Sequence[str],
    *,
    limit: int = 10,
    reranker: Reranker | None = None,
    documents: str = "include",
    session_weight: float = SESSION_WEIGHT,
    now: datetime | None = None,
    speaker: str | None = None,
) -> list[HybridHit]:
    """The memories of exactly these scopes that best match the query, best first (the API's
    scopes, decided from the caller's token). No scope, no search: never "every scope".

    Pipeline v2's recall: the same BM25 + vector search and weighted sum the decision stage uses
    (``store.hybrid_search``, ``alpha`` = MEMSTREAM_RECALL_ALPHA, nothing dropped by a minimum score),
    over each leg's scores min-max scaled to this query's candidates (``fusion="normalized"``): the
    decision stage keeps the raw scores because its calibrated minimum score must mean "similar
    enough", which a per-query scale cannot; recall only needs the order, and the raw sum ranked
    below the vector leg alone (bench/quality/retrieval.py). When no hit clears the relevance floor
    (:func:`over_floor`), a query with nothing relevant, the search finds nothing. Session-aware fusion
    then lets the other hits of a hit's session vouch for it (``session_weight``,
    ``recall.sessions.SESSION_WEIGHT``; 0 turns it off), and a query that names a time prefers what was
    said then (``recall.dates``, as of ``now``). The graph boost is added to the fused score when
    the graph is enabled, then, when a reranker is given, its order for the top N.
    ``documents``: ``include`` searches document chunks with the memories, ``exclude`` leaves them
    out, ``only`` searches nothing else. ``speaker``: keep only this reader's conversations (and what is
    shared), as ``memstream.auth.read_speaker`` decides; None keeps every speaker's.
    """
    keys = [key for key in keys if key]
    if not keys:
        return []
    types = searched_types(documents)
    settings = providers.settings
    graph = providers.graph
    reranker = reranker if reranker is not None else providers.reranker
    pool = limit * BOOST_POOL if graph is not None else limit
    if reranker is not None:
        pool = max(pool, settings.reranker_top_n)
    if session_weight > 0:
        pool = max(pool, SESSION_POOL)
    # A query naming a time ("yesterday", "last May") prefers memories said then (recall.dates).
    now = now or datetime.now(UTC)
    span = time_named(query, now)
    if span is not None:
        pool = max(pool, TIME_POOL)
    # The graph walk needs only the query's words: it runs while the query is embedded.
    boost = (
        asyncio.create_task(graph_boost_ids(graph, query, keys, settings.graph_boost_timeout_ms / 1000))
        if graph is not None
        else None
    )
    try:
        vector = await providers.embedder.embed_query(query)
        hits = await providers.store.hybrid_search(
            query,
            vector,
            keys,
            limit=pool,
            alpha=settings.recall_alpha,
            min_score=0.0,
            types=types,
            fusion="normalized",
            speaker=speaker,
        )
    except BaseException:
        if boost is not None:
            boost.cancel()
        raise
    hits = over_floor(hits, relevance_floor(providers), settings.recall_bm25_floor)
    hits = session_fusion(hits, session_weight)
    # Read as of the newest candidate when the clock's span holds none (a conversation held long ago).
    hits = said_then(hits, anchored(query, now, hits) if span is not None else None)
    if boost is not None:
        hits = rerank(hits, await boost, settings.graph_boost_weight, len(hits))
    if reranker is not None:
        from memstream.recall.rerank import rerank_top

        hits = await rerank_top(
            query, hits, reranker, top_n=settings.reranker_top_n, timeout_s=settings.reranker_timeout_ms / 1000
        )
    # Memories whose cited code is gone sink below the rest; changed or moved ones say so (issue 39).
    hits = staleness.marked(hits[: limit * 2], staleness.checker_for(settings)) + list(hits[limit * 2 :])
    return hits[:limit]


def relevance_floor(providers: Providers) -> float:
    """The cosine similarity a hit needs (0: none): MEMSTREAM_RECALL_FLOOR, else the embedder's calibrated one."""
    chosen = providers.settings.recall_floor
    return chosen if chosen >= 0 else providers.embedder.profile.recall_floor


def over_floor(hits: Sequence[HybridHit], vector_floor: float, bm25_floor: float) -> list[HybridHit]:
    """The hits, if any of them is relevant in absolute terms (cosine similarity at least ``vector_floor``, or
    a BM25 match at least ``bm25_floor``); none otherwise. The fused score cannot tell: it is scaled over the
    query's own candidates, so the best of unrelated memories scores high.

    A gate, not a filter: when one hit clears the floor every hit is kept in its rank, so a relevant
    query's recall is what it was (bench/quality/relevance_floor.py: filtering hit by hit dropped answers a
    paraphrase finds with a low cosine). A ``vector_floor`` of 0 keeps every hit."""
    if vector_floor <= 0:
        return list(hits)
    relevant = any((h.vector_score or 0.0) >= vector_floor or (h.bm25_score or 0.0) >= bm25_floor for h in hits)
    return list(hits) if relevant else []


async def graph_boost_ids(graph: GraphStore, query: str, scope_keys: Sequence[str], deadline_s: float) -> set[str]:
    """Memory ids the graph links to the query; empty when the lookup fails or hangs.

    Boosting is only additive, so nothing here may fail or stall a search.
    """
    try:
        ids, timed_out = await asyncio.wait_for(
            graph.boost_ids(query, scope_keys, deadline_s=deadline_s), timeout=deadline_s + BOOST_GRACE_S
        )
    except TimeoutError:
        log.warning("graph boost gave no answer within %.2fs; searching without it", deadline_s + BOOST_GRACE_S)
        return set()
    except Exception:
        log.warning("graph boost failed; searching without it", exc_info=True)
        return set()
    if timed_out:
        log.info("graph boost hit its %.2fs deadline; boosting the %d memories found by then", deadline_s, len(ids))
    return ids


def rerank(candidates: Sequence[HybridHit], boosted: Collection[str], weight: float, limit: int) -> list[HybridHit]:
    """The ``limit`` best candidates by hybrid score, plus ``weight`` for boosted ids (Pipeline v2).

    Ties keep the fused order. Each hit keeps its real scores; only the order changes.
    """

    def score(hit: HybridHit) -> float:
        return hit.score + (weight if hit.memory.id in boosted else 0.0)

    return sorted(candidates, key=score, reverse=True)[:limit]


class Block(msgspec.Struct, frozen=True):
    """A rendered [MEMORY] block and the memories it shows (their usage feeds Phase 2)."""

    text: str
    memories: list[Memory]


#: Characters per token in the budget's estimate (English prose and code average about 4).
CHARS_PER_TOKEN = 4
#: The order sections lose entries when the block is over its budget: the first listed is trimmed
#: first (its oldest entry first), down to nothing, before the next is touched. Project Brief goes last.
TRIM_ORDER: tuple[str, ...] = (
    "Last Session",
    "Product Context",
    "Progress & Status",
    "Tech Context",
    "Architecture",
    CONSOLIDATED_TITLE,
    "User Preferences",
    RELEVANT,
    "Project Brief",
)


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


class _Section(msgspec.Struct):
    title: str
    entries: list[str]
    memories: list[Memory]


#: The order sections claim the memories they share, most useful first (the reverse of ``TRIM_ORDER``): a
#: memory both relevant to the query and architecture is shown once, where the budget keeps it longest.
CLAIM_ORDER: tuple[str, ...] = tuple(reversed(TRIM_ORDER))
#: The longest a raw entry (a conversation exchange, a document chunk) is shown: about 100 tokens, so one
#: exchange costs what two or three facts do. The whole memory is one get_memories away.
ENTRY_CHARS = 400
#: Types whose memories are raw text rather than a one-line fact: their entries are cut to ``ENTRY_CHARS``.
RAW_TYPES: frozenset[str] = frozenset({"conversation", DOCUMENT_CHUNK})
#: The longest any other entry is shown (about 150 tokens). Facts are a line or two; a very long one (an
#: 11k-character `remember`) took the whole budget, and the trimming emptied every other section for it
#: or dropped it unseen (issue 37.5).
FACT_CHARS = 600
#: Candidates each section looks at per entry it shows: room for the ones dropped as repeats.
CANDIDATE_FACTOR = 3


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def repeated(memories: Sequence[Memory]) -> set[str]:
    """Ids of memories whose text another of ``memories`` already holds: the same text (the newest is kept)
    or the start of a longer one (raw mode's earlier snapshot of an exchange that grew)."""
    ordered = sorted({m.id: m for m in memories}.values(), key=lambda m: (_normal(m.text), m.updated_at, m.id))
    # Sorted, a text that starts another sorts right before it (or before one that also starts with it).
    return {
        shorter.id
        for shorter, longer in itertools.pairwise(ordered)
        if _normal(longer.text).startswith(_normal(shorter.text))
    }


#: Said after a block entry whose cited code changed or moved since the memory was captured.
CODE_CHANGED = staleness.CODE_CHANGED
#: The code statuses a block entry is marked for (a ``gone`` one is not shown at all).
STALE_SHOWN = frozenset({"changed", "moved"})


def _entry(memory: Memory, tagged: bool = False, changed: bool = False) -> str:
    text = preview(memory.text, ENTRY_CHARS if memory.type in RAW_TYPES else FACT_CHARS)
    if changed:
        text += CODE_CHANGED
    return f"- [{memory.type}] {text}" if tagged else f"- {text}"


def build_block(
    memories: Sequence[Memory],
    relevant: Sequence[Relevant] = (),
    *,
    max_tokens: int | None = None,
    code: Mapping[str, str] | None = None,
    injected: ContextSettings | None = None,
) -> Block:
    """The [MEMORY] block: Phase 2's consolidated summary, then one section per the memory spec row
    that has memories, then the search results; trimmed by ``TRIM_ORDER`` to fit ``max_tokens``.

    Each memory is shown once: a repeat of another's text, or the start of a longer one, is left out
    (:func:`repeated`), and a memory two sections want goes to the one first in ``CLAIM_ORDER``. Raw
    entries are cut to ``ENTRY_CHARS``.

    ``code`` is what became of each cited memory's code (by id, ``memstream.recall.staleness``): a memory
    whose code is ``gone`` is left out; a ``changed`` or ``moved`` one ends with :data:`CODE_CHANGED`.

    ``injected`` is the project's settings (``memstream.recall.injected``): off gives an empty block; a
    hidden type's memories and a hidden section are left out. None (or the defaults) is the full block."""
    code = code or {}
    if injected is not None and not injected.enabled:
        return Block(text="[MEMORY]\n[/MEMORY]", memories=[])
    hidden_types = frozenset(injected.hidden_types) if injected is not None else frozenset()
    hidden_sections = frozenset(injected.hidden_sections) if injected is not None else frozenset()
    active = [
        m for m in memories if m.superseded_by is None and code.get(m.id) != "gone" and m.type not in hidden_types
    ]
    candidates: dict[str, list[Memory]] = {}
    consolidated = sorted((m for m in active if m.type == CONSOLIDATED), key=lambda m: m.updated_at, reverse=True)
    if consolidated:
        candidates[CONSOLIDATED_TITLE] = consolidated[:1]
    limits = {RELEVANT: RELEVANT_LIMIT, "Last Session": LAST_SESSION_LIMIT, CONSOLIDATED_TITLE: 1}
    for title, types in SECTIONS:
        members = [m for m in active if m.type in types]
        if title == "User Preferences":
            members = [m for m in members if m.scope == "user"] or members
        members.sort(key=lambda m: m.updated_at, reverse=True)
        candidates[title] = members[: limits.get(title, SECTION_LIMIT) * CANDIDATE_FACTOR]
    hits = [hit.memory for hit in relevant if hit.memory.superseded_by is None and code.get(hit.memory.id) != "gone"]
    candidates[RELEVANT] = [m for m in hits if m.type not in hidden_types][: RELEVANT_LIMIT * CANDIDATE_FACTOR]
    for title in hidden_sections:
        candidates.pop(title, None)
    dropped = repeated([m for members in candidates.values() for m in members])
    chosen: dict[str, list[Memory]] = {}
    claimed: set[str] = set()
    for title in CLAIM_ORDER:
        kept = [m for m in candidates.get(title, []) if m.id not in dropped and m.id not in claimed]
        chosen[title] = kept[: limits.get(title, SECTION_LIMIT)]
        claimed.update(m.id for m in chosen[title])
    order = [CONSOLIDATED_TITLE, *(title for title, _ in SECTIONS), RELEVANT]
    sections = [
        _Section(
            title,
            [_entry(m, tagged=title == RELEVANT, changed=code.get(m.id) in STALE_SHOWN) for m in chosen[title]],
            list(chosen[title]),
        )
        for title in order
        if chosen.get(title)
    ]
    if max_tokens is not None:
        _fit(sections, max_tokens)
    lines = ["[MEMORY]"]
    shown: list[Memory] = []
    for section in sections:
        if section.entries:
            lines.append(f"## {section.title}")
            lines.extend(section.entries)
            shown.extend(section.memories)
    lines.append("[/MEMORY]")
    return Block(text="\n".join(lines), memories=shown)


def _render_size(sections: Sequence[_Section]) -> int:
    size = len("[MEMORY]\n[/MEMORY]")
    for section in sections:
        if section.entries:
            size += len(f"\n## {section.title}") + sum(len(entry) + 1 for entry in section.entries)
    return size


def _fit(sections: list[_Section], max_tokens: int) -> None:
    """Drop entries by ``TRIM_ORDER`` (each section's last, i.e. oldest or least relevant, first) until
    the block fits; a single entry still too long for the budget is cut short with an ellipsis."""
    budget = max_tokens * CHARS_PER_TOKEN
    rank = {title: i for i, title in enumerate(TRIM_ORDER)}
    by_priority = sorted(sections, key=lambda s: rank.get(s.title, -1))
    for section in by_priority:
        while section.entries and _render_size(sections) > budget:
            if len(section.entries) == 1 and all(not s.entries for s in sections if s is not section):
                over = _render_size(sections) - budget
                keep = max(0, len(section.entries[0]) - over - 1)
                section.entries[0] = section.entries[0][:keep] + "…"
                return
            section.entries.pop()
            section.memories.pop()


def render_block(memories: Sequence[Memory], relevant: Sequence[Relevant] = ()) -> str:
    return build_block(memories, relevant).text


async def block_memories(
    providers: Providers, project_key: str, user_key: str = "", query: str = "", *, max_tokens: int | None = None
) -> Block:
    return await block_scopes(providers, scopes(project_key, user_key), query, max_tokens=max_tokens)


async def block_scopes(
    providers: Providers,
    keys: Sequence[str],
    query: str = "",
    *,
    max_tokens: int | None = None,
    speaker: str | None = None,
    settings: ContextSettings | None = None,
) -> Block:
    """:func:`block_memories` over exactly these scope keys (``speaker`` as :func:`search_scopes`);
    no scope gives an empty block. ``settings``: these injected-context settings instead of the saved
    ones (the console's preview of choices not saved yet)."""
    keys = [key for key in keys if key]
    chosen = settings if settings is not None else injected_settings.for_keys(providers.settings.data_dir, keys)
    budget = max_tokens if max_tokens is not None else providers.settings.block_max_tokens
    budget = chosen.max_tokens if chosen is not None and chosen.max_tokens else budget
    if not keys or (chosen is not None and not chosen.enabled):
        return build_block([], max_tokens=budget, injected=chosen)
    types = [CONSOLIDATED, *(t for _, section in SECTIONS for t in section)]
    memories = await providers.store.list(keys, types=types, speaker=speaker)
    relevant = await search_scopes(providers, query, keys, limit=RELEVANT_LIMIT, speaker=speaker) if query else []
    code = staleness.statuses([*memories, *(hit.memory for hit in relevant)], staleness.checker_for(providers.settings))
    return build_block(memories, relevant, max_tokens=budget, code=code, injected=chosen)


async def block(providers: Providers, project_key: str, user_key: str = "", query: str = "") -> str:
    return (await block_memories(providers, project_key, user_key, query)).text
