"""Issue 41.2 with several workers: a user's forget reaches the state of every worker, not only the one
whose partition holds the user's key.

A user's forget travels the pipeline keyed by the *user* (``u_…``), so one worker's decide and store
stages take it; the user's exchanges in a project are keyed by the *project* (``p_…``), on a partition
another worker may own. Each worker follows the ``forgotten`` ledger on its own
(``memstream.kafka.ledger``), as ``memstream up`` does. Here two workers (two Faust apps, each with its
own tables and ledger, one shared store as in production) stand for that: worker A owns the forgotten
user's partition and takes the forget; worker B owns the team project's, and has only its ledger.

- The decide stage's recent memories on B held the user's exchanges in the team project after the forget,
  and fed them to the next decision (dedup and candidates) until they aged out.
- The store's late-write guard on B (a create of the user's exchange dated before the forget, arriving
  after it: a parked retry, a redelivery) looked the user up in B's own table, which never saw the
  forget: the exchange was stored again, after the forget had deleted it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import faust
import msgspec
import pytest

from memstream.agents import decide as decide_agent
from memstream.agents import store as store_agent
from memstream.agents.base import DeadLetters
from memstream.identity import derived_id, exchange_memory_id, project_key, user_key
from memstream.kafka.ledger import ledger_of
from memstream.ports import Providers
from memstream.schemas import CreateMemory, DedupState, EmbeddedFact, Fact, ForgetScope, Memory
from memstream.topics.binding import bind_topics
from tests.e2e.conftest import eventually

pytestmark = pytest.mark.asyncio

TEAM = "/repos/team"
TEAM_KEY = project_key(TEAM)
ALICE, BOB = user_key("alice@example.com"), user_key("bob@example.com")
SAID = datetime(2026, 11, 2, 9, tzinfo=UTC)
FORGOTTEN_AT = SAID + timedelta(hours=1)


@dataclass
class Worker:
    app: faust.App
    decide: Any
    store: Any


def worker(name: str, providers: Providers) -> Worker:
    app = faust.App(f"forget-workers-{name}", store="memory://", autodiscover=False)
    topics = bind_topics(app, "t", providers.settings.partitions)
    for name in ("memory_ops", "history", "memory_updated"):
        getattr(topics, name).send = delivered_at_once
    sink = DeadLetters(topics.dead_letters)
    return Worker(
        app,
        decide_agent.register(app, topics, providers, sink),
        store_agent.register(app, topics, providers, sink),
    )


async def delivered_at_once(**_: Any) -> asyncio.Future[None]:
    """What a worker's producer answers once the broker has a record (no broker here)."""
    done = asyncio.get_running_loop().create_future()
    done.set_result(None)
    return done


def the_forget() -> ForgetScope:
    return ForgetScope(
        op_id=derived_id(ALICE, "forget"), scope_key=ALICE, cause="forget", scope="user", forgotten_at=FORGOTTEN_AT
    )


async def exchange(providers: Providers, who: str, words: str, n: int, *, at: datetime = SAID) -> EmbeddedFact:
    text = f"[user] {words} [assistant] noted"
    [vector] = await providers.embedder.embed_documents([text])
    fact = Fact(
        fact_id=f"{who}-{n}",
        text=text,
        type="conversation",
        scope="project",
        scope_key=TEAM_KEY,
        project=TEAM,
        session_id=f"{who}-session",
        exchange_id=f"{who}-exchange-{n}",
        speaker=who,
        origin=f"snapshot-{who}-{n}",
        ts=at + timedelta(minutes=n),
    )
    return EmbeddedFact(fact=fact, vector=vector, embedding_model="test")


def recent_texts(w: Worker) -> str:
    state: DedupState | None = cast(Any, w.app.tables["decide-recent"]).get(TEAM_KEY)
    return " ".join(m.text for m in state.recent) if state else ""


async def test_a_forget_taken_by_another_worker_empties_this_workers_recent_memories_of_the_user(
    providers: Providers,
) -> None:
    a, b = worker("a", providers), worker("b", providers)
    async with b.decide.test_context() as on_b:
        await on_b.put(await exchange(providers, ALICE, "the zebra word is ALICEQX", 1))
        await on_b.put(await exchange(providers, BOB, "deploys go out on Fridays at noon BOBQX", 2))

        async def both() -> bool:  # the test sees them before
            return "ALICEQX" in recent_texts(b) and "BOBQX" in recent_texts(b)

        await eventually(both, what="both exchanges in B's recent memories")

    async with a.decide.test_context() as on_a:
        await on_a.put(the_forget())

        async def taken() -> bool:
            state: DedupState | None = cast(Any, a.app.tables["decide-recent"]).get(ALICE)
            return state is not None and state.forgotten_at == FORGOTTEN_AT

        await eventually(taken, what="worker A to take the forget")
    ledger_of(b.app).record(the_forget())  # as B's follower of the ledger reads it

    async with b.decide.test_context() as on_b:
        # A late fact of Alice's said before the forget, then a later one of the project.
        await on_b.put(await exchange(providers, ALICE, "the zebra word is ALICELATEQX", 3))
        await on_b.put(await exchange(providers, BOB, "the staging colour is blue BOBBLUEQX", 4))

        async def decided() -> bool:
            return "BOBBLUEQX" in recent_texts(b)

        await eventually(decided, what="B to decide on the project's next fact")
    kept = recent_texts(b)
    assert "ALICE" not in kept, kept
    assert "BOBQX" in kept


def late_create(memory_id: str) -> CreateMemory:
    memory = Memory(
        id=memory_id,
        text="[user] the zebra word is ALICEQX [assistant] noted",
        type="conversation",
        scope="project",
        scope_key=TEAM_KEY,
        project=TEAM,
        created_at=SAID,
        updated_at=SAID,
        content_hash="h-alice",
        embedding_model="test",
        speaker=ALICE,
    )
    return CreateMemory(op_id="late-create", scope_key=TEAM_KEY, cause="extracted", memory=memory, vector=[0.1] * 384)


async def test_a_late_write_of_a_forgotten_users_exchange_is_dropped_by_every_worker(providers: Providers) -> None:
    a, b = worker("a", providers), worker("b", providers)
    memory_id = exchange_memory_id(TEAM_KEY, "alice-exchange-1")
    async with a.store.test_context() as on_a:
        await on_a.put(the_forget())

        async def taken() -> bool:
            return cast(Any, a.app.tables["store-forgotten"]).get(ALICE) is not None

        await eventually(taken, what="worker A to take the forget")
    ledger_of(b.app).record(the_forget())  # as B's follower of the ledger reads it
    later_id = exchange_memory_id(TEAM_KEY, "alice-exchange-2")
    later = late_create(later_id)
    later = msgspec.structs.replace(
        later, memory=msgspec.structs.replace(later.memory, updated_at=FORGOTTEN_AT + timedelta(minutes=1))
    )
    async with b.store.test_context() as on_b:
        # Alice's exchange said before the forget arrives late on the team project's partition; then a
        # new exchange of hers, said after the forget (a new start, kept), on the same partition.
        await on_b.put(late_create(memory_id))
        await on_b.put(later)

        async def handled() -> bool:
            return await providers.store.get(later_id) is not None

        await eventually(handled, what="B to store the exchange said after the forget")
    assert await providers.store.get(memory_id) is None
