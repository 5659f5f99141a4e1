"""The reads behind the console's views, as functions of the providers and the caller's scope keys.

The routes (``memstream.console.app``) check who asks and which scopes they may read, then call
these and render the result with ``memstream.console.pages``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memstream.console import explain, reads, timeline
from memstream.console.cached import Cached
from memstream.console.pages import Row
from memstream.schemas import Memory

if TYPE_CHECKING:
    from memstream.bootstrap import Providers

#: How long the list of projects (paths and active counts) and the stored source values are reused.
PROJECTS_TTL_S = 30.0
#: Memories read for the Source filter's values, newest first.
SOURCE_READ = 1_000
#: Memories the sessions list reads, newest first: it lists the sessions they came from.
SESSION_READ = 1_000
#: Search hits a memories page shows.
SEARCH_RESULTS = 50
#: Memories the Live view starts with.
LIVE_START = 20


@dataclass
class Listing:
    rows: list[Row]
    total: int | None = None
    next_cursor: str = ""
    problems: list[str] = field(default_factory=list)
    filtered: bool = False


def why_matched(hit: Any) -> str:
    """Why a search hit matched, from the scores the search kept: its meaning (vector), its words
    (BM25), its session (the other hits of its session vouched for it)."""
    parts = []
    if getattr(hit, "vector_score", None):
        parts.append("vector")
    if getattr(hit, "bm25_score", None):
        parts.append("words")
    if getattr(hit, "session_score", None) or getattr(hit, "session_boost", None):
        parts.append("session")
    return ", ".join(parts)


async def memories_listing(providers: Providers, keys: Sequence[str], params: Mapping[str, str]) -> Listing:
    """A memories page: a search's hits (best first, the score they were ranked by), or every memory
    newest first, a page at a time from ``params["after"]``, with the total."""
    from memstream.recall import search as recall

    filters = reads.Filters.parse(params)
    kind = params.get("type", "")
    include_all = bool(params.get("all"))
    query = params.get("q", "")[:4_000]
    if query:
        hits = await recall.search_scopes(providers, query, keys, limit=SEARCH_RESULTS)
        rows = [Row(h.memory, h.score, why_matched(h)) for h in hits if not kind or h.memory.type == kind]
        if include_all:
            words = query.lower().split()
            listed = await providers.store.list(
                keys, types=[kind] if kind else None, include_superseded=True, limit=500
            )
            rows += [Row(m, None) for m in listed if not m.active and all(w in m.text.lower() for w in words)]
        rows = [r for r in rows if filters.keep(r.memory)]
        return Listing(rows, None, "", filters.problems, filters.active)
    page = await reads.memories_page(
        providers.store,
        keys,
        types=[kind] if kind else None,
        include_superseded=include_all,
        keep=filters.keep,
        cursor=reads.Cursor.decode(params.get("after", "")),
    )
    cursor = page.next.encode() if page.next else ""
    return Listing([Row(m, None) for m in page.memories], page.total, cursor, filters.problems, filters.active)


class Projects:
    """The projects a caller may pick, by path, with their active memories; reused for PROJECTS_TTL_S."""

    def __init__(self, providers: Providers) -> None:
        self.providers = providers
        self.paths: dict[str, str] = {}
        self._active: dict[str, int] = {}
        self._at = -PROJECTS_TTL_S
        self._sources: dict[tuple[str, ...], tuple[float, list[str]]] = {}

    async def _refresh(self) -> None:
        store = self.providers.store
        keys = [k for k in await store.scopes() if k.startswith("p_")]
        active = {}
        for key in keys:
            active[key] = await store.count([key], include_superseded=False)
            if key not in self.paths:
                newest = await store.list([key], include_superseded=True, limit=1)
                if newest and newest[0].project:
                    self.paths[key] = newest[0].project
        self._active, self._at = active, time.monotonic()

    async def active(self) -> dict[str, int]:
        if time.monotonic() - self._at > PROJECTS_TTL_S:
            await self._refresh()
        return self._active

    async def choices(self, readable: Sequence[str]) -> list[tuple[str, str]]:
        """(key, "path (active memories)") of the projects among ``readable`` keys (or every one held)."""
        active = await self.active()
        shown = {k: active.get(k, 0) for k in readable if k.startswith("p_")}
        return reads.project_choices(shown, self.paths)

    def remember(self, memories: Sequence[Memory]) -> None:
        for m in memories:
            if m.project and m.scope_key.startswith("p_"):
                self.paths[m.scope_key] = m.project

    async def sources(self, keys: Sequence[str]) -> list[str]:
        """The source CLIs stored with the newest memories of these scopes."""
        key = tuple(sorted(keys))
        held = self._sources.get(key)
        if held is not None and time.monotonic() - held[0] < PROJECTS_TTL_S:
            return held[1]
        listed = await self.providers.store.list(list(keys), include_superseded=True, limit=SOURCE_READ)
        values = reads.source_values(listed)
        self._sources[key] = (time.monotonic(), values)
        return values


async def session_rows(providers: Providers, keys: Sequence[str]) -> list[timeline.SessionRow]:
    listed = await providers.store.list(keys, include_superseded=True, limit=SESSION_READ)
    return timeline.session_rows(listed)


async def session_timeline(providers: Providers, keys: Sequence[str], session_id: str) -> timeline.Timeline | None:
    made = await providers.store.list(keys, include_superseded=True, limit=SESSION_READ, sessions=[session_id[:200]])
    return timeline.timeline(session_id, made) if made else None


async def block_verdict(providers: Providers, memory: Memory, keys: Sequence[str]) -> str:
    """ "in the next block / not, and why" for a memory, over the block its project's next session gets."""
    from memstream.recall import search as recall

    if not keys:
        return ""
    budget = providers.settings.block_max_tokens
    types = [recall.CONSOLIDATED, *(t for _, section in recall.SECTIONS for t in section)]
    listed = await providers.store.list(keys, types=types)
    block = recall.build_block(listed, max_tokens=budget)
    return str(explain.verdict(memory, block, listed, budget))


async def newest(providers: Providers, keys: Sequence[str]) -> list[Memory]:
    return await providers.store.list(keys, limit=LIVE_START) if keys else []


class PipelineReads:
    """The Pipeline page's slow reads (the dead letters from the broker, the doctor's pass), cached."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.letters: Cached[list[Any] | None] = Cached(self._letters)
        self.doctor: Cached[dict[str, Any] | None] = Cached(self._doctor)

    async def _letters(self) -> list[Any] | None:
        if not self.ctx.kafka_bootstrap:
            return None
        from memstream.ops.redrive import dead_letters, redriven

        prefix = self.ctx.providers.settings.topic_prefix
        done = await redriven(self.ctx.kafka_bootstrap, prefix)
        return [x for x in await dead_letters(self.ctx.kafka_bootstrap, prefix) if x.id not in done]

    async def _doctor(self) -> dict[str, Any] | None:
        import msgspec

        if self.ctx.maintenance is None:
            return None
        report: dict[str, Any] = msgspec.to_builtins(await self.ctx.maintenance.tick(mode="observe"))
        return report
