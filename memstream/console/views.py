"""The reads behind the console's views, as functions of the providers and the caller's scope keys.

The routes (``memstream.console.app``) check who asks and which scopes they may read, then call
these and render the result with ``memstream.console.pages``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from memstream.console import explain, reads, timeline
from memstream.console.cached import Cached, PerGeneration
from memstream.console.pages import Row
from memstream.recall import injected as injected_settings
from memstream.schemas import Memory
from memstream.schemas.injected import ContextSettings
from memstream.store.reader import reader_identity

if TYPE_CHECKING:
    from memstream.ports import Providers

#: How long the list of projects (paths and active counts) and the stored source values are reused.
PROJECTS_TTL_S = 30.0
#: Memories read for the Source filter's values, newest first.
SOURCE_READ = 1_000
#: Memories the sessions list reads, newest first: it lists the sessions they came from.
SESSION_READ = 1_000
#: Sessions the sessions list shows (a page of 1,000 rows took 400 ms to render).
SESSION_ROWS = 100
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
    """The newest SESSION_ROWS sessions of the newest SESSION_READ memories, kept until the store is written."""

    async def load() -> list[timeline.SessionRow]:
        listed = await providers.store.list(keys, include_superseded=True, limit=SESSION_READ)
        return timeline.session_rows(listed, SESSION_ROWS)

    return await _sessions.get(providers.store, tuple(keys), load)


_sessions = PerGeneration()
#: The block a page previews depends on the code its memories cite too (a changed file): reread after this.
BLOCK_PREVIEW_S = 10.0
_previews = PerGeneration(BLOCK_PREVIEW_S)


async def block_preview(
    providers: Providers, keys: Sequence[str], query: str = "", *, settings: ContextSettings | None = None
) -> Any:
    """``recall.block_scopes`` for the block page, kept while the store and the project's settings stay.
    ``settings``: unsaved choices to preview instead of the saved settings (nothing is written)."""
    from memstream.recall import search as recall

    injected = settings if settings is not None else injected_settings.for_keys(providers.settings.data_dir, keys)
    key = (tuple(keys), query, msgspec.json.encode(injected))
    return await _previews.get(
        providers.store, key, lambda: recall.block_scopes(providers, keys, query, settings=settings)
    )


async def session_timeline(providers: Providers, keys: Sequence[str], session_id: str) -> timeline.Timeline | None:
    made = await providers.store.list(keys, include_superseded=True, limit=SESSION_READ, sessions=[session_id[:200]])
    return timeline.timeline(session_id, made) if made else None


#: How long a project's next block is reused for the verdicts of its memories' pages (a verdict may lag
#: a change by this much; the [MEMORY] block page itself is always built afresh).
BLOCK_TTL_S = 10.0
_blocks: dict[tuple[tuple[int, str], tuple[str, ...], bytes], tuple[float, Any, list[Memory]]] = {}


async def block_verdict(providers: Providers, memory: Memory, keys: Sequence[str]) -> str:
    """ "in the next block / not, and why" for a memory, over the block its project's next session gets."""
    from memstream.recall import search as recall

    if not keys:
        return ""
    injected = injected_settings.for_keys(providers.settings.data_dir, keys)
    budget = injected.max_tokens if injected is not None and injected.max_tokens else 0
    budget = budget or providers.settings.block_max_tokens
    # one store per app (a test's, a server's); a change of the settings is a new block at once
    cache_key = (reader_identity(providers.store), tuple(keys), msgspec.json.encode(injected))
    held = _blocks.get(cache_key)
    if held is None or time.monotonic() - held[0] > BLOCK_TTL_S:
        types = [recall.CONSOLIDATED, *(t for _, section in recall.SECTIONS for t in section)]
        listed = await providers.store.list(keys, types=types)
        held = (time.monotonic(), recall.build_block(listed, max_tokens=budget, injected=injected), listed)
        if len(_blocks) > 256:
            _blocks.clear()
        _blocks[cache_key] = held
    _, block, listed = held
    return str(explain.verdict(memory, block, listed, budget, injected))


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


# -- stats ---------------------------------------------------------------------------------------

#: Memories the stats page reads, newest first, for what no index counts (days, CLIs).
STATS_READ = 2_000


@dataclass
class Stats:
    #: "path (active memories)" per project.
    by_project: list[str]
    by_type: list[tuple[str, int]]
    #: (day, memories made that day) among the newest STATS_READ, newest day first.
    by_day: list[tuple[str, int]]
    by_cli: list[tuple[str, int]]
    sampled: int
    #: (answer kind, answers, tokens) handed to agents by this process since it started.
    injected: list[tuple[str, int, int]]
    storage_bytes: int | None


_stats: dict[tuple[int, tuple[str, ...]], tuple[float, Stats]] = {}


async def stats(providers: Providers, keys: Sequence[str], projects: Sequence[tuple[str, str]]) -> Stats:
    """The figures of the Stats page, reused for PROJECTS_TTL_S per set of scopes."""
    cache_key = (id(providers.store), tuple(keys))
    held = _stats.get(cache_key)
    if held is not None and time.monotonic() - held[0] < PROJECTS_TTL_S:
        return held[1]
    shown = await _read_stats(providers, keys, projects)
    if len(_stats) > 256:
        _stats.clear()
    _stats[cache_key] = (time.monotonic(), shown)
    return shown


async def _read_stats(providers: Providers, keys: Sequence[str], projects: Sequence[tuple[str, str]]) -> Stats:
    from collections import Counter

    from memstream.console.pages import TYPES

    store = providers.store
    by_type = [(t, await reads.count(store, keys, types=[t])) for t in TYPES] if keys else []
    listed = await store.list(keys, limit=STATS_READ) if keys else []
    days = Counter(m.created_at.date().isoformat() for m in listed)
    clis = Counter((m.sources[0].source_type if m.sources else "") or "not recorded" for m in listed)
    return Stats(
        by_project=[label for _, label in projects],
        by_type=[(t, n) for t, n in by_type if n],
        by_day=sorted(days.items(), reverse=True),
        by_cli=clis.most_common(),
        sampled=len(listed),
        injected=injected_tokens(),
        storage_bytes=storage_used(providers.settings.data_dir),
    )


def injected_tokens() -> list[tuple[str, int, int]]:
    """Answers and tokens handed to agents (``memstream_injected_tokens``), per answer kind, this process."""
    from memstream.telemetry import metrics

    counts: dict[str, list[float]] = {}
    for family in metrics.INJECTED_TOKENS.collect():
        for sample in family.samples:
            kind = sample.labels.get("answer", "") or "?"
            if sample.name.endswith("_count"):
                counts.setdefault(kind, [0, 0])[0] = sample.value
            elif sample.name.endswith("_sum"):
                counts.setdefault(kind, [0, 0])[1] = sample.value
    return [(k, int(n), int(t)) for k, (n, t) in sorted(counts.items())]


_storage: dict[str, tuple[float, int]] = {}


def storage_used(data_dir: Any) -> int | None:
    """Bytes under the data dir (the store, the history, the broker's log), reused for PROJECTS_TTL_S."""
    import os
    from pathlib import Path

    root = Path(data_dir)
    held = _storage.get(str(root))
    if held is not None and time.monotonic() - held[0] < PROJECTS_TTL_S:
        return held[1]
    if not root.exists():
        return None
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                total += (Path(folder) / name).stat().st_size
            except OSError:  # a file removed while walking
                continue
    _storage[str(root)] = (time.monotonic(), total)
    return total
