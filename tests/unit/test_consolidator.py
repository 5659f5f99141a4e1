"""One Phase 2 run (agents.consolidate.Consolidator) over plain-dict tables: removed
evidence stays on disk while the model consolidates, and is pruned after success."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from memstream.agents.consolidate import GLOBAL, Consolidator, consolidated_memory_id
from memstream.llm.base import Completion, JsonSchema
from memstream.schemas import ConsolidationRequest, CreateMemory, MemoryUsage, Phase2State, RolloutOutput
from memstream.settings import Settings
from memstream.store import artifacts

pytestmark = pytest.mark.asyncio

NOW = datetime.now(UTC)


@dataclass
class Model:
    """Answers every consolidation and, while it answers, looks at the workspace."""

    workspace: Path
    seen: list[list[str]] = field(default_factory=list)
    model: str = "fake-model"

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        summaries = self.workspace / artifacts.SUMMARIES
        self.seen.append(sorted(p.name.split("-")[0] for p in summaries.iterdir()))
        return Completion(text=json.dumps({"summary": "- consolidated"}), provider="fake", model=self.model)


class Embedder:
    model = "fake-embedder"

    async def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]


class Store:
    async def get(self, memory_id: str) -> None:
        return None


class Sent:
    def __init__(self) -> None:
        self.values: list[Any] = []

    async def send(self, *, key: bytes, value: Any) -> None:
        self.values.append(value)


def output(rollout: str, hours_ago: float) -> RolloutOutput:
    at = NOW - timedelta(hours=hours_ago)
    return RolloutOutput(
        rollout_id=rollout,
        scope_key="p_1",
        project="/shop",
        slug=rollout,
        raw_memory=f"notes {rollout}",
        rollout_summary=f"summary {rollout}",
        source_updated_at=at,
        generated_at=at,
    )


async def test_removed_evidence_is_kept_during_the_run_and_pruned_after(tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path, consolidation_top_n=2)
    workspace = artifacts.project_dir(tmp_path, "p_1")
    model = Model(workspace)
    memory_ops = Sent()
    providers = SimpleNamespace(settings=settings, llm=model, embedder=Embedder(), store=Store())
    inputs: dict[str, Any] = {}
    states: dict[str, Any] = {}
    consolidator = Consolidator(providers, SimpleNamespace(memory_ops=memory_ops), inputs, states)  # type: ignore[arg-type]
    request = ConsolidationRequest(reason="phase1", ts=NOW)

    consolidator.record_output(output("old", 3), offset=0)
    consolidator.record_output(output("mid", 2), offset=1)
    assert await consolidator.run(request) == "succeeded"
    assert model.seen == [["mid", "old"]]
    first: Phase2State = states[GLOBAL]
    assert first.watermark == 1 and {s.rollout_id for s in first.selected} == {"old", "mid"}

    # A newer rollout pushes the oldest out of the top 2: removed, but on disk while the
    # model forgets it; pruned once the run succeeded.
    consolidator.record_output(output("new", 1), offset=2)
    assert await consolidator.run(request) == "succeeded"
    assert model.seen[-1] == ["mid", "new", "old"]
    assert sorted(p.name.split("-")[0] for p in (workspace / artifacts.SUMMARIES).iterdir()) == ["mid", "new"]
    assert states[GLOBAL].watermark == 2

    # Nothing new: clean, no model call; a redelivered output changes nothing.
    consolidator.record_output(output("new", 1), offset=2)
    assert await consolidator.run(request) == "clean"
    assert len(model.seen) == 2

    # Each run stored the project's summary under the one id.
    ids = {op.memory.id for op in memory_ops.values if isinstance(op, CreateMemory)}
    assert ids == {consolidated_memory_id("p_1")}


async def test_usage_ranks_a_rollout_back_into_the_selection(tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path, consolidation_top_n=1)
    providers = SimpleNamespace(settings=settings, llm=None, embedder=Embedder(), store=Store())
    inputs: dict[str, Any] = {}
    states: dict[str, Any] = {}
    consolidator = Consolidator(providers, SimpleNamespace(memory_ops=Sent()), inputs, states)  # type: ignore[arg-type]
    consolidator.record_output(output("used", 5), offset=0)
    consolidator.record_output(output("fresh", 1), offset=1)
    consolidator.record_usage(MemoryUsage(rollout_ids=["used", "used"], ts=NOW))
    assert inputs["used"].usage_count == 1  # one search, however many of its memories it returned
    assert await consolidator.run(ConsolidationRequest(reason="schedule", ts=NOW)) == "succeeded"
    assert [s.rollout_id for s in states[GLOBAL].selected] == ["used"]
