"""Liveness and readiness of a running worker, for ``/health`` and for ``memstream up``.

Live: no Faust service the pipeline depends on has crashed (the consumer, its fetcher,
the producer, an agent's actor). Faust does not restart a crashed fetcher: every stage
stops consuming while the web server keeps answering, so ``memstream up`` exits non-zero
when the worker is not live (a supervisor restarts it) and ``/health/live`` says so.

Ready: live, and start-up finished (topics created, partitions assigned, tables
recovered, agents running, the runtime file written), and no partition stalled: one
with records left to read whose read position has not moved for ``stall_seconds``.

A partition stalled for ``LIVE_STALL_SECONDS`` makes the worker not live either: a worker that makes
no progress that long will not make it on its own (a table recovery that waited forever for an
offset no record is at kept a restarted worker "starting" for over ten minutes, issue 35.6), and
only a restart — `memstream up` exits, a supervisor starts it again — gets it going.

Nothing here imports Faust: it reads the app it is given.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

#: A partition with lag whose position has not moved for this long is stalled. Longer than
#: any wait a stage makes on purpose (a parked retry waits at most the backoff cap, 30 s).
STALL_SECONDS = 120.0
#: A partition stalled this long makes the worker not live (a supervisor restarts it): five times
#: the readiness bound, longer than any table recovery measured (seconds for ~10k changelog records).
LIVE_STALL_SECONDS = 600.0


@dataclass
class Status:
    live: bool
    ready: bool
    problems: list[str]

    @property
    def label(self) -> str:
        return "ok" if self.ready else ("starting" if self.live else "unhealthy")


@dataclass
class Watch:
    """Per partition, the last read position seen and since when, to tell a stall."""

    stall_seconds: float = STALL_SECONDS
    live_stall_seconds: float = LIVE_STALL_SECONDS
    seen: dict[Any, tuple[int | None, float]] = field(default_factory=dict)

    def stalled(self, tp: Any, position: int | None, lag: int, now: float) -> bool:
        return self.stalled_for(tp, position, lag, now) >= self.stall_seconds

    def stalled_for(self, tp: Any, position: int | None, lag: int, now: float) -> float:
        """Seconds ``tp`` has had records to read with its read position at ``position`` (0: moving)."""
        last = self.seen.get(tp)
        if last is None or last[0] != position or lag == 0:
            self.seen[tp] = (position, now)
            return 0.0
        return now - last[1]


def crashed(app: Any) -> list[str]:
    """The pipeline's Faust services that have crashed (each makes the worker not live)."""
    found = []
    services = {
        "consumer": getattr(app, "_consumer", None),
        "fetcher": getattr(app, "_fetcher", None),
        "producer": getattr(app, "_producer", None),
    }
    for name, service in services.items():
        if service is not None and getattr(service, "crashed", False):
            found.append(f"{name} crashed: {service.crash_reason!r}")
    for agent in app.agents.values():
        for actor in list(getattr(agent, "_actors", ())):
            if getattr(actor, "crashed", False):
                found.append(f"agent {agent.name} crashed: {actor.crash_reason!r}")
    return found


def status(app: Any, *, started: bool, announced: bool, watch: Watch, now: float | None = None) -> Status:
    """The worker's liveness and readiness, with what is wrong when it is not ready."""
    problems = crashed(app)
    live = not problems
    if not started:
        problems.append("starting: the worker has not finished joining its group and recovering its tables")
    elif not announced:
        problems.append("starting: the runtime file is not written yet")
    if started:
        problems += _not_running(app)
        stalls, stuck = _stalls(app, watch, time.monotonic() if now is None else now)
        problems += stalls
        if stuck:
            live = False
            problems.append(f"not live: no progress for {watch.live_stall_seconds:.0f} s or more (restart the worker)")
    return Status(live=live, ready=not problems, problems=problems)


def _not_running(app: Any) -> list[str]:
    found = []
    fetcher = getattr(app, "_fetcher", None)
    if fetcher is not None and not getattr(app, "rebalancing", False) and fetcher.should_stop:
        found.append("fetcher is not running")
    consumer = getattr(app, "_consumer", None)
    if consumer is not None and consumer.should_stop:
        found.append("consumer is not running")
    elif consumer is not None and not consumer.assignment():
        found.append("no partition assigned")
    for agent in app.agents.values():
        if not list(getattr(agent, "_actors", ())):
            found.append(f"agent {agent.name} is not running")
    return found


def _stalls(app: Any, watch: Watch, now: float) -> tuple[list[str], bool]:
    """The stalled partitions, and whether one is stalled past the liveness bound."""
    consumer = getattr(app, "_consumer", None)
    if consumer is None:
        return [], False
    found = []
    stuck = False
    for tp in consumer.assignment():
        if tp.topic.endswith("-changelog"):  # changelogs are read on recovery only
            continue
        high = consumer.highwater(tp)
        if high is None:
            continue
        read = consumer._read_offset.get(tp)  # Faust keeps no public position
        position = read + 1 if read is not None else None
        lag = max(0, high - (position or 0))
        stalled = watch.stalled_for(tp, position, lag, now)
        if stalled >= watch.stall_seconds:
            found.append(f"{tp.topic}[{tp.partition}] has {lag} records to read and has not moved")
        stuck = stuck or stalled >= watch.live_stall_seconds
    return found, stuck
