"""Issue 41.2, LLM mode: ``forget --user`` reaches the facts a model drew from the user's turns. Each
fact's sources name whose turns they are (``Provenance.speaker``); a fact only the user's turns support
is deleted, one that another member's turns also support is kept with their sources only, and without
its excerpt (which may be the user's words). Through extract's fact, the decide stage and the store
agent's apply, on the embedded store; then the store agent's forget of the user."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from memstream.agents.decide import Decider
from memstream.agents.extract import _fact
from memstream.agents.store import apply, forget
from memstream.identity import project_key, user_key
from memstream.ports import Providers
from memstream.rules.extraction import ExtractedFact
from memstream.schemas import EmbeddedFact, Memory, Provenance, Snapshot

pytestmark = pytest.mark.asyncio

TEAM = "/repos/team"
ALICE, BOB = user_key("alice@example.com"), user_key("bob@example.com")
T = datetime(2026, 11, 2, 9, tzinfo=UTC)


async def extract(providers: Providers, who: str, said: str, fact: str, n: int) -> None:
    """One LLM-mode project fact drawn from ``who``'s exchange, as the pipeline stores it."""
    snapshot = Snapshot(
        snapshot_id=f"{who}-{n}",
        session_id=f"{who}-session-{n}",
        project=TEAM,
        project_key=project_key(TEAM),
        user_key=who,
        mode="normal",
        text=said,
        exchange=said,
        turn_index=1,
        ts=T + timedelta(minutes=n),
    )
    extracted = ExtractedFact(text=fact, type="project-config", scope="project", confidence=0.9)
    made = _fact(snapshot, extracted, ("project", project_key(TEAM)), 0, [])
    [vector] = await providers.embedder.embed_documents([made.text])
    outcome = await Decider(providers).decide(EmbeddedFact(fact=made, vector=vector, embedding_model="m"), [])
    for op in outcome.ops:
        await apply(providers.store, op)


async def stored(providers: Providers, text: str) -> Memory | None:
    found = [m for m in await providers.store.list(None, include_superseded=True) if m.text == text]
    return found[0] if found else None


async def test_a_users_forget_deletes_facts_only_they_support_and_unsources_shared_ones(providers: Providers) -> None:
    only_alice, both, only_bob = (
        "The API listens on port 8080",
        "The deploy key rotates monthly",
        "The cache is Redis 7",
    )
    await extract(providers, ALICE, "[user] alice: our api is on 8080 ALICEWORDS", only_alice, 1)
    await extract(providers, ALICE, "[user] alice: the deploy key rotates monthly ALICEWORDS", both, 2)
    await extract(providers, BOB, "[user] bob: yes, the key rotates monthly", both, 3)
    await extract(providers, BOB, "[user] bob: the cache is redis 7", only_bob, 4)
    shared = await stored(providers, both)
    assert shared is not None and {s.speaker for s in shared.sources} == {ALICE, BOB}, shared
    alone = await stored(providers, only_alice)
    assert alone is not None and [s.speaker for s in alone.sources] == [ALICE]
    assert alone.sources[0] == Provenance(source_type="publish", session_id=f"{ALICE}-session-1", speaker=ALICE)

    gone = await forget(providers.store, None, ALICE, spoken=True)

    assert [m.text for m in gone] == [only_alice]
    assert await stored(providers, only_alice) is None
    kept = await stored(providers, both)
    assert kept is not None and [s.speaker for s in kept.sources] == [BOB]
    assert kept.source_chunk == "" and kept.id == shared.id
    bobs = await stored(providers, only_bob)
    assert bobs is not None and bobs.source_chunk == "[user] bob: the cache is redis 7"
    everything = [m.source_chunk + m.text for m in await providers.store.list(None, include_superseded=True)]
    assert not [text for text in everything if "ALICEWORDS" in text]


async def test_a_fact_from_a_turn_with_no_known_user_is_left_alone(providers: Providers) -> None:
    await extract(providers, "", "[user] the queue is kafka", "The queue is Kafka", 1)
    before = await stored(providers, "The queue is Kafka")
    assert before is not None and all(not s.speaker for s in before.sources)
    assert await forget(providers.store, None, ALICE, spoken=True) == []
    assert await stored(providers, "The queue is Kafka") == before


async def test_old_provenance_bytes_decode_without_a_speaker() -> None:
    old = msgspec.json.encode({"source_type": "claude", "file": "/s.jsonl", "line": 3})
    assert msgspec.json.decode(old, type=Provenance) == Provenance(source_type="claude", file="/s.jsonl", line=3)
    assert msgspec.json.decode(old, type=Provenance).speaker == ""
