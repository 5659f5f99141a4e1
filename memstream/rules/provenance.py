"""A memory's provenance follows its text (the capture spec): which sources a refreshed memory names."""

from __future__ import annotations

from memstream.schemas import Memory, Provenance


def sources_of(memory: Memory) -> list[Provenance]:
    """The memory's sources; one made from its ``session_id`` for a memory from before ``sources``."""
    if memory.sources:
        return list(memory.sources)
    return [Provenance(source_type="", session_id=memory.session_id)] if memory.session_id else []


def refreshed(existing: Memory, incoming: Memory) -> tuple[str, list[Provenance]]:
    """(session_id, sources) of ``existing`` once ``incoming`` refreshes it.

    The same text (content hash) stated again: every source holds it, so the memory lists each,
    first seen first, and keeps the session it was first seen in. A new text replacing the old:
    only the sources of the new text hold it, and the session is the new text's; the memory never
    keeps one session's text under another session's id.
    """
    if incoming.content_hash == existing.content_hash:
        merged = sources_of(existing)
        merged += [s for s in sources_of(incoming) if s not in merged]
        return existing.session_id or incoming.session_id, merged
    return incoming.session_id, sources_of(incoming)
