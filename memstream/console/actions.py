"""What the console's buttons send: memory operations for the store agent, each with who and why.

Pure: the ops are built here and sent by the route through the API's ``send_memory_op``, so a
console action travels the same topic as every other change to memory, and the store agent
writes its audit record (``memstream.rules.audit``: the cause's prefix names the outcome, the
reason follows it, ``requested_by`` names the person).

- forget: the memory is superseded by ``forgotten:<op id>``; search and the block drop it, its
  history keeps it, retention purges the tombstone later.
- correct: a new memory with the corrected text (same type and scope) is created, then the old
  one is superseded by it, so the old one's timeline links to the new one.
- mark wrong: superseded by ``wrong:<op id>`` with the reason "marked wrong".
- pin / unpin: importance 1.0 / unset.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import msgspec

from memstream.identity import derived_id, memory_id, normalize_content
from memstream.rules.secrets import redact
from memstream.schemas import CreateMemory, Memory, Provenance, SetImportance, SupersedeMemory
from memstream.schemas.memory import FORGOTTEN_MARK, WRONG_MARK

#: A forgotten memory is superseded by this marker plus the op id (as the API's forget does).
FORGOTTEN = FORGOTTEN_MARK
#: A memory marked wrong is superseded by this marker plus the op id.
WRONG = WRONG_MARK
#: The importance a pin sets.
PINNED = 1.0
#: The longest reason kept, and the shortest and longest corrected text.
MAX_REASON_CHARS = 500
MIN_TEXT_CHARS = 10
MAX_TEXT_CHARS = 8_000


class ActionError(ValueError):
    """The request cannot become an operation; the message says why, for the page."""


def reason_of(text: str, *, required: bool = True) -> str:
    reason = " ".join(text.split())[:MAX_REASON_CHARS]
    if required and not reason:
        raise ActionError("give a reason: it is kept in the memory's history")
    return reason


def forget(memory: Memory, reason: str, *, by: str, now: datetime | None = None) -> SupersedeMemory:
    now = now or datetime.now(UTC)
    op_id = derived_id("forget", memory.id, now.isoformat())
    return SupersedeMemory(
        op_id=op_id,
        scope_key=memory.scope_key,
        memory_id=memory.id,
        superseded_by=f"{FORGOTTEN}{op_id}",
        cause=f"forget: {reason_of(reason)}",
        requested_by=by,
    )


def mark_wrong(memory: Memory, reason: str, *, by: str, now: datetime | None = None) -> SupersedeMemory:
    now = now or datetime.now(UTC)
    op_id = derived_id("wrong", memory.id, now.isoformat())
    given = reason_of(reason, required=False)
    return SupersedeMemory(
        op_id=op_id,
        scope_key=memory.scope_key,
        memory_id=memory.id,
        superseded_by=f"{WRONG}{op_id}",
        cause="marked wrong" + (f": {given}" if given else ""),
        requested_by=by,
    )


def pin(memory: Memory, *, pinned: bool, by: str, now: datetime | None = None) -> SetImportance:
    now = now or datetime.now(UTC)
    verb = "pin" if pinned else "unpin"
    return SetImportance(
        op_id=derived_id(verb, memory.id, now.isoformat()),
        scope_key=memory.scope_key,
        memory_id=memory.id,
        importance=PINNED if pinned else None,
        cause=verb,
        requested_by=by,
    )


def corrected_text(text: str) -> str:
    cleaned = redact(text.strip())
    if len(cleaned) < MIN_TEXT_CHARS:
        raise ActionError(f"the corrected text needs at least {MIN_TEXT_CHARS} characters")
    if len(cleaned) > MAX_TEXT_CHARS:
        raise ActionError(f"the corrected text is longer than {MAX_TEXT_CHARS} characters")
    return cleaned


def correct(
    memory: Memory, text: str, reason: str, vector: Sequence[float], *, by: str, embedding_model: str, now: datetime
) -> tuple[CreateMemory, SupersedeMemory]:
    """The new memory and the supersede of the old one by it, in the order the store must apply them."""
    cleaned = corrected_text(text)
    why = reason_of(reason)
    digest = normalize_content(cleaned).content_hash
    new_id = memory_id(memory.scope_key, digest)
    if new_id == memory.id:
        raise ActionError("the corrected text says the same as the memory: change it, or pin or forget it")
    new = Memory(
        id=new_id,
        text=cleaned,
        type=memory.type,
        scope=memory.scope,
        scope_key=memory.scope_key,
        created_at=now,
        updated_at=now,
        content_hash=digest,
        embedding_model=embedding_model,
        session_id=memory.session_id,
        project=memory.project,
        sources=[*memory.sources, Provenance(source_type="console", session_id=memory.session_id)],
        importance=memory.importance,
    )
    cause = f"correct: {why}"
    create = CreateMemory(
        op_id=derived_id("correct", memory.id, new_id, now.isoformat()),
        scope_key=memory.scope_key,
        memory=new,
        vector=list(vector),
        cause=cause,
        requested_by=by,
    )
    supersede = SupersedeMemory(
        op_id=derived_id("corrected", memory.id, new_id, now.isoformat()),
        scope_key=memory.scope_key,
        memory_id=memory.id,
        superseded_by=new_id,
        cause=cause,
        requested_by=by,
    )
    return create, supersede


def restorable(memory: Memory) -> bool:
    """Forgotten or marked wrong (not superseded by another memory, whose text replaced it)."""
    return (memory.superseded_by or "").startswith((FORGOTTEN, WRONG))


def restore(
    memory: Memory, reason: str, vector: Sequence[float], *, by: str, now: datetime | None = None
) -> CreateMemory:
    """Bring back a forgotten or wrong-marked memory: the same memory stated again, now, so the store
    agent makes it active again (a statement newer than its supersession is a creation, as for any fact
    said again) and audits it as ``created`` with the reason ``restore: …`` and who asked."""
    if not restorable(memory):
        raise ActionError("only a forgotten or wrong-marked memory can be restored")
    now = now or datetime.now(UTC)
    given = reason_of(reason, required=False)
    back = msgspec.structs.replace(memory, superseded_by=None, superseded_at=None, updated_at=now)
    return CreateMemory(
        op_id=derived_id("restore", memory.id, now.isoformat()),
        scope_key=memory.scope_key,
        memory=back,
        vector=list(vector),
        cause="restore" + (f": {given}" if given else ""),
        requested_by=by,
    )
