"""Starting the embedded broker afresh (memstream.worker.recycle): when it is due, and what is carried over."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP

from memstream.kafka.broker import BrokerError
from memstream.rules.snapshot import apply_turn, carried_over
from memstream.runtime import process_identity
from memstream.schemas import RolloutState, SessionState
from memstream.schemas.events import Role
from memstream.settings import Settings
from memstream.worker import recycle
from memstream.worker.replay import replay_file, replays_running


def session(*turns: tuple[Role, str]) -> SessionState:
    state = SessionState()
    for offset, (role, content) in enumerate(turns):
        applied = apply_turn(
            state, partition=0, offset=offset, role=role, content=content, size=8, message_max_chars=100
        )
        state = applied.state
    return state


def test_a_carried_session_keeps_its_window_but_forgets_where_its_turns_were_read() -> None:
    """The fresh broker's offsets start at 0 again: a new turn read where an old one was read must
    be applied, not taken for a redelivery, and the exchange it answers keeps its question."""
    before = session(("user", "Which port?"), ("assistant", "8431"), ("user", "Which database?"))
    carried = carried_over(before)
    assert [t.content for t in carried.applied] == ["Which port?", "8431", "Which database?"]
    assert all(t.offset == -1 for t in carried.applied) and carried.first_applied == []
    assert (carried.assistant_turns, carried.lineage) == (before.assistant_turns, before.lineage)
    answer = apply_turn(
        carried, partition=0, offset=1, role="assistant", content="Postgres", size=8, message_max_chars=100
    )
    assert not answer.redelivered
    assert answer.exchange is not None and [m.content for m in answer.exchange] == ["Which database?", "Postgres"]
    assert apply_turn(
        before, partition=0, offset=1, role="assistant", content="x", size=8, message_max_chars=100
    ).redelivered


class FakeConsumer:
    def __init__(
        self,
        ends: dict[TP, int],
        committed: dict[TP, int | None],
        floors: dict[TP, int] | None = None,
        finished: dict[TP, set[int]] | None = None,
    ) -> None:
        self.ends, self._committed_offset = ends, committed
        self._floors, self._finished = floors or {}, finished or {}

    def assignment(self) -> set[TP]:
        return set(self.ends)

    def highwater(self, tp: TP) -> int:
        return self.ends[tp]


def test_what_no_stage_finished_is_carried_over() -> None:
    turns0, turns1, facts = TP("p.turns", 0), TP("p.turns", 1), TP("p.facts", 0)
    consumer = FakeConsumer(
        {turns0: 9, turns1: 4, facts: 3},
        {turns0: 5, turns1: None, facts: 3},
        floors={turns1: 2},
        finished={turns0: {6, 8}},
    )
    ends = {turns0: 10, turns1: 4, facts: 3}  # read from the broker once the worker stopped: one more came in
    assert recycle.unprocessed(consumer, [turns0, turns1, facts], ends) == {turns0: {5, 7, 9}, turns1: {2, 3}}


def test_rss_of_a_live_process_and_of_none() -> None:
    assert recycle.rss_mb(os.getpid()) > 1
    assert recycle.rss_mb(2**22 + 12345) == 0.0


def running_with(pid: int | None) -> Any:
    return SimpleNamespace(broker=SimpleNamespace(pid=pid) if pid else None)


@pytest.mark.asyncio
async def test_nothing_is_started_afresh_under_the_bound_without_a_broker_or_when_off() -> None:
    me = os.getpid()  # this process holds far more than 1 MB and less than a million
    assert not await recycle.Recycler(1_000_000, check_seconds=0).due(running_with(me))
    assert not await recycle.Recycler(0, check_seconds=0).due(running_with(me))
    assert not await recycle.Recycler(1, check_seconds=0).due(running_with(None))  # Kafka: nothing to bound


@pytest.mark.asyncio
async def test_the_broker_is_looked_at_once_a_check_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    looked: list[int] = []

    def rss_mb(pid: int) -> float:
        looked.append(pid)
        return 0.0

    monkeypatch.setattr(recycle, "rss_mb", rss_mb)
    recycler = recycle.Recycler(1, check_seconds=3600)
    assert not await recycler.due(running_with(os.getpid()))
    assert looked == []  # the first look comes a check interval after start
    recycler._next_check = 0
    assert not await recycler.due(running_with(os.getpid()))
    assert not await recycler.due(running_with(os.getpid()))
    assert looked == [os.getpid()]


@pytest.mark.asyncio
async def test_not_under_a_running_replay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay's shadow pipeline reads and writes the same broker from its own process."""
    settings = Settings.from_env({}, data_dir=tmp_path)
    monkeypatch.setattr(recycle, "QUIET_SECONDS", 0.0)
    monkeypatch.setattr(recycle, "rss_mb", lambda pid: 600.0)
    running: Any = SimpleNamespace(broker=SimpleNamespace(pid=os.getpid()), settings=settings)
    monkeypatch.setattr(recycle, "pending_dead_letters", lambda bootstrap, prefix: _none())
    running.bootstrap = "127.0.0.1:1"
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", "import time; time.sleep(60)")
    try:
        shadow = tmp_path / "replays" / "v2"
        shadow.mkdir(parents=True)
        record = {"name": "v2", "pid": child.pid, "process": process_identity(child.pid)}
        replay_file(shadow).write_text(json.dumps(record))
        (tmp_path / "replays" / "gone").mkdir()  # a replay that crashed: its file names a dead process
        replay_file(tmp_path / "replays" / "gone").write_text(json.dumps({**record, "pid": 2**22 + 1}))
        assert replays_running(settings) == ["v2"]
        recycler = recycle.Recycler(512, check_seconds=0)
        assert not await recycler.due(running)
        assert recycler._told == ["memstream replay v2 reads this broker"]
    finally:
        child.kill()
        await child.wait()
    assert replays_running(settings) == []
    assert await recycler.due(running)


