"""A multi-turn coding session through the real embedded broker, Faust agents, Qdrant edge
store and bundled embedder, with LLM answers from a fake Anthropic API on loopback."""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaProducer

from memstream.identity import project_key, user_key
from memstream.intake.publish import make_turn, publish
from memstream.schemas import DeadLetter, Memory, MemoryUpdated
from memstream.topics import ALL_TOPICS, DEAD_LETTERS, FACTS, MEMORY_UPDATED, SNAPSHOTS, TURNS, topic_name
from memstream.worker import runner
from tests.e2e import session
from tests.e2e.conftest import eventually, read_topic, read_whole, start_pipeline, values
from tests.fakes.anthropic_server import FakeAnthropic

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

USER = "dev@example.com"


class Run:
    """The started pipeline, the fake model and the published session."""

    def __init__(self, running: runner.Running, fake: FakeAnthropic, project: str):
        self.running = running
        self.fake = fake
        self.project = project
        self.project_key = project_key(project)
        self.user_key = user_key(USER)

    @property
    def store(self) -> Any:
        return self.running.providers.store

    def topic(self, spec: Any) -> str:
        return topic_name(self.running.settings.topic_prefix, spec)

    async def memories(self, *, include_superseded: bool = False) -> list[Memory]:
        return await self.store.list([self.project_key, self.user_key], include_superseded=include_superseded)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


LOGS = _Collect()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def run(tmp_module_dir: Path) -> AsyncIterator[Run]:
    # Every log line the pipeline writes while the session runs, at every level.
    root = logging.getLogger()
    previous = root.level
    root.addHandler(LOGS)
    root.setLevel(logging.DEBUG)
    with FakeAnthropic(session.respond, api_key="sk-test") as fake:
        running = await start_pipeline(
            tmp_module_dir / "data",
            anthropic_api_key="sk-test",
            anthropic_base_url=fake.base_url,
            llm_retries=0,
            # The API's caller (open mode on loopback): the user whose preferences it reads.
            user=USER,
            # Every assistant turn writes a summary and only 2 are kept, so the session
            # also exercises condensation.
            summary_every=1,
            session_summary_cap=2,
        )
        project = str(tmp_module_dir / "shop")
        start = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
        turns = [
            make_turn(
                session_id="s-1",
                project=project,
                role=role,
                content=content,
                user=USER,
                ts=start + timedelta(minutes=i),
            )
            for i, (role, content) in enumerate(session.TURNS)
        ]
        await publish(running.bootstrap, running.settings.topic_prefix, turns)
        try:
            yield Run(running, fake, project)
        finally:
            await running.stop()
            root.removeHandler(LOGS)
            root.setLevel(previous)


async def settled(run: Run) -> list[Memory]:
    """Wait for the session's end state: Redis fact stored, JWT superseded, one progress."""

    async def check() -> list[Memory] | None:
        everything = await run.memories(include_superseded=True)
        redis = [m for m in everything if "Redis" in m.text and m.type == "architecture"]
        jwt = [m for m in everything if "JWT tokens" in m.text]
        progress = [m for m in everything if m.type == "progress"]
        patterns = [m for m in everything if m.type == "learned-pattern"]
        done = (
            redis and jwt and jwt[0].superseded_by and len(progress) == 1 and "signup" in progress[0].text and patterns
        )
        return everything if done else None

    try:
        return await eventually(check, what="the session's memories to settle")
    except AssertionError as exc:
        stored = [(m.type, m.text, m.superseded_by) for m in await run.memories(include_superseded=True)]
        raise AssertionError(f"{exc}\nstored: {stored}\nllm requests: {len(run.fake.requests)}") from None


