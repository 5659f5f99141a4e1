"""A forgotten exchange is never rewritten when its session goes on (issue 37.4)."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

import pytest

from memstream.agents.store import apply
from memstream.rules.forgotten import continued_id, said_since, taken_out
from memstream.schemas import CreateMemory, Memory
from memstream.store.base import MemoryStore
from tests.unit.factories import memory

FORGOTTEN = "[user] my card number is 4111 [assistant] noted, I will not repeat it."
GROWN = FORGOTTEN + " [user] what does make ship do? [assistant] it builds and deploys."


def test_only_the_turns_said_since_are_kept() -> None:
    assert said_since(FORGOTTEN, GROWN) == "[user] what does make ship do? [assistant] it builds and deploys."
    assert said_since(FORGOTTEN, FORGOTTEN) == ""
    assert said_since(FORGOTTEN, "  " + FORGOTTEN.replace(" [assistant]", "\n[assistant]")) == ""


def test_forgotten_and_wrong_are_taken_out_a_newer_fact_is_not() -> None:
    assert taken_out("forgotten:op-1") and taken_out("wrong:op-2")
    assert not taken_out(None) and not taken_out("3f0c1d2e-newer-memory")


class Store:
    """The store calls apply makes, over a dict."""

    def __init__(self) -> None:
        self.memories: dict[str, Memory] = {}

    async def get(self, memory_id: str) -> Memory | None:
        return self.memories.get(memory_id)

    async def upsert(self, memory: Memory, vector: list[float]) -> None:
        self.memories[memory.id] = memory


async def applied(store: Store, op: CreateMemory) -> tuple[str, Memory] | None:
    return await apply(cast(MemoryStore, store), op)


@pytest.mark.asyncio
async def test_the_next_reply_after_a_forget_is_a_new_memory_and_the_forgotten_one_is_untouched() -> None:
    store = Store()
    forgotten = memory("x", "conversation", FORGOTTEN, superseded_by="forgotten:op-1")
    store.memories["x"] = forgotten
    grown = memory("x", "conversation", GROWN, updated_at=forgotten.updated_at + timedelta(minutes=5))
    op = CreateMemory(op_id="op-2", scope_key="p_test", cause="raw", memory=grown, vector=[0.1])

    result = await applied(store, op)
    assert result is not None
    change, made = result

    assert store.memories["x"] == forgotten  # never rewritten, still forgotten
    assert (change, made.id) == ("created", continued_id("x", "forgotten:op-1"))
    assert made.text == "[user] what does make ship do? [assistant] it builds and deploys."
    assert made.superseded_by is None and "4111" not in made.text
    # The next reply refreshes that memory; a redelivery of the forgotten text alone changes nothing.
    longer = memory("x", "conversation", GROWN + " [user] and rollback?", updated_at=grown.updated_at)
    result = await applied(
        store, CreateMemory(op_id="op-3", scope_key="p_test", cause="raw", memory=longer, vector=[0.1])
    )
    assert result is not None
    change, again = result
    assert (change, again.id) == ("refreshed", made.id) and again.text.endswith("[user] and rollback?")
    # The forgotten text alone again (a replay; a restore would be newer) takes the usual path: kept forgotten.
    replayed = memory("x", "conversation", FORGOTTEN, updated_at=forgotten.updated_at)
    await applied(store, CreateMemory(op_id="op-4", scope_key="p_test", cause="raw", memory=replayed, vector=[0.1]))
    assert store.memories["x"] == forgotten
