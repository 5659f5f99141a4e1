"""The read side: semantic search and the [MEMORY] block of seed 001 (plus Phase 2's summary).

Superseded memories never appear here; they stay in the store for audit only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Sequence

import msgspec

from memstream.bootstrap import Providers
from memstream.schemas import CONSOLIDATED, DOCUMENT_CHUNK, MEMORY_TYPES, Memory, ScoredMemory
from memstream.store.graph import GraphStore

log = logging.getLogger(__name__)

#: Seed 001: block sections and the memory types that fill them, in display order.
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
#: Phase 2's consolidated summary of the project (seed 004), shown first.
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
    documents: str = "include",
) -> list[ScoredMemory]:
    """The memories nearest the query, graph-boosted (seed 003) when the graph is enabled.

    ``documents``: ``include`` searches document chunks with the memories, ``exclude`` leaves
    them out, ``only`` searches nothing else.
    """
    keys = scopes(project_key, user_key)
    types = searched_types(documents)
    graph = providers.graph
    if graph is None:
        vector = await providers.embedder.embed_query(query)
        return await providers.store.search(vector, keys, limit=limit, types=types)
    settings = providers.settings
    # The graph walk needs only the query's words: it runs while the query is embedded.
    boost = asyncio.create_task(graph_boost_ids(graph, query, keys, settings.graph_boost_timeout_ms / 1000))
    try:
        vector = await providers.embedder.embed_query(query)
        candidates = await providers.store.search(vector, keys, limit=limit * BOOST_POOL, types=types)
    except BaseException:
        boost.cancel()
        raise
    return rerank(candidates, await boost, settings.graph_boost_weight, limit)


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


def rerank(
    candidates: Sequence[ScoredMemory], boosted: Collection[str], weight: float, limit: int
) -> list[ScoredMemory]:
    """The ``limit`` best candidates by similarity (1 - distance), plus ``weight`` for boosted ids.

    Ties keep the vector order. Each hit keeps its real distance; only the order changes.
    """

    def score(hit: ScoredMemory) -> float:
        return (1.0 - hit.distance) + (weight if hit.memory.id in boosted else 0.0)

    return sorted(candidates, key=score, reverse=True)[:limit]


class Block(msgspec.Struct, frozen=True):
    """A rendered [MEMORY] block and the memories it shows (their usage feeds Phase 2)."""

    text: str
    memories: list[Memory]


def build_block(memories: Sequence[Memory], relevant: Sequence[ScoredMemory] = ()) -> Block:
    """The [MEMORY] block: Phase 2's consolidated summary, then one section per seed 001 row
    that has memories, then the semantic results."""
    lines = ["[MEMORY]"]
    shown: list[Memory] = []
    active = [m for m in memories if m.superseded_by is None]
    consolidated = sorted((m for m in active if m.type == CONSOLIDATED), key=lambda m: m.updated_at, reverse=True)
    if consolidated:
        lines.append(f"## {CONSOLIDATED_TITLE}")
        lines.append(consolidated[0].text)
        shown.append(consolidated[0])
    for title, types in SECTIONS:
        members = [m for m in active if m.type in types]
        if title == "User Preferences":
            members = [m for m in members if m.scope == "user"] or members
        members.sort(key=lambda m: m.updated_at, reverse=True)
        if title == "Last Session":
            members = members[:LAST_SESSION_LIMIT]
        if members:
            lines.append(f"## {title}")
            lines.extend(f"- {m.text}" for m in members[:SECTION_LIMIT])
            shown.extend(members[:SECTION_LIMIT])
    hits = [hit for hit in relevant if hit.memory.superseded_by is None][:RELEVANT_LIMIT]
    if hits:
        lines.append(f"## {RELEVANT}")
        lines.extend(f"- [{hit.memory.type}] {hit.memory.text}" for hit in hits)
        shown.extend(hit.memory for hit in hits)
    lines.append("[/MEMORY]")
    return Block(text="\n".join(lines), memories=shown)


def render_block(memories: Sequence[Memory], relevant: Sequence[ScoredMemory] = ()) -> str:
    return build_block(memories, relevant).text


async def block_memories(providers: Providers, project_key: str, user_key: str = "", query: str = "") -> Block:
    types = [CONSOLIDATED, *(t for _, section in SECTIONS for t in section)]
    memories = await providers.store.list(scopes(project_key, user_key), types=types)
    relevant = await search(providers, query, project_key, user_key, limit=RELEVANT_LIMIT) if query else []
    return build_block(memories, relevant)


async def block(providers: Providers, project_key: str, user_key: str = "", query: str = "") -> str:
    return (await block_memories(providers, project_key, user_key, query)).text
