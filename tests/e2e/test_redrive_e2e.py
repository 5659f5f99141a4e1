"""``memstream redrive`` end to end: turns dead-lettered during an LLM outage are recovered once the
provider is back, each dead letter is re-driven once, and an event that fails again comes back to the
dead letters with its attempt count — on the real embedded broker, store and embedder, with a fake
Anthropic API that can be taken down."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from memstream.identity import project_key
from memstream.intake.publish import make_turn, publish
from memstream.ops.redrive import RedriveFilter, dead_letters, redrive, redriven
from memstream.schemas import Memory
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline
from tests.fakes.anthropic_server import FakeAnthropic

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


class Provider:
    """A model that states the newest assistant line as a fact, unless it is down."""

    def __init__(self) -> None:
        self.down = False

    def __call__(self, request: dict[str, Any]) -> str:
        if self.down:
            raise RuntimeError("provider outage")
        system = str(request.get("system", "")).lower()
        if "supersede" in system:
            return '{"superseded": []}'
        content = request["messages"][-1]["content"]
        prompt = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content)
        lines = [line for line in prompt.splitlines() if line.startswith("[assistant]")]
        last = lines[-1].removeprefix("[assistant] ") if lines else ""
        return json.dumps({"memories": [{"memory": f"Noted: {last}", "type": "learned-pattern", "confidence": 0.9}]})


class Run:
    def __init__(self, running: runner.Running, provider: Provider, root: Path):
        self.running, self.provider, self.root = running, provider, root

    @property
    def bootstrap(self) -> str:
        return self.running.bootstrap

    @property
    def prefix(self) -> str:
        return self.running.settings.topic_prefix

    async def session(self, name: str, project: Path, answer: str) -> None:
        start = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
        turns = [("user", "What did we decide?"), ("assistant", answer)]
        await publish(
            self.bootstrap,
            self.prefix,
            [
                make_turn(session_id=name, project=str(project), role=r, content=t, ts=start + timedelta(seconds=i))
                for i, (r, t) in enumerate(turns)
            ],
        )

    async def memories(self, project: Path) -> list[Memory]:
        return await self.running.providers.store.list([project_key(str(project))])

    async def dead_with(self, text: str, count: int = 1) -> list[Any]:
        async def find() -> list[Any]:
            found = [d for d in await dead_letters(self.bootstrap, self.prefix) if text.encode() in d.letter.payload]
            return found if len(found) >= count else []

        return await eventually(find, what=f"{count} dead letter(s) holding {text!r}")

    async def cli(self, *args: str) -> str:
        env = {
            **os.environ,
            "MEMSTREAM_KAFKA_BOOTSTRAP": self.bootstrap,
            "MEMSTREAM_TOPIC_PREFIX": self.prefix,
            "MEMSTREAM_DATA_DIR": str(self.root / "cli-data"),
        }
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "memstream.cli",
            *args,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        return out.decode()


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def run(tmp_module_dir: Path) -> AsyncIterator[Run]:
    provider = Provider()
    with FakeAnthropic(provider, api_key="sk-test") as claude:
        running = await start_pipeline(
            tmp_module_dir / "data",
            anthropic_api_key="sk-test",
            anthropic_base_url=claude.base_url,
            llm_retries=0,
            retry_budget=0.2,  # a snapshot failing for 0.2 s is dead-lettered
            park_delay=0.1,
            park_delay_max=0.3,
        )
        try:
            yield Run(running, provider, tmp_module_dir)
        finally:
            await running.stop()


async def test_turns_dead_lettered_in_an_outage_are_recovered_by_redrive(run: Run) -> None:
    project = run.root / "outage"
    run.provider.down = True
    await run.session("o1", project, "Releases are tagged vX.Y.Z on main.")
    await run.session("o2", project, "The staging database is restored nightly.")
    letters = [*await run.dead_with("Releases are tagged"), *await run.dead_with("staging database")]
    assert {d.letter.stage for d in letters} == {"extract"} and not await run.memories(project)

    # The provider is back: a dry run sends nothing, the real run recovers both turns.
    run.provider.down = False
    dry = await run.cli("redrive", "--stage", "extract", "--reason", "extraction failed", "--dry-run")
    assert dry.splitlines()[-1] == "would re-drive 2 dead letters"
    assert not await redriven(run.bootstrap, run.prefix)
    out = await run.cli("redrive", "--stage", "extract", "--since", "1h")
    assert out.splitlines()[-1] == "re-drove 2 dead letters"

    async def recovered() -> bool:
        texts = {m.text for m in await run.memories(project)}
        return {"Noted: Releases are tagged vX.Y.Z on main.", "Noted: The staging database is restored nightly."} <= (
            texts
        )

    await eventually(recovered, what="both turns' memories")
    assert await redriven(run.bootstrap, run.prefix) == {d.id for d in letters}

    # Never twice: the same dead letters are skipped from now on.
    again = await run.cli("redrive", "--stage", "extract")
    assert again.splitlines()[-1] == "re-drove 0 dead letters; skipped 2 re-driven before"


async def test_an_event_that_fails_again_returns_with_its_attempt_count(run: Run) -> None:
    project = run.root / "relapse"
    run.provider.down = True
    await run.session("r1", project, "The cache is warmed at deploy time.")
    (first,) = await run.dead_with("cache is warmed")
    assert first.letter.attempts == 1

    report = await redrive(run.bootstrap, run.prefix, RedriveFilter(reason="extraction failed"), by="test")
    assert [item.id for item in report.selection.chosen] == [first.id]
    # Still down: the re-driven snapshot is dead-lettered again, one attempt more, pointing back.
    _, second = await run.dead_with("cache is warmed", count=2)
    assert (second.letter.attempts, second.letter.redriven_from) == (2, first.id)
    assert second.letter.payload == first.letter.payload and second.letter.key == first.letter.key

    run.provider.down = False
    report = await redrive(run.bootstrap, run.prefix, RedriveFilter(stage="extract"), by="test")
    assert [item.id for item in report.selection.chosen] == [second.id] and report.selection.already >= 1
    await eventually(
        lambda: _has(run, project, "Noted: The cache is warmed at deploy time."), what="the recovered memory"
    )


async def _has(run: Run, project: Path, text: str) -> bool:
    return any(m.text == text for m in await run.memories(project))
