"""The maintenance worker end to end (Pipeline v2): a memstream with injected problems (dead letters,
a memory missing its sparse vector, many tombstones) is diagnosed by ``memstream doctor``,
``--execute`` repairs it with the health score rising, and the halt tracker stops a repair
that does not help — on the real embedded broker, store and embedder, raw mode."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from qdrant_edge import UpdateOperation

from memstream.agents import retention
from memstream.identity import derived_id, project_key
from memstream.intake.publish import make_turn, publish, publish_events
from memstream.ops.maintenance import Maintenance
from memstream.schemas import DeadLetter, Memory, encode
from memstream.store.base import BM25_VECTOR, DENSE_VECTOR
from memstream.telemetry import metrics
from memstream.topics import DEAD_LETTERS, TURNS, topic_name
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
#: Exchanges on unrelated subjects, so that dedup keeps each as its own memory.
EXCHANGES = [
    ("How do we deploy?", "Deploys go through make ship on the main branch."),
    ("Which database do we use?", "Orders live in PostgreSQL 16 with logical replication."),
    ("What about the frontend tests?", "Playwright runs the checkout flow in three browsers."),
    ("Where do logs go?", "Every service ships JSON logs to Loki through Promtail."),
    ("How are secrets stored?", "Secrets come from Vault, mounted by the sidecar injector."),
]


class Run:
    def __init__(self, running: runner.Running, root: Path):
        self.running, self.root = running, root

    @property
    def store(self) -> Any:
        return self.running.providers.store

    @property
    def worker(self) -> Maintenance:
        worker: Maintenance = self.running.pipeline.app.maintenance  # type: ignore[attr-defined]
        return worker

    async def doctor(self, *args: str) -> dict[str, Any]:
        env = {
            **os.environ,
            "MEMSTREAM_KAFKA_BOOTSTRAP": self.running.bootstrap,
            "MEMSTREAM_TOPIC_PREFIX": self.running.settings.topic_prefix,
            "MEMSTREAM_HTTP_PORT": str(self.running.settings.http_port),
            "MEMSTREAM_DATA_DIR": str(self.root / "cli-data"),
        }

        async def call(*extra: str) -> str:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "memstream.cli",
                "doctor",
                *args,
                *extra,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await process.communicate()
            assert process.returncode == 0, err.decode()
            return out.decode()

        report: dict[str, Any] = json.loads(await call("--json"))
        return report

    async def memories(self, name: str, count: int, *, start: int = 0) -> list[Memory]:
        """``count`` memories written straight to the store, as the store agent would."""
        made = []
        for i in range(start, start + count):
            memory = Memory(
                id=derived_id("maintenance", name, str(i)),
                text=f"{name} fact number {i}: the build cache lives in bucket {i}",
                type="tech-context",
                scope="project",
                scope_key=project_key(str(self.root / name)),
                created_at=T0,
                updated_at=T0,
                content_hash=f"{name}-{i}",
                embedding_model=self.running.providers.embedder.model,
            )
            (vector,) = await self.running.providers.embedder.embed_documents([memory.text])
            await self.store.upsert(memory, vector)
            made.append(memory)
        return made


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def run(tmp_module_dir: Path) -> AsyncIterator[Run]:
    running = await start_pipeline(tmp_module_dir / "data", tombstone_retention_days=0.0)
    try:
        yield Run(running, tmp_module_dir)
    finally:
        await running.stop()


async def test_the_halt_tracker_stops_a_repair_that_does_not_help(run: Run) -> None:
    memories = await run.memories("halt", 10)
    for old in memories[:5]:
        await run.store.supersede(old.id, memories[9].id)
    # Tombstones kept 30 days: a sweep now purges none of them, so it never helps.
    providers = dataclasses.replace(
        run.running.providers,
        settings=dataclasses.replace(run.running.settings, tombstone_retention_days=30.0),
    )
    topics = run.running.pipeline.topics

    async def sweep(now: datetime) -> dict[str, int]:
        return await retention.sweep(providers, topics, now)

    worker = Maintenance(
        providers, bootstrap=run.worker.bootstrap, prefix=run.worker.prefix, group=run.worker.group, sweep=sweep
    )
    observed = await worker.tick(mode="observe")
    assert [r.action for r in observed.recommendations] == ["retention_sweep"]
    assert observed.executed == [] and observed.after is None

    clock = datetime.now(UTC).timestamp()
    cooldown = run.running.settings.repair_reembed_cooldown_ms / 1000
    for cycle in range(3):
        report = await worker.tick(mode="execute", clock=clock + cycle * (cooldown + 1))
        (executed,) = report.executed
        assert (executed.action, executed.outcome, executed.detail) == (
            "retention_sweep",
            "done",
            "purged 0 tombstones",
        )
        assert report.delta == 0.0
    assert report.halted == ["retention_sweep"]
    halted = await worker.tick(mode="execute", clock=clock + 3 * (cooldown + 1))
    assert [(e.action, e.outcome) for e in halted.executed] == [("retention_sweep", "skipped")]
    assert "halted after 3 runs" in halted.executed[0].detail

    # Once nothing is recommended, the tracker starts over.
    await run.store.purge_superseded(datetime.now(UTC) + timedelta(days=1))
    healthy = await worker.tick(mode="execute", clock=clock + 4 * (cooldown + 1))
    assert healthy.recommendations == [] and healthy.halted == [] and worker.tracker.halted == []
    for memory in memories:
        await run.store.delete(memory.id)


async def test_doctor_reports_injected_problems_and_execute_repairs_them(run: Run) -> None:
    project = run.root / "shop"
    prefix = run.running.settings.topic_prefix
    # Some traffic: three sessions of one exchange each (raw mode stores each exchange).
    await publish(
        run.running.bootstrap,
        prefix,
        [
            make_turn(session_id=f"s{i}", project=str(project), role=role, content=text, ts=T0)
            for i, (question, answer) in enumerate(EXCHANGES[:3])
            for role, text in (("user", question), ("assistant", answer))
        ],
    )
    await eventually(lambda: _count(run, project, 3), what="three conversation memories")

    # Problem 1: two turns that were dead-lettered (the original bytes kept, ready to re-drive).
    lost = [
        make_turn(session_id=f"lost{i}", project=str(project), role=role, content=text, ts=T0)
        for i, (question, answer) in enumerate(EXCHANGES[3:])
        for role, text in (("user", question), ("assistant", answer))
    ]
    letters = [
        DeadLetter(
            stage="snapshot",
            reason="RuntimeError: the snapshot stage crashed",
            topic=topic_name(prefix, TURNS),
            key=turn.session_id.encode(),
            payload=encode(turn),
            ts=datetime.now(UTC),
        )
        for turn in lost
    ]
    # And one that kept neither its topic nor its bytes: nothing can re-drive it, so it is not counted.
    hopeless = DeadLetter(stage="decode:?", reason="no message", topic="", ts=datetime.now(UTC))
    await publish_events(
        run.running.bootstrap, prefix, DEAD_LETTERS, [("snapshot", letter) for letter in [*letters, hopeless]]
    )
    # Problem 2: a memory that lost its BM25 terms, one that lost its embedding, a dropped index.
    damaged, unembedded = await run.memories("sparse", 2)
    await run.store._run(lambda s: s.update(UpdateOperation.delete_vectors([damaged.id], [BM25_VECTOR])))
    await run.store._run(lambda s: s.update(UpdateOperation.delete_vectors([unembedded.id], [DENSE_VECTOR])))
    await run.store._run(lambda s: s.update(UpdateOperation.delete_field_index("type")))
    # Problem 3: many tombstones (superseded now; retention keeps them 0 days here).
    tombstones = await run.memories("tombs", 8)
    for old in tombstones[:6]:
        await run.store.supersede(old.id, tombstones[7].id)

    report = await run.doctor()
    assert report["mode"] == "observe" and report["executed"] == [] and report["after"] is None
    assert [r["action"] for r in report["recommendations"]] == [
        "requeue_dead_letters",
        "repair_sparse_vectors",
        "repair_indexes",
        "retention_sweep",
        "reembed",
    ]
    before = report["before"]
    assert before["queue"]["dead_letters"] == 4 and before["store"]["missing_sparse"] == 1
    assert before["store"]["missing_dense"] == 1 and before["store"]["missing_indexes"] == ["type"]
    assert before["store"]["superseded"] == 6 and before["score"] < 1.0

    repaired = await run.doctor("--execute")
    assert [(e["action"], e["outcome"], e["detail"]) for e in repaired["executed"]] == [
        ("requeue_dead_letters", "done", "re-drove 4 dead letters"),
        ("repair_sparse_vectors", "done", "gave BM25 terms to 1 memories"),
        ("repair_indexes", "done", "created indexes: type"),
        ("retention_sweep", "done", "purged 6 tombstones"),
        ("reembed", "done", "re-embedded 1 memories"),
    ]
    after = repaired["after"]
    assert repaired["delta"] > 0 and after["score"] > repaired["before"]["score"]
    assert after["queue"]["dead_letters"] == 0 and after["store"]["superseded"] == 0
    assert (after["store"]["missing_sparse"], after["store"]["missing_dense"], after["store"]["missing_indexes"]) == (
        0,
        0,
        [],
    )
    assert await run.store.vector(unembedded.id) is not None
    # The score and the repairs are on /metrics too.
    exposition = metrics.exposition().decode()
    assert f"memstream_health_score {after['score']}" in exposition
    assert 'memstream_repairs_total{action="reembed",outcome="done"}' in exposition

    # The re-driven turns went through the pipeline.
    await eventually(lambda: _count(run, project, 5), what="the two lost exchanges stored")


async def test_doctor_prints_a_readable_report_without_importing_faust(run: Run) -> None:
    from memstream.ops.maintenance import render

    report = await run.doctor()
    lines = render(report).splitlines()
    assert lines[0].startswith("health ") and lines[1].startswith("  queue:")
    assert any(line.startswith("halted: ") for line in lines)
    # `memstream doctor` is a read verb: what it imports to print the report brings no Faust.
    check = "import sys, memstream.cli, memstream.ops.maintenance; print('faust' in sys.modules)"
    process = await asyncio.create_subprocess_exec(sys.executable, "-c", check, stdout=asyncio.subprocess.PIPE)
    assert (await process.communicate())[0] == b"False\n"


async def _count(run: Run, project: Path, n: int) -> bool:
    return len(await run.store.list([project_key(str(project))])) >= n
