"""How the durable turn log was chosen (memstream.intake.turnlog): SQLite in WAL mode against an
append-only segment file, both fsync'd per append, on this machine's data dir disk.

``python -m bench.perf.turnlog_append [--appends 300] [--dir PATH]`` prints, per design and per batch size
(1 turn: a hook's or an API call's; 100: a spool flush or ``publish --file``), the append latency
(p50/p95, ms) and the turns/s one writer reaches.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from memstream.intake.turnlog import TurnLog
from memstream.schemas import Turn, encode


def turns(count: int) -> list[Turn]:
    now = datetime.now(UTC)
    return [
        Turn(session_id=f"s{i % 7}", project="/p", role="user", content="x " * 400, ts=now, user="u@x")
        for i in range(count)
    ]


def segment_appender(path: Path) -> Callable[[Sequence[Turn]], object]:
    """Length-prefixed records appended to one file, fdatasync'd per append (no index, no done flags)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def append(batch: Sequence[Turn]) -> None:
        data = b"".join(len(b).to_bytes(4, "big") + b for b in (encode(t) for t in batch))
        os.write(fd, data)
        os.fdatasync(fd)

    return append


def measure(append: Callable[[Sequence[Turn]], object], batch: list[Turn], appends: int) -> tuple[float, float, float]:
    times = []
    began = time.perf_counter()
    for _ in range(appends):
        t = time.perf_counter()
        append(batch)
        times.append(time.perf_counter() - t)
    total = time.perf_counter() - began
    times.sort()
    return statistics.median(times) * 1000, times[int(len(times) * 0.95)] * 1000, appends * len(batch) / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        print(f"load: {os.getloadavg()[0]:.1f}  dir: {root}")
        for size in (1, 100):
            batch = turns(size)
            log = TurnLog(root / f"log{size}.db")
            results = {
                "sqlite-wal": measure(log.append, batch, args.appends),
                "segment": measure(segment_appender(root / f"seg{size}"), batch, args.appends),
            }
            log.close()
            for name, (p50, p95, rate) in results.items():
                print(f"{name:11} batch {size:3}: append p50 {p50:6.2f} ms  p95 {p95:6.2f} ms  {rate:8.0f} turns/s")


if __name__ == "__main__":
    main()
