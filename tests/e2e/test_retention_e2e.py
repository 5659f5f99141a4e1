"""Pipeline v2's retention worker end to end on the real broker: a superseded memory is unlinked
from the graph, hard-deleted and audited as purged, the active one stays, old audit records
go, and ``memstream history`` reads the trail from the running pipeline's API."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memstream.agents.retention import sweep
from memstream.cli import main
from memstream.identity import derived_id, project_key
from memstream.intake.publish import publish_events
from memstream.schemas import CreateMemory, Memory, SupersedeMemory
from memstream.schemas.events import Entity
from memstream.topics.catalog import MEMORY_OPS
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]


def get(url: str, path: str, **params: str) -> str:
    with urllib.request.urlopen(f"{url}{path}?{urllib.parse.urlencode(params)}", timeout=10) as response:
        return response.read().decode()


async def test_retention_end_to_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    running = await start_pipeline(
        tmp_path / "data",
        graph_enabled=True,
        tombstone_retention_days=0,
        history_retention_days=1,
        retention_interval=0.5,
    )
    try:
        settings, providers = running.settings, running.providers
        store, history, graph = providers.store, providers.history, providers.graph
        assert graph is not None
        scope_key = project_key(str(tmp_path / "shop"))
        now = datetime.now(UTC)

        async def create(text: str, target: str) -> tuple[Memory, CreateMemory]:
            [vector] = await providers.embedder.embed_documents([text])
            memory = Memory(
                id=derived_id(scope_key, text),
                text=text,
                type="tech-context",
                scope="project",
                scope_key=scope_key,
                created_at=now,
                updated_at=now,
                content_hash=hashlib.sha256(text.encode()).hexdigest(),
                embedding_model=providers.embedder.model,
            )
            entities = [Entity(source="shop", relationship="stores orders in", target=target)]
            op = CreateMemory(
                op_id=derived_id("op", memory.id),
                scope_key=scope_key,
                cause="extracted",
                memory=memory,
                vector=list(vector),
                entities=entities,
            )
            return memory, op

        old, create_old = await create("The shop stores orders in Postgres 15.", "Postgres")
        new, create_new = await create("The shop stores orders in SQLite now.", "SQLite")
        await publish_events(
            running.bootstrap, settings.topic_prefix, MEMORY_OPS, [(scope_key, create_old), (scope_key, create_new)]
        )

        async def graph_names() -> dict[str, int]:
            return {e.canonical_name: e.mentions for e in await graph.entities(scope_key)}

        # Both are in the graph before one is superseded: with a window of 0 days, the sweep
        # purges a tombstone at once, and must find its links already written.
        async def both_linked() -> bool:
            return await graph_names() == {"shop": 2, "postgres": 1, "sqlite": 1}

        await eventually(both_linked, what="both memories in the graph")
        supersede = SupersedeMemory(
            op_id=derived_id("op", "supersede", old.id),
            scope_key=scope_key,
            cause="contradiction",
            memory_id=old.id,
            superseded_by=new.id,
        )
        await publish_events(running.bootstrap, settings.topic_prefix, MEMORY_OPS, [(scope_key, supersede)])

        async def purged_and_audited() -> list[str]:
            outcomes: list[str] = [r.outcome for r in await history.for_memory(old.id)]
            gone = await store.get(old.id) is None
            return outcomes if gone and outcomes == ["superseded", "purged"] else []

        await eventually(purged_and_audited, what="the tombstone purged, superseded then purged in its history")
        kept = await store.get(new.id)
        assert kept is not None and kept.active
        # The orphaned entity went with the tombstone; the shared one lost a mention.
        assert await graph_names() == {"shop": 1, "sqlite": 1}
        superseded, purged = await history.for_memory(old.id)
        assert (purged.memory_id, purged.target_id, purged.scope_key) == (old.id, new.id, scope_key)
        assert purged.reason == "retention: tombstone older than 0 days"
        assert superseded.target_id == new.id

        # The API and the CLI read the same trail from the running pipeline.
        body = json.loads(await asyncio.to_thread(get, settings.api_url, "/history", memory_id=old.id))
        assert [r["outcome"] for r in body["records"]] == ["superseded", "purged"]
        scope_body = json.loads(await asyncio.to_thread(get, settings.api_url, "/history", scope=scope_key))
        assert [r["outcome"] for r in scope_body["records"]] == ["superseded", "purged"]
        with pytest.raises(urllib.error.HTTPError) as missing:
            await asyncio.to_thread(get, settings.api_url, "/history")
        assert missing.value.code == 400
        monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(settings.data_dir))
        monkeypatch.setenv("MEMSTREAM_HTTP_PORT", str(settings.http_port))
        capsys.readouterr()
        # In a thread: the CLI blocks on the API that this event loop serves.
        assert await asyncio.to_thread(main, ["history", old.id]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [line.split()[1] for line in lines] == ["superseded", "purged"]
        assert f"{old.id} -> {new.id}" in lines[1]
        metrics = await asyncio.to_thread(get, settings.api_url, "/metrics")
        purged_total = re.search(r'^memstream_retention_purged_total\{step="tombstones"\} (\S+)$', metrics, re.M)
        assert purged_total is not None and float(purged_total.group(1)) >= 1

        # A sweep a year on: every audit record is past the one-day history window.
        counts = await sweep(providers, running.pipeline.topics, now + timedelta(days=365))
        assert counts["history"] >= 2 and counts["failed-steps"] == 0
        assert await history.for_memory(old.id) == []
        assert await store.get(new.id) == kept
    finally:
        await running.stop()
