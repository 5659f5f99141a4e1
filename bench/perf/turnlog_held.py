"""Does the turn log's CPU per turn grow with the turns it holds (issue 35: "total CPU per turn at 100k turns
held is within 20% of its value at the start")? The log's part of that figure only.

``python -m bench.perf.turnlog_held [--turns 100000] [--batch 2000] [--window 10000]`` appends turns to one
log the way `up` accepts them and keeps them -- each batch in :func:`memstream.intake.publish.log_chunks`
chunks, acknowledged, then what `up`'s done sweep does every couple of seconds: ``mark_done`` (a session's
trailing question waits for its answer) and the WAL's checkpoint. Done turns stay (retention is days), so at
the end the log holds ``--turns`` turns. It prints this process's CPU per turn over the first and the last
``--window`` turns, and their ratio (``--stuck``: with one turn never acknowledged at the start). No broker
and no worker: the embedded broker is started afresh above MEMSTREAM_BROKER_MAX_MB and the worker's stages are
measured by bench.perf.light.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from bench.perf.durable_cost import turns as durable_turns
from memstream.intake.publish import log_chunks
from memstream.intake.turnlog import TurnLog, prepare
from memstream.schemas import Turn


def turns(count: int) -> list[Turn]:
    """Exchanges, a question then its answer, across 60 sessions of 7 projects (durable_cost's turns)."""
    return durable_turns(count, exchanges=True)


def run(total: int, batch_size: int, window: int, where: Path, *, stuck: bool) -> tuple[float, float]:
    """CPU µs per turn over the first and the last ``window`` turns. ``stuck``: the log's first turn is
    never acknowledged, as a send that failed leaves it until the next start publishes it again."""
    batch = turns(batch_size)
    prepared = [prepare(turn) for turn in batch]
    per_batch: list[float] = []
    with tempfile.TemporaryDirectory(dir=where) as tmp, TurnLog(Path(tmp) / "turnlog.db") as log:
        if stuck:
            log.append(batch[:1], prepared[:1])
        for _ in range(total // batch_size):
            began = time.process_time()
            seqs: list[int] = []
            for start, end in log_chunks(batch_size):
                seqs += log.append(batch[start:end], prepared[start:end])
            log.published(seqs)
            log.mark_done(seqs[-1], open_before=time.time() - 60)
            log.checkpoint()
            per_batch.append(time.process_time() - began)
        held = log.count()
    n = max(1, window // batch_size)
    first, last = sum(per_batch[:n]) / (n * batch_size), sum(per_batch[-n:]) / (n * batch_size)
    print(f"held {held} turns; load {os.getloadavg()[0]:.1f}")
    return first * 1e6, last * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=2_000)
    parser.add_argument("--window", type=int, default=10_000)
    parser.add_argument("--stuck", action="store_true", help="the first turn is never acknowledged")
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="where the log is written (its disk)")
    args = parser.parse_args()
    first, last = run(args.turns, args.batch, args.window, args.dir, stuck=args.stuck)
    print(
        f"the log's CPU per turn: first {args.window} turns {first:.1f} µs, last {args.window} {last:.1f} µs"
        f" ({(last / first - 1) * 100:+.0f}%)"
    )


if __name__ == "__main__":
    main()
