"""The memory store as one reader sees it: only their own conversations, and what the project shares.

The console reads memories through many views (listings, sessions, stats, the block); rather than thread
the reader through each, it hands them this store, which adds the reader to every read
(``store.base.memory_select``'s ``speaker``) and answers a get of another member's exchange as missing.
Writes are not the console's to make through it: everything else goes to the store underneath.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memstream.schemas import Memory, ScoredMemory
from memstream.schemas.memory import HybridHit
from memstream.store.base import Fusion, MemoryStore


class ReadAs:
    """``store``'s reads, keeping only ``speaker``'s conversations and the shared memories."""

    def __init__(self, store: MemoryStore, speaker: str):
        self._store = store
        self.speaker = speaker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _visible(self, memory: Memory | None) -> Memory | None:
        return memory if memory is not None and memory.speaker in ("", self.speaker) else None

    async def get(self, memory_id: str) -> Memory | None:
        return self._visible(await self._store.get(memory_id))

    async def search(self, vector: Sequence[float], scope_keys: Sequence[str], **kwargs: Any) -> list[ScoredMemory]:
        return await self._store.search(vector, scope_keys, **{**kwargs, "speaker": self.speaker})

    async def hybrid_search(
        self,
        text: str,
        vector: Sequence[float],
        scope_keys: Sequence[str],
        *,
        fusion: Fusion = "weighted",
        **kwargs: Any,
    ) -> list[HybridHit]:
        return await self._store.hybrid_search(
            text, vector, scope_keys, fusion=fusion, **{**kwargs, "speaker": self.speaker}
        )

    async def list(self, scope_keys: Sequence[str] | None, **kwargs: Any) -> list[Memory]:
        return await self._store.list(scope_keys, **{**kwargs, "speaker": self.speaker})

    async def count(self, scope_keys: Sequence[str] | None = None, **kwargs: Any) -> int:
        return await self._store.count(scope_keys, **{**kwargs, "speaker": self.speaker})
