"""Forgetting a project reaches Phase 2: its inputs, selection and workspace go, another project's
stay, and the forgotten project's Phase 1 outputs of sessions before the forget are not taken in
again (they would rebuild its consolidated memory)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from memstream.agents.consolidate import GLOBAL, Consolidator
from memstream.intake.forget import forget_event
from memstream.schemas import ConsolidationRequest, CreateMemory
from memstream.settings import Settings
from memstream.store import artifacts
from tests.unit.test_consolidator import NOW, Embedder, Model, Sent, Store, output

pytestmark = pytest.mark.asyncio


def in_project(rollout: str, scope_key: str, hours_ago: float) -> Any:
    return msgspec.structs.replace(output(rollout, hours_ago), scope_key=scope_key)


async def test_a_forgotten_project_leaves_phase2_and_stays_out(tmp_path: Path) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path)
    memory_ops = Sent()
    providers = SimpleNamespace(
        settings=settings, llm=Model(artifacts.project_dir(tmp_path, "p_1")), embedder=Embedder(), store=Store()
    )
    inputs: dict[str, Any] = {}
    states: dict[str, Any] = {}
    consolidator = Consolidator(providers, SimpleNamespace(memory_ops=memory_ops), inputs, states)  # type: ignore[arg-type]
    consolidator.record_output(in_project("a1", "p_1", 3), offset=0)
    consolidator.record_output(in_project("b1", "p_2", 2), offset=1)
    assert await consolidator.run(ConsolidationRequest(reason="phase1", ts=NOW)) == "succeeded"
    assert artifacts.project_dir(tmp_path, "p_1").exists() and artifacts.project_dir(tmp_path, "p_2").exists()

    event = msgspec.structs.replace(forget_event(project="/shop", at=NOW), scope_key="p_1")
    assert consolidator.forget(event) == ["a1"]
    assert set(inputs) == {"b1"}
    assert [s.rollout_id for s in states[GLOBAL].selected] == ["b1"]
    assert not artifacts.project_dir(tmp_path, "p_1").exists()
    assert artifacts.project_dir(tmp_path, "p_2").exists()
    global_summaries = artifacts.global_dir(tmp_path) / artifacts.SUMMARIES
    assert [p.name.split("-")[0] for p in global_summaries.iterdir()] == ["b1"]

    # A Phase 1 output of a session active before the forget (still in a rollout table) is
    # ignored; one of a session after the forget is a new start.
    consolidator.record_output(in_project("a2", "p_1", 1), offset=2)
    assert "a2" not in inputs
    later = msgspec.structs.replace(in_project("a3", "p_1", 0), source_updated_at=NOW + timedelta(minutes=1))
    consolidator.record_output(later, offset=3)
    assert "a3" in inputs
    memory_ops.values.clear()
    assert await consolidator.run(ConsolidationRequest(reason="phase1", ts=NOW)) == "succeeded"
    scopes = {op.scope_key for op in memory_ops.values if isinstance(op, CreateMemory)}
    assert scopes == {"p_1"}, "only the new session's summary, nothing from before the forget"
