"""Ctrl-C during a backlog (issue 42.3, issue 35.4): SIGINT to `memstream up`'s process group while the
pipeline works through a backlog must end every memstream process within the drain bound plus a few
seconds, the broker last, with an exit status that says whether everything was drained.

    .venv/bin/python -m bench.faults.stop_under_load [--runs 10] [--exchanges 300] [--drain 5] [--at-work 5]

Each run starts `up` (embedded default, raw mode) in a fresh data dir and a session of its own (as a
terminal's foreground group), publishes ``--exchanges`` exchanges, waits for ``--at-work`` memories
stored (0: sends at once once the broker acknowledged the backlog; on a loaded machine the first
memories can take minutes), sends SIGINT to the group, and times until no process of the session and
no broker it started is left. tests/faults/test_stop_drain.py runs one; this runs ``--runs`` in a row,
prints each, then the time to all gone (median, max) and how many runs ended every process.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.read.read_under_load import Up, exchanges_file

ROOT = Path(__file__).resolve().parents[2]
#: What the drain module allows past the bound (memstream.worker.drain.STOP_GRACE_SECONDS), plus slack.
SLACK_SECONDS = 5.0


@dataclass
class Outcome:
    seconds: float
    bound: float
    code: int | None
    left: list[int]
    broker_alive_during_drain: bool
    output: str

    @property
    def ok(self) -> bool:
        return self.code is not None and not self.left and self.seconds <= self.bound

    def line(self) -> str:
        state = "ok" if self.ok else "FAILED"
        return (
            f"{state}: gone in {self.seconds:.1f}s (bound {self.bound:.0f}s), exit {self.code}, "
            f"broker up while draining: {self.broker_alive_during_drain}, left: {self.left or 'none'}"
        )


def session_processes(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def stop_run(workdir: Path, *, exchanges: int, drain: float, grace: float, at_work: int = 5) -> Outcome:
    backlog = workdir / "backlog.jsonl"
    exchanges_file(backlog, workdir, exchanges, 20, 3, "stop")
    up = Up(workdir, ROOT, {"MEMSTREAM_DRAIN_SECONDS": str(drain)})
    bound = drain + grace + SLACK_SECONDS
    try:
        brokers = children(up.process.pid)
        up.publish(backlog)
        if at_work:
            up.wait_stored(at_work, 300)  # the pipeline is at work
        began = time.monotonic()
        os.killpg(up.process.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole foreground group
        broker_up = True
        while time.monotonic() - began < drain * 0.5:  # within the drain, the broker serves it
            broker_up = broker_up and all(alive(pid) for pid in brokers)
            time.sleep(0.1)
        deadline = began + bound + 30  # waited past the bound, to report how long it took
        while (session_processes(up.process.pid) or any(alive(p) for p in brokers)) and time.monotonic() < deadline:
            up.process.poll()
            time.sleep(0.1)
        seconds = time.monotonic() - began
        left = session_processes(up.process.pid) + [pid for pid in brokers if alive(pid)]
        try:
            code: int | None = up.process.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        return Outcome(seconds, bound, code, left, broker_up, up.log.read_text()[-4000:])
    finally:
        up.kill()


def main() -> None:
    from memstream.worker.drain import STOP_GRACE_SECONDS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--exchanges", type=int, default=300)
    parser.add_argument("--drain", type=float, default=5.0, help="MEMSTREAM_DRAIN_SECONDS")
    parser.add_argument("--at-work", type=int, default=5, help="memories stored before the SIGINT (0: none)")
    parser.add_argument("--json", action="store_true", help="end with each run's outcome, one JSON object a line")
    args = parser.parse_args()
    # Stopped from outside (a test's timeout), the run's `finally` still stops its `up`: without this,
    # SIGTERM ended the bench at once and left `up`, in a session of its own, running orphaned.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    passed, ended, seconds = 0, 0, []
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="stop-under-load-") as tmp:
            outcome = stop_run(
                Path(tmp), exchanges=args.exchanges, drain=args.drain, grace=STOP_GRACE_SECONDS, at_work=args.at_work
            )
        passed += outcome.ok
        ended += not outcome.left
        seconds.append(outcome.seconds)
        print(f"run {run}: {outcome.line()} (load {os.getloadavg()[0]:.2f})", flush=True)
        said = [line for line in outcome.output.splitlines() if line.startswith("memstream: stopped")]
        if said:  # where the stop's time went, as `up` says it
            print(f"  {said[-1]}", flush=True)
        if args.json:
            print(json.dumps(dataclasses.asdict(outcome)), flush=True)
        if not outcome.ok:
            print(outcome.output, file=sys.stderr)
    print(
        f"time to all gone: median {statistics.median(seconds):.1f}s, max {max(seconds):.1f}s "
        f"(drain bound {args.drain:.0f}s); every process ended in {ended} of {args.runs} runs"
    )
    print(f"{passed} of {args.runs} runs stopped every process within the bound")


if __name__ == "__main__":
    main()
