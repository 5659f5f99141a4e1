"""Does the total CPU per turn of `memstream up` (worker + embedded broker) stay flat as turns pile up
(issue 35: "Total CPU per turn (worker + embedded broker) at 100k turns held is within 20% of its value at
the start")?

    .venv/bin/python -m bench.perf.held_cpu [--block 10000] [--blocks 10] [--max-mb 512]

Starts a real `up` (raw mode, the embedded default, the bundled embedder, the turn log on) on a fresh
data dir, then, block after block, publishes ``--block`` turns (exchanges across 60 sessions of 7
projects, every answer its own words) with ``memstream publish --file`` and waits until the turn log has
no unfinished turn (every exchange stored and the done sweep has seen the pipeline idle). The CPU of up's
process (the worker, in it) and of every process under it (the broker, also one started afresh: a reaped
child's time is in up's ``cutime``) is read from /proc before and after each block, and printed per turn,
in total and split worker / broker, with the load. The publisher's CPU is not counted (it is not `up`).
The turns held are the turn log's (done turns stay, retention is days); the broker holds what it was sent
since its last fresh start (``--max-mb``: MEMSTREAM_BROKER_MAX_MB).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from memstream.intake.turnlog import FILE_NAME
from tests.support.durable_up import WORDS, Up, descendants

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, *, reaped: bool) -> float:
    """utime + stime of ``pid`` (``reaped``: plus its waited-for children's), in seconds; 0 once gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # after the ")": state is fields[0], so utime (field 14) is fields[11] ... cstime (17) is fields[14]
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICKS


def up_cpu(up: Up) -> tuple[float, float]:
    """(the worker's: up's own process, the broker's: every process under up, live or reaped -- a broker
    started afresh leaves its predecessor's time in up's ``cutime``, so it stays on the broker's side)."""
    assert up.process is not None
    worker = cpu_seconds(up.process.pid, reaped=False)
    children = cpu_seconds(up.process.pid, reaped=True) - worker
    broker = children + sum(cpu_seconds(pid, reaped=True) for pid in descendants(up.process.pid))
    return worker, broker


def block_of(projects: Path, first: int, count: int, rng: random.Random) -> str:
    """``count`` turns (``count // 2`` exchanges) from exchange number ``first // 2`` on, as JSONL."""
    lines = []
    for n in range(first // 2, (first + count) // 2):
        session = n % 60
        turn = {"session_id": f"s{session}", "project": str(projects / f"p{session % 7}")}
        question = f"{' '.join(rng.sample(WORDS, 12))} {n}?"
        answer = f"{' '.join(rng.sample(WORDS, 12))} {n}."
        lines.append(json.dumps({**turn, "role": "user", "content": question}))
        lines.append(json.dumps({**turn, "role": "assistant", "content": answer}))
    return "\n".join(lines) + "\n"


def unfinished(log: Path) -> int | None:
    try:
        with sqlite3.connect(f"file:{log}?mode=ro", uri=True, timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM turns WHERE done = 0").fetchone()[0])
    except sqlite3.Error:
        return None


def wait_drained(up: Up, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert up.process is not None
        if up.process.poll() is not None:
            raise RuntimeError(f"up exited with {up.process.returncode}; see {up.log}")
        if unfinished(log) == 0:
            return
        time.sleep(1)
    raise TimeoutError(f"turns still unfinished after {timeout:.0f} s; see {up.log}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block", type=int, default=10_000, help="turns per block (even)")
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--max-mb", type=int, default=512, help="MEMSTREAM_BROKER_MAX_MB")
    parser.add_argument("--timeout", type=float, default=7200, help="seconds a block may take to drain")
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--dir", type=Path, default=None, help="where the work dir goes (default: a temp dir)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's SIGTERM still stops the `up` below
    with tempfile.TemporaryDirectory(prefix="held-cpu-", dir=args.dir) as tmp:
        work = Path(tmp)
        projects = work / "projects"
        for p in range(7):
            (projects / f"p{p}").mkdir(parents=True)
        up = Up(work / "data", work / "up.log", MEMSTREAM_BROKER_MAX_MB=str(args.max_mb))
        up.data_dir.mkdir(parents=True)
        up.start()
        try:
            asyncio.run(up.wait_ready())
            log = up.data_dir / FILE_NAME
            print(f"up pid {up.process.pid if up.process else '?'}; {args.block} turns a block", flush=True)
            held = 0
            for b in range(args.blocks):
                path = work / "block.jsonl"
                path.write_text(block_of(projects, held, args.block, rng))
                worker0, broker0 = up_cpu(up)
                wall0, load0 = time.monotonic(), os.getloadavg()[0]
                up.publish(path)
                wait_drained(up, log, args.timeout)
                worker1, broker1 = up_cpu(up)
                wall, load1 = time.monotonic() - wall0, os.getloadavg()[0]
                held += args.block
                worker, broker = (worker1 - worker0) / args.block, (broker1 - broker0) / args.block
                print(
                    json.dumps(
                        {
                            "block": b,
                            "held": held,
                            "cpu_ms_per_turn": round((worker + broker) * 1e3, 2),
                            "worker_ms": round(worker * 1e3, 2),
                            "broker_ms": round(broker * 1e3, 2),
                            "seconds": round(wall),
                            "turns_per_s": round(args.block / wall, 1),
                            "load": [round(load0, 1), round(load1, 1)],
                            "fresh_starts": up.log.read_text(errors="replace").count("started afresh in"),
                        }
                    ),
                    flush=True,
                )
        finally:
            up.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
