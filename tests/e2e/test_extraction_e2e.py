"""Extraction fidelity end to end: provider fallback, parking and dead-lettering after an
outage, init mode, explicit memories and secret redaction — on the real embedded broker,
store and embedder, with fake Anthropic and OpenAI-compatible (local) servers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from memstream.identity import project_key
from memstream.intake.publish import make_turn, publish
from memstream.schemas import DeadLetter, Memory
from memstream.topics import ALL_TOPICS, DEAD_LETTERS, FACTS, PARKED, SNAPSHOTS, TURNS, topic_name
from memstream.worker import runner
from tests.e2e.conftest import eventually, read_topic, read_whole, start_pipeline, values
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ANTHROPIC_KEY = "sk-ant-api03-" + "Q" * 86 + "AA"  # a realistic key shape, to prove it is redacted


def answer(request: dict[str, Any]) -> str:
    """A model that states one fact about the newest assistant line, or the project files."""
    system = str(request.get("system", ""))
    content = request["messages"][-1]["content"]
    prompt = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
    if "project's files" in system:
        return json.dumps(
            {
                "memories": [
                    {
                        "memory": "Tiny converts CSV files to JSON from the command line",
                        "type": "project-brief",
                        "confidence": 0.95,
                    }
                ]
            }
        )
    if "supersede" in system.lower() or "summarize" in system.lower():
        return '{"superseded": []}' if "supersede" in system.lower() else "[]"
    lines = [line for line in prompt.splitlines() if line.startswith("[assistant]")]
    last = lines[-1].removeprefix("[assistant] ") if lines else ""
    return json.dumps(
        {
            "memories": [
                {"memory": f"Session note: {last}", "type": "learned-pattern", "confidence": 0.9},
                {"memory": f"Unsure guess about {last}", "type": "learned-pattern", "confidence": 0.3},
            ],
            "entities": [{"source": "session", "relationship": "mentions", "target": last[:20]}],
        }
    )


def openai_answer(body: dict[str, Any]) -> str:
    messages = body["messages"]
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    return answer({"system": system, "messages": [messages[-1]]}).replace("Session note:", "Local note:")


class Run:
    def __init__(self, running: runner.Running, claude: FakeAnthropic, local: FakeOpenAI, root: Path):
        self.running, self.claude, self.local, self.root = running, claude, local, root

    def topic(self, spec: Any) -> str:
        return topic_name(self.running.settings.topic_prefix, spec)

    async def session(self, name: str, project: Path, *turns: tuple[str, str]) -> None:
        start = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
        await publish(
            self.running.bootstrap,
            self.running.settings.topic_prefix,
            [
                make_turn(
                    session_id=name, project=str(project), role=role, content=text, ts=start + timedelta(seconds=i)
                )
                for i, (role, text) in enumerate(turns)
            ],
        )

    async def memories(self, project: Path) -> list[Memory]:
        return await self.running.providers.store.list([project_key(str(project))])

    async def memory_with(self, project: Path, text: str) -> Memory:
        async def find() -> Memory | None:
            return next((m for m in await self.memories(project) if text in m.text), None)

        return await eventually(find, what=f"a memory containing {text!r}")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def run(tmp_module_dir: Path) -> AsyncIterator[Run]:
    # The local fallback is a server without a grammar: its answers (no scope, no entity confidence) are
    # read by the tolerant parser rather than held to the extraction schema.
    with FakeAnthropic(answer, api_key="sk-test") as claude, FakeOpenAI(openai_answer, server="ignore") as local:
        running = await start_pipeline(
            tmp_module_dir / "data",
            anthropic_api_key="sk-test",
            anthropic_base_url=claude.base_url,
            local_llm_url=local.base_url,
            llm_retries=0,
            retry_budget=0.3,  # a snapshot failing for 0.3 s is dead-lettered (6 h by default)
            park_delay=0.1,
            park_delay_max=0.5,
        )
        try:
            yield Run(running, claude, local, tmp_module_dir)
        finally:
            await running.stop()


async def test_the_next_provider_answers_when_the_primary_fails(run: Run, spans: Any) -> None:
    project = run.root / "fallback"
    run.claude.fail_next(1, status=500)
    await run.session("fb", project, ("user", "Which port?"), ("assistant", "The API listens on port 8080."))
    memory = await run.memory_with(project, "Local note: The API listens on port 8080")
    # The write gate (0.7) kept the confident fact and dropped the 0.3 guess.
    assert all("Unsure guess" not in m.text for m in await run.memories(project))
    assert memory.type == "learned-pattern"
    # Entity triples ride on the fact events, for later graph use.
    facts = await read_topic(
        run.running.bootstrap, run.topic(FACTS), until=lambda rs: any(b"Local note" in r.value for r in rs)
    )
    (fact,) = [v for v in values(facts) if "Local note: The API listens" in v.text]
    assert [(e.source, e.relationship) for e in fact.entities] == [("session", "mentions")] and fact.confidence == 0.9
    # This run's calls only: other tests' chains (with fake models) share the exporter.
    models = {run.running.settings.anthropic_model, run.running.settings.local_llm_model}
    calls = [
        s
        for s in spans.get_finished_spans()
        if s.name == "memstream.llm.call" and s.attributes.get("llm.model") in models
    ]
    outcomes = {(s.attributes["llm.provider"], s.attributes["llm.outcome"]) for s in calls}
    assert {("anthropic", "error"), ("local", "ok")} <= outcomes
    ok = next(s for s in calls if s.attributes["llm.provider"] == "local" and s.attributes["llm.outcome"] == "ok")
    assert ok.attributes["llm.output_tokens"] > 0 and ok.attributes["llm.latency_ms"] >= 0


async def test_an_outage_parks_the_snapshot_and_a_retry_extracts_it(run: Run) -> None:
    project = run.root / "parked"
    run.claude.fail_next(1, status=529)
    run.local.fail_next(1, status=503)
    await run.session("pk", project, ("user", "Where are logs?"), ("assistant", "Logs are shipped to Loki."))
    await run.memory_with(project, "Session note: Logs are shipped to Loki")
    parked = await read_topic(run.running.bootstrap, run.topic(PARKED), until=lambda rs: len(rs) >= 1)
    (first, *_) = [v for v in values(parked) if v.snapshot.session_id == "pk"]
    assert first.snapshot.attempt == 1 and "all LLM providers failed" in first.reason


async def test_a_persistent_outage_is_dead_lettered_with_its_reason(run: Run) -> None:
    project = run.root / "dead"
    run.claude.fail_next(3, status=500)
    run.local.fail_next(3, status=500)
    await run.session("dl", project, ("user", "Cache?"), ("assistant", "The cache is Redis 7."))
    records = await read_topic(
        run.running.bootstrap,
        run.topic(DEAD_LETTERS),
        until=lambda rs: any(b'"stage":"extract"' in r.value for r in rs),
    )
    run.claude.clear_script()  # the budget may run out after two failures of the three
    run.local.clear_script()
    (letter,) = [v for v in values(records) if isinstance(v, DeadLetter) and v.stage == "extract"]
    assert "extraction failed (for " in letter.reason and "HTTP 500" in letter.reason
    assert b"The cache is Redis 7." in letter.payload  # the snapshot, ready to re-drive
    assert not [m for m in await run.memories(project)]


async def test_a_new_project_is_initialised_from_its_files(run: Run) -> None:
    project = run.root / "tiny"
    project.mkdir()
    (project / "README.md").write_text("# Tiny\n\nTiny converts CSV files to JSON.\n")
    (project / "pyproject.toml").write_text('[project]\nname = "tiny"\n')
    await run.session("init", project, ("user", "Hello"), ("assistant", "Hi, ready to work on Tiny."))
    memory = await run.memory_with(project, "Tiny converts CSV files to JSON from the command line")
    assert memory.type == "project-brief"
    init_prompts = [r for r in run.claude.requests if "project's files" in r.system]
    assert init_prompts and "=== README.md ===" in init_prompts[0].user_text


async def test_explicit_requests_and_secrets(run: Run) -> None:
    project = run.root / "explicit"
    await run.session(
        "ex",
        project,
        (
            "user",
            f"Remember that the staging cluster runs in eu-west-1. Also: export ANTHROPIC_API_KEY={ANTHROPIC_KEY}",
        ),
        ("assistant", "Noted. I set DATABASE_URL=postgres://app:s3cretPassw0rd@db:5432/shop in the env file."),
    )
    explicit = await run.memory_with(project, "The staging cluster runs in eu-west-1")
    assert explicit.type != "conversation"
    for request in [*run.claude.requests, *run.local.requests]:
        assert ANTHROPIC_KEY not in json.dumps(request.body) and "s3cretPassw0rd" not in json.dumps(request.body)
    derived = [run.topic(spec) for spec in ALL_TOPICS if spec not in (TURNS, DEAD_LETTERS)]
    whole = await read_whole(run.running.bootstrap, derived)
    assert whole[run.topic(SNAPSHOTS)] and whole[run.topic(FACTS)], "the session's words went through these"
    for topic, records in whole.items():
        for record in records:
            assert ANTHROPIC_KEY.encode() not in (record.value or b"") and b"s3cretPassw0rd" not in (
                record.value or b""
            ), topic


async def test_memstream_init_command_extracts_foundational_facts(run: Run) -> None:
    import asyncio
    import os
    import sys

    project = run.root / "tiny-cli"
    project.mkdir()
    (project / "README.md").write_text("# Tiny\n\nTiny converts CSV files to JSON.\n")
    env = {
        **os.environ,
        "MEMSTREAM_KAFKA_BOOTSTRAP": run.running.bootstrap,
        "MEMSTREAM_TOPIC_PREFIX": run.running.settings.topic_prefix,
        "MEMSTREAM_DATA_DIR": str(run.root / "cli-data"),
        # The pipeline serves in open mode (tests/conftest.py): its CLI writes without a token, as the API does.
        "MEMSTREAM_API_OPEN": "true",
        "MEMSTREAM_USER": "dev@example.com",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memstream.cli",
        "init",
        str(project),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert out.decode().startswith(f"published an init snapshot of {project} (1 file, ")
    memory = await run.memory_with(project, "Tiny converts CSV files to JSON from the command line")
    assert memory.type == "project-brief" and memory.session_id == f"init:{project_key(str(project))}"
