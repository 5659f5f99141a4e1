"""Two workers, one consolidation partition: only one Phase 2 runs at a time, and when the
worker running it dies mid-run, the other takes the run over and finishes it, once.

Both workers are real `memstream up` processes in one consumer group on one broker. The
fake model holds the first Phase 2 call open; the test kills the worker that made it
(SIGKILL: no goodbye to the group), and waits for the survivor to redo the run.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstream.agents.consolidate import consolidated_memory_id
from memstream.identity import project_key
from memstream.intake.publish import publish
from memstream.kafka.broker import EmbeddedBroker, free_port
from memstream.rules import phase2
from memstream.schemas import Turn
from memstream.schemas.events import Role
from memstream.store import artifacts
from tests.e2e.conftest import eventually
from tests.e2e.phase_model import PhaseModel
from tests.fakes.anthropic_server import FakeAnthropic

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

ROOT = Path(__file__).resolve().parents[2]
MODELS = ("claude-worker-a", "claude-worker-b")


@dataclass
class HeldPhase2(PhaseModel):
    """The phase model, but the first Phase 2 call is held until released, and every
    Phase 2 call is timed per worker (the model name says which worker asked)."""

    release: threading.Event = field(default_factory=threading.Event)
    in_flight: int = 0
    max_in_flight: int = 0
    calls: list[tuple[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        PhaseModel.__init__(self)

    def __call__(self, request: dict[str, Any]) -> Any:
        if request.get("system") != phase2.SYSTEM:
            return self.answer(request)
        return self._phase2(request)

    async def _phase2(self, request: dict[str, Any]) -> str:
        with self.lock:
            first = not self.calls
            self.calls.append((request["model"], time.monotonic()))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            # The test releases it from its own thread, where no asyncio.Event can be set.
            while first and not self.release.is_set():  # noqa: ASYNC110 - a threading.Event, polled
                await asyncio.sleep(0.05)
            return self.answer(request)
        finally:
            with self.lock:
                self.in_flight -= 1


def worker(env: dict[str, str], name: str, model: str, data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "memstream.cli", "up"],
        env={
            **env,
            "MEMSTREAM_ANTHROPIC_MODEL": model,
            "MEMSTREAM_DATA_DIR": str(data_dir),
            "MEMSTREAM_HTTP_PORT": str(port),
        },
        stdout=subprocess.DEVNULL,
        stderr=open(data_dir.parent / f"{name}.log", "wb"),
        cwd=data_dir.parent,
    )


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as started:
        yield started


async def test_one_run_at_a_time_and_takeover_when_the_runner_dies(tmp_path: Path, broker: EmbeddedBroker) -> None:
    model = HeldPhase2()
    with FakeAnthropic(model) as fake:
        prefix = f"fo{uuid.uuid4().hex[:8]}"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_", "VOYAGE_"))},
            "PYTHONPATH": str(ROOT),
            "MEMSTREAM_KAFKA_BOOTSTRAP": broker.bootstrap,
            "MEMSTREAM_TOPIC_PREFIX": prefix,
            "MEMSTREAM_PARTITIONS": "2",
            "ANTHROPIC_API_KEY": "sk-test",
            "MEMSTREAM_ANTHROPIC_BASE_URL": fake.base_url,
            "MEMSTREAM_LLM_RETRIES": "0",
            "MEMSTREAM_LLM_TIMEOUT": "120",
            "MEMSTREAM_PHASE1_IDLE_SECONDS": "1",
            "MEMSTREAM_PHASE1_SCAN_INTERVAL": "0.3",
            "MEMSTREAM_CONSOLIDATION_DEBOUNCE": "1",
            "MEMSTREAM_CONSOLIDATION_RETRY_DELAY": "0.2",
            "MEMSTREAM_USER": "dev@example.com",
            # The test reads each worker's API without tokens: open, as allowed on loopback.
            "MEMSTREAM_API_OPEN": "true",
        }
        ports = (free_port(), free_port())
        dirs = (tmp_path / "a" / "data", tmp_path / "b" / "data")
        for d in dirs:
            d.mkdir(parents=True)
        workers = [worker(env, name, m, d, p) for name, m, d, p in zip("ab", MODELS, dirs, ports, strict=True)]
        try:
            for port in ports:
                await eventually(functools.partial(asyncio.to_thread, healthy, port), what=f"worker on {port}")
            shop = str(tmp_path / "shop")
            now = datetime.now(UTC)
            turns = []
            for session_id, topic in (("s-auth", "Set up auth for the shop"), ("s-cart", "Build the cart page")):
                said: tuple[tuple[Role, str], ...] = (("user", topic), ("assistant", f"{topic}: done and tested."))
                for role, content in said:
                    turns.append(Turn(session_id=session_id, project=shop, role=role, content=content, ts=now))
            await publish(broker.bootstrap, prefix, turns)

            # The worker that owns the consolidation partition starts a run and is held in it.
            await eventually(lambda: _true(bool(model.calls)), what="the first Phase 2 call")
            runner_model = model.calls[0][0]
            runner = MODELS.index(runner_model)
            survivor = 1 - runner
            await asyncio.sleep(1.0)  # any second run would have started by now
            assert [m for m, _ in model.calls] == [runner_model]  # one run, on one worker
            workers[runner].send_signal(signal.SIGKILL)
            workers[runner].wait(timeout=30)
            killed_at = time.monotonic()
            model.release.set()  # the dead worker's call ends; nobody reads its answer

            # The survivor takes the partition over, redoes the run, and finishes it.
            shop_dir = artifacts.project_dir(dirs[survivor], project_key(shop))
            await eventually(
                lambda: _true(_mentions(shop_dir / artifacts.CONSOLIDATED, "set-up-auth-for", "build-the-cart-page")),
                what="the survivor's consolidation",
            )
            later = [(m, t) for m, t in model.calls[1:]]
            assert later and all(m == MODELS[survivor] and t > killed_at for m, t in later)
            assert model.max_in_flight == 1  # never two Phase 2 calls at once

            # Once: one summary file per rollout, each raw memory once, one consolidated memory.
            assert len(list((shop_dir / artifacts.SUMMARIES).iterdir())) == 2
            raw = (artifacts.global_dir(dirs[survivor]) / artifacts.RAW_MEMORIES).read_text()
            assert raw.count("rollout: s-auth ") == 1 and raw.count("rollout: s-cart ") == 1
            block = await eventually(
                lambda: _consolidated_block(ports[survivor], shop), what="the summary in the survivor's block"
            )
            assert block.count("## Consolidated Memory") == 1
            memories = await asyncio.to_thread(_get, ports[survivor], "/memories")
            assert memories.count(consolidated_memory_id(project_key(shop))) == 1
        finally:
            model.release.set()
            for process in workers:
                if process.poll() is None:
                    process.send_signal(signal.SIGINT)
            for process in workers:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


async def _true(value: bool) -> bool:
    return value


def _mentions(path: Path, *texts: str) -> bool:
    return path.exists() and all(text in path.read_text() for text in texts)


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return response.read().decode()


async def _consolidated_block(port: int, project: str) -> str | None:
    block = await asyncio.to_thread(_get, port, f"/block?project={project}")
    return block if "## Consolidated Memory" in block else None
