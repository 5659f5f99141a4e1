"""Issue 18, fewer LLM calls: a decision that weighed a fact's neighbours stands for the extraction spec's
contradiction check on them; anything it did not see, or did not answer, keeps the check."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from memstream.agents.decide import Decider
from memstream.embed.base import DistanceProfile
from memstream.llm.base import Completion, JsonSchema
from memstream.ports import Providers
from memstream.rules import contradiction
from memstream.schemas import CreateMemory, EmbeddedFact, Fact, HybridHit, Memory, ScoredMemory
from memstream.settings import Settings
from tests.unit.factories import memory

NEAR = memory("m-jwt", text="Auth uses JWT tokens", scope_key="p_shop")
#: Within contradiction distance of the fact, but no hybrid candidate of the decision.
CLOSE = memory("m-cookie", text="Login sets an httpOnly cookie", scope_key="p_shop")
CONTRADICTION_DISTANCE = 0.125


class Store:
    """Only what the decision asks: no exact or near duplicate, one hybrid candidate, and one more
    memory within contradiction distance."""

    async def get(self, memory_id: str) -> Memory | None:
        return None

    async def search(self, *args: Any, max_distance: float | None = None, **kwargs: Any) -> list[ScoredMemory]:
        if max_distance == CONTRADICTION_DISTANCE:
            return [ScoredMemory(memory=NEAR, distance=0.09), ScoredMemory(memory=CLOSE, distance=0.11)]
        return []

    async def hybrid_search(self, *args: Any, **kwargs: Any) -> list[HybridHit]:
        return [HybridHit(memory=NEAR, score=0.93, vector_score=0.93, bm25_score=None)]


class Model:
    provider = "fake"
    model = "fake-model"

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.prompts: list[str] = []

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        self.prompts.append(prompt)
        return Completion(text=self.reply, provider=self.provider, model=self.model)

    async def close(self) -> None:
        pass


class Embedder:
    model = "test"
    dim = 3
    profile = DistanceProfile(dedup_general=0.05, dedup_structural=0.05, contradiction=CONTRADICTION_DISTANCE)


def _decider(reply: str, **settings: Any) -> Decider:
    providers = Providers(
        settings=Settings.from_env({}, **settings),
        embedder=Embedder(),  # type: ignore[arg-type]
        store=Store(),  # type: ignore[arg-type]
        llm=Model(reply),
        history=None,  # type: ignore[arg-type]
    )
    return Decider(providers)


def _fact(text: str = "Auth uses Redis sessions") -> EmbeddedFact:
    fact = Fact(
        fact_id="f-1",
        text=text,
        type="architecture",
        scope="project",
        scope_key="p_shop",
        ts=datetime(2026, 11, 1, tzinfo=UTC),
    )
    return EmbeddedFact(fact=fact, vector=[1.0, 0.0, 0.0], embedding_model="test")


def _created(ops: list[Any]) -> CreateMemory:
    [create] = [op for op in ops if isinstance(op, CreateMemory)]
    return create


async def test_an_add_decided_by_the_model_carries_the_candidates_it_weighed() -> None:
    reply = json.dumps({"action": "ADD", "targetId": "", "confidence": 0.9, "reason": "new information"})
    decider = _decider(reply)
    outcome = await decider.decide(_fact(), [])
    # The contradiction check's candidates were asked about in the same, single call.
    [prompt] = decider.providers.llm.prompts  # type: ignore[union-attr]
    assert NEAR.id in prompt and CLOSE.id in prompt
    assert _created(outcome.ops).weighed == [NEAR.id, CLOSE.id]


@pytest.mark.parametrize(
    "reply",
    [
        "not json at all",  # dropped: the model's answer is not a judgement
        json.dumps({"action": "UPDATE", "targetId": "m-jwt", "confidence": 0.9, "reason": "moved to Redis"}),
    ],
)
async def test_a_dropped_or_blocked_decision_leaves_the_contradiction_check_whole(reply: str) -> None:
    # Controlled mode (the default): an UPDATE is blocked and the fact added beside its target.
    outcome = await _decider(reply).decide(_fact(), [])
    assert _created(outcome.ops).weighed == []


async def test_raw_mode_weighs_nothing() -> None:
    decider = _decider("")
    decider.providers.llm = None
    outcome = await decider.decide(_fact(), [])
    assert _created(outcome.ops).weighed == []


def test_the_check_asks_only_about_candidates_the_decision_did_not_weigh() -> None:
    other = memory("m-session", text="Sessions expire after an hour", scope_key="p_shop")
    assert contradiction.unweighed([NEAR], [NEAR.id]) == []
    assert contradiction.unweighed([NEAR, other], [NEAR.id]) == [other]
    assert contradiction.unweighed([NEAR], []) == [NEAR]