async def _none() -> list[Any]:
    return []


def test_only_sessions_that_spoke_within_the_phase_1_age_are_carried() -> None:
    """What is carried stays bounded by a month of sessions, not all of them since the first start."""
    now = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    month = timedelta(days=30)
    states = [
        ("active", SessionState(last_seen=(now - timedelta(hours=2)).timestamp())),
        ("gone", SessionState(last_seen=(now - timedelta(days=31)).timestamp())),
        ("old-format", SessionState(last_ts=now - timedelta(days=3))),  # no processing time kept
        ("rollout", RolloutState(last_ts=now - timedelta(days=29), exchanges=["Q A"], turns=1)),
        ("stale-rollout", RolloutState(last_ts=now - timedelta(days=40), exchanges=["Q A"], turns=1)),
        ("none", None),
    ]
    assert sorted(recycle.recent(states, now, month)) == ["active", "old-format", "rollout"]


@pytest.mark.asyncio
async def test_a_fresh_broker_whose_port_was_taken_starts_on_a_free_one(monkeypatch: pytest.MonkeyPatch) -> None:
    ports: list[int | None] = []
    started = SimpleNamespace(bootstrap="127.0.0.1:2")

    async def start(settings: Any, providers: Any, **options: Any) -> Any:
        ports.append(options["broker_port"])
        if options["broker_port"] is not None:
            raise BrokerError("Tansu exited with status 1")
        return started

    async def stop(**keep: bool) -> None:
        assert keep == {"keep_broker": True, "keep_providers": True, "keep_api": True}

    async def carry(*args: Any) -> recycle.Carried:
        return recycle.Carried()

    monkeypatch.setattr(recycle.runner, "start", start)
    monkeypatch.setattr(recycle.Recycler, "carry", staticmethod(carry))
    broker = SimpleNamespace(pid=os.getpid(), port=4242, stop=lambda: None)
    consumer = SimpleNamespace(assignment=lambda: set())
    running: Any = SimpleNamespace(
        broker=broker,
        settings=Settings.from_env({}),
        bootstrap="127.0.0.1:4242",
        pipeline=SimpleNamespace(app=SimpleNamespace(_consumer=consumer)),
        providers=object(),
        stop=stop,
        api=None,
        owns_api=False,
    )
    assert await recycle.Recycler(1).recycle(running) is started
    assert ports == [4242, None]
