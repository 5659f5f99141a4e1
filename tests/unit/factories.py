"""Memories for unit tests: every field filled, only what a test cares about given."""

from __future__ import annotations

from datetime import UTC, datetime

from memstream.schemas import Memory

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def memory(id: str, type: str = "architecture", text: str = "", **fields: object) -> Memory:
    values: dict[str, object] = {
        "id": id,
        "text": text or f"text of {id}",
        "type": type,
        "scope": "project",
        "scope_key": "p_test",
        "created_at": T0,
        "updated_at": T0,
        "content_hash": f"h-{id}",
        "embedding_model": "test",
    }
    values.update(fields)
    return Memory(**values)  # type: ignore[arg-type]
