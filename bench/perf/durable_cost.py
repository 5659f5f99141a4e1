"""What the durable turn log costs where turns are accepted (issue 35): turns/s and CPU per turn.

``python -m bench.perf.durable_cost [--turns 2000] [--rounds 3] [--ways publish,send_turns]`` starts an
embedded broker and accepts the same turns through the two ways every entry point goes through --
``publish`` (``memstream publish``, one acknowledged send per turn) and ``send_turns`` (the spool's
flush behind hooks, ``ingest`` and ``watch``: batches of 2,000) -- without and with the log, interleaved
round by round on the same machine, and prints turns/s and this process's CPU per turn for each,
and the log's own CPU per turn: the thread time of its appends and acknowledgements, which the
machine's load moves far less than the process's whole (the broker and the producer share its cores).
``send_turns`` with the log runs twice: as it sends (growing chunks, each committed before it is
sent while the previous one is on its way) and as it sent before (one commit of the whole batch, then
the sends), so the two are compared at the same moment.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from memstream.intake.publish import FIRST_CHUNK, open_producer, publish, send_turns
from memstream.intake.turnlog import TurnLog
from memstream.kafka.broker import EmbeddedBroker
from memstream.schemas import Turn
from memstream.topics.admin import ensure_topics


def turns(count: int, *, exchanges: bool = False) -> list[Turn]:
    """Turns across 60 sessions of 7 projects; with ``exchanges``, a question and its answer share a session."""
    now = datetime.now(UTC)
    step = 2 if exchanges else 1
    return [
        Turn(
            session_id=f"s{(i // step) % 60}",
            project=f"/p{(i // step) % 7}",
            role="user" if i % 2 == 0 else "assistant",
            content=f"turn {i} " + "some words of a conversation " * 12,
            ts=now,
            user="dev@example.com",
        )
        for i in range(count)
    ]


async def accept(
    how: str, bootstrap: str, prefix: str, batch: list[Turn], log: TurnLog | None, *, one_commit: bool = False
) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    if how == "publish":
        await publish(bootstrap, prefix, batch, log=log)
    else:
        producer = await open_producer(bootstrap, prefix)
        try:
            await send_turns(producer, prefix, batch, log=log, first_chunk=len(batch) if one_commit else FIRST_CHUNK)
        finally:
            await producer.stop()
    return time.perf_counter() - wall, time.process_time() - cpu


class Measured(TurnLog):
    """The turn log, counting the CPU its appends and acknowledgements take in the threads they run in."""

    spent = 0.0

    def append(self, turns: Sequence[Turn], prepared: Sequence[tuple[str, bytes]] | None = None) -> list[int]:
        began = time.thread_time()
        try:
            return super().append(turns, prepared)
        finally:
            Measured.spent += time.thread_time() - began

    def published(self, seqs: Sequence[int]) -> None:
        began = time.thread_time()
        try:
            super().published(seqs)
        finally:
            Measured.spent += time.thread_time() - began


#: (way, log mode) in the order each round runs them.
MODES = {"publish": ("no log", "log"), "send_turns": ("no log", "log, one commit", "log")}


async def run(count: int, rounds: int, ways: list[str]) -> None:
    batch = turns(count)
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
        prefix = f"cost-{uuid.uuid4().hex[:6]}"
        await ensure_topics(broker.bootstrap, prefix, partitions=2, replication=1)
        print(f"load {os.getloadavg()[0]:.1f}; {count} turns per round, {rounds} rounds, interleaved")
        results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        for r in range(rounds):
            for how in ways:
                modes = MODES[how] if r % 2 == 0 else MODES[how][::-1]  # neither always goes first
                for mode in modes:
                    log = Measured(Path(tmp) / f"log-{r}-{how}-{mode}.db") if mode != "no log" else None
                    Measured.spent = 0.0
                    wall, cpu = await accept(
                        how, broker.bootstrap, prefix, batch, log, one_commit=mode == "log, one commit"
                    )
                    results.setdefault((how, mode), []).append((wall, cpu, Measured.spent))
                    if log is not None:
                        log.close()
        for (how, mode), runs in sorted(
            results.items(), key=lambda item: (ways.index(item[0][0]), MODES[item[0][0]].index(item[0][1]))
        ):
            wall = sum(w for w, _, _ in runs)
            cpu = sum(c for _, c, _ in runs)
            own = sum(o for _, _, o in runs)
            n = count * len(runs)
            print(
                f"{how:10} {mode:16}: {n / wall:7.0f} turns/s accepted, {cpu / n * 1e6:6.0f} µs CPU per turn"
                + (f", the log's own {own / n * 1e6:5.1f}" if mode != "no log" else "")
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ways", default="publish,send_turns", help="comma-separated: publish, send_turns")
    args = parser.parse_args()
    asyncio.run(run(args.turns, args.rounds, args.ways.split(",")))


if __name__ == "__main__":
    main()
