"""The vector-store interface every backend implements, and the contract its tests check.

One collection per embedding model (``memories__<model slug>``), so vectors of different
dimensions never mix. Payload indexes on ``scope_key``, ``type`` and ``status``
(``active`` / ``superseded``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from schemas import Memory, ScoredMemory


def collection_name(embedding_model: str) -> str:
    """The collection that holds the vectors of one embedding model."""
    return "memories__" + re.sub(r"[^a-z0-9]+", "-", embedding_model.lower()).strip("-")


class MemoryStore(Protocol):
    """Memories with their vectors, for one embedding model.

    Reads never return superseded memories unless asked; writes are idempotent by id.
    """

    embedding_model: str
    dim: int

    async def open(self) -> None:
        """Create the collection and payload indexes if they are missing (idempotent)."""

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
    ) -> Memory | None:
        """Refresh an existing memory's text and ``updated_at``; None if it does not exist."""

    async def supersede(self, memory_id: str, superseded_by: str) -> Memory | None:
        """Mark a memory superseded; it stays stored but leaves search. None if missing."""

    async def delete(self, memory_id: str) -> Memory | None:
        """Delete a memory; returns what was deleted, None if it did not exist."""

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