async def test_session_becomes_typed_memories(run: Run) -> None:
    everything = await settled(run)
    active = [m for m in everything if m.superseded_by is None]
    by_type: dict[str, list[Memory]] = {}
    for m in active:
        by_type.setdefault(m.type, []).append(m)

    # The paraphrase that arrived back to back, and the fact repeated a turn later, both
    # refreshed the first memory instead of adding one.
    jwt = [m for m in everything if "JWT tokens" in m.text]
    assert len(jwt) == 1
    # A newer architecture fact superseded it: kept in the store, linked to its successor.
    redis = [m for m in by_type["architecture"] if "Redis" in m.text]
    assert len(redis) == 1 and jwt[0].superseded_by == redis[0].id
    # Only the latest progress survives.
    assert [m.text for m in by_type["progress"]] == [
        "Progress: login and signup endpoints are implemented, password reset is next"
    ]
    # The preference is user-scoped, under the user's key.
    (preference,) = by_type["preference"]
    assert preference.scope == "user" and preference.scope_key == run.user_key
    # Three summaries were written with a cap of 2: the oldest became a learned-pattern.
    assert len(by_type["session-summary"]) == 2
    assert [m.text for m in by_type["learned-pattern"]] == ["Keep auth changes small and test login first"]
    # Nothing fell to the dead-letter topic.
    assert run.running.pipeline.dead_letters.count == 0


async def test_downstream_consumer_sees_every_change(run: Run) -> None:
    await settled(run)
    records = await read_topic(
        run.running.bootstrap,
        run.topic(MEMORY_UPDATED),
        until=lambda rs: (
            {"created", "refreshed", "deleted", "superseded"} <= {json.loads(r.value)["change"] for r in rs}
        ),
    )
    updates = [v for v in values(records) if isinstance(v, MemoryUpdated)]
    changes = {(u.change, u.memory.type) for u in updates}
    assert ("created", "architecture") in changes
    assert ("refreshed", "architecture") in changes  # the duplicate JWT fact
    assert ("deleted", "progress") in changes  # aging
    assert ("deleted", "session-summary") in changes  # condensed
    assert ("superseded", "architecture") in changes  # contradiction
    # Keyed by scope, so one project's changes keep their order.
    assert {r.key.decode() for r in records} <= {run.project_key, run.user_key}


async def test_private_text_never_leaves_the_snapshot_stage(run: Run, spans: Any) -> None:
    await settled(run)
    assert all("hunter2" not in json.dumps(r.body) for r in run.fake.requests)
    # Turns carry what the agent host sent; the pipeline starts after them.
    derived = [run.topic(spec) for spec in ALL_TOPICS if spec not in (TURNS, DEAD_LETTERS)]
    whole = await read_whole(run.running.bootstrap, derived)
    assert whole[run.topic(SNAPSHOTS)] and whole[run.topic(FACTS)], "the session's words went through these"
    for topic, records in whole.items():
        assert all(b"hunter2" not in (r.value or b"") for r in records), topic
    assert all("hunter2" not in m.text + m.source_chunk for m in await run.memories(include_superseded=True))
    # Nor any span attribute, nor any log line, at any level.
    for span in spans.get_finished_spans():
        assert "hunter2" not in json.dumps({k: str(v) for k, v in (span.attributes or {}).items()}), span.name
    assert LOGS.lines and not [line for line in LOGS.lines if "hunter2" in line]


async def test_search_and_block_over_http(run: Run) -> None:
    await settled(run)
    api = run.running.settings.api_url

    def fetch(path: str, **params: str) -> str:
        query = urllib.parse.urlencode({"project": run.project, **params})
        with urllib.request.urlopen(f"{api}{path}?{query}", timeout=30) as response:
            return response.read().decode()

    async def get(path: str, **params: str) -> str:
        # The API is served on this very event loop: the blocking client runs in a thread.
        return await asyncio.to_thread(fetch, path, **params)

    results = json.loads(await get("/search", q="how are auth sessions stored?", detail="full"))["results"]
    assert results and "Redis" in results[0]["text"]
    assert all("JWT tokens" not in r["text"] for r in results)  # superseded: gone from search

    block = await get("/block")
    assert block.startswith("[MEMORY]") and block.endswith("[/MEMORY]")
    assert "## Architecture\n- Auth sessions are stored server-side in Redis" in block
    assert "## Progress & Status\n- Progress: login and signup" in block
    assert "## User Preferences\n- User prefers bun over npm" in block
    assert "JWT tokens" not in block
    # With a query, what it finds is shown under "Relevant to Current Task" (once: not also in its section).
    asked = await get("/block", q="how are auth sessions stored?")
    assert "## Relevant to Current Task\n- [architecture] Auth sessions are stored server-side in Redis" in asked
    assert asked.count("Auth sessions are stored server-side in Redis") == 1 and "JWT tokens" not in asked


async def test_one_trace_spans_every_stage(run: Run, spans: Any) -> None:
    await settled(run)
    prefix = run.running.settings.topic_prefix
    finished = spans.get_finished_spans()
    # The trace of the turn that produced the Redis fact: its memory-ops process span.
    traces: dict[int, set[str]] = {}
    for span in finished:
        traces.setdefault(span.context.trace_id, set()).add(span.name)
    # Faust's sensor opens "{topic} process" per event; the embed stage batches with
    # take_events, which bypasses the sensor, so it continues the trace itself (memstream.embed).
    stages = {f"{prefix}.{t} process" for t in ("turns", "snapshots", "embedded", "memory-ops", "memory-updated")}
    stages |= {
        "memstream.intake.publish",
        "memstream.snapshot",
        "memstream.extract",
        "memstream.llm",
        "memstream.embed",
        "memstream.decide",
        "memstream.store",
    }
    best = max(traces.values(), key=lambda names: len(stages & names))
    assert stages <= best, f"stages missing from the most complete trace: {sorted(stages - best)}"


async def test_undecodable_payload_is_dead_lettered_and_the_stage_moves_on(run: Run) -> None:
    await settled(run)
    producer = AIOKafkaProducer(bootstrap_servers=run.running.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(run.topic(TURNS), b"{not json", key=b"s-bad")
        await producer.send_and_wait(run.topic(TURNS), b'{"schema": "turn.v9"}', key=b"s-bad")
    finally:
        await producer.stop()
    records = await read_topic(run.running.bootstrap, run.topic(DEAD_LETTERS), until=lambda rs: len(rs) >= 2)
    letters = [v for v in values(records) if isinstance(v, DeadLetter)]
    assert {letter.payload for letter in letters} >= {b"{not json", b'{"schema": "turn.v9"}'}
    assert all(
        letter.stage == f"decode:{run.topic(TURNS)}" and "does not decode" in letter.reason for letter in letters
    )
    assert all(letter.offset >= 0 for letter in letters)
    # The snapshot stage still works after the bad records.
    await publish(
        run.running.bootstrap,
        run.running.settings.topic_prefix,
        [
            make_turn(session_id="s-2", project=run.project, role="user", content="What do we use for CI?", user=USER),
            make_turn(session_id="s-2", project=run.project, role="assistant", content="Nothing new here.", user=USER),
        ],
    )
    await eventually(
        lambda: _async(any("Nothing new here." in r.user_text for r in run.fake.requests)),
        what="the next turn to reach the LLM",
    )


async def _async(value: Any) -> Any:
    return value


async def test_prometheus_metrics_cover_stages_llm_and_lag(run: Run) -> None:
    await settled(run)
    url = f"{run.running.settings.api_url}/metrics"

    def fetch() -> str:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.read().decode()

    text = await asyncio.to_thread(fetch)
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1]) for line in text.splitlines() if line and not line.startswith("#")
    }
    for stage in ("snapshot", "extract", "embed", "decide", "store", "history", "age", "contradiction"):
        assert samples[f'memstream_events_processed_total{{stage="{stage}"}}'] > 0, stage
    assert samples['memstream_llm_calls_total{outcome="ok",provider="anthropic"}'] > 0
    assert samples['memstream_llm_tokens_total{kind="input",provider="anthropic"}'] > 0
    assert samples['memstream_llm_cost_usd_total{provider="anthropic"}'] > 0
    assert any(name.startswith("memstream_consumer_lag{") for name in samples)
    assert any(name.startswith('memstream_stage_seconds_bucket{le="0.1",stage="decide"}') for name in samples)
