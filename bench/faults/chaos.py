"""Fault injection, heavy: ``make chaos`` kills, poisons and starves real workers and prints the figures.

The harness (the worker, the external broker, the workload, the runs) is test support code,
:mod:`tests.support.chaos`; ``tests/faults`` runs small versions of the same scenarios.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import uuid
from pathlib import Path

from tests.support.chaos import Outcome, kill_run, outage_run, poison_run


def main() -> None:
    parser = argparse.ArgumentParser(description="memstream fault injection (make chaos)")
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--exchanges", type=int, default=10, help="per session (records = 2 x sessions x this)")
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--projects", type=int, default=None, help="projects the sessions share (default: one each)")
    parser.add_argument("--rate", type=float, default=None, help="turns/s published (default: 8 s of feed per kill)")
    parser.add_argument(
        "--kill-every",
        type=float,
        default=None,
        help="mean seconds between kills, at random instants (default: 1-4 s after up)",
    )
    parser.add_argument("--bare-keys", action="store_true", help="turns keyed by session id alone (a host's producer)")
    parser.add_argument("--poison", type=int, default=10_000, help="poison records (0: skip)")
    parser.add_argument("--outage", type=float, default=300.0, help="LLM outage seconds (0: skip)")
    parser.add_argument("--outage-sessions", type=int, default=60)
    parser.add_argument("--workdir", type=Path, default=Path(".memstream") / "chaos")
    parser.add_argument("--json", action="store_true", help="each kill run's outcome as one JSON object too")
    args = parser.parse_args()
    per_run: list[Outcome] = []
    for run in range(args.runs):
        workdir = args.workdir / f"kill-{run}-{uuid.uuid4().hex[:6]}"
        outcome = asyncio.run(
            kill_run(
                workdir,
                sessions=args.sessions,
                exchanges=args.exchanges,
                kills=args.kills,
                seed=run,
                timeout=3600,
                projects=args.projects,
                rate=args.rate,
                kill_every=args.kill_every,
                bare_keys=args.bare_keys,
            )
        )
        per_run.append(outcome)
        print(f"kill -9 run {run}: {outcome.render()}", flush=True)
        if args.json:
            fields = {k: v for k, v in dataclasses.asdict(outcome).items() if k != "notes"}
            notes = {k: v for k, v in outcome.notes.items() if k != "trace"}
            print(json.dumps({"run": run, **fields, "notes": notes}, default=str), flush=True)
    if len(per_run) > 1:
        lost = [o.lost for o in per_run]
        duplicated = [o.duplicated for o in per_run]
        print(
            f"{len(per_run)} runs of {args.kills} kills, {sum(o.expected for o in per_run)} exchanges: "
            f"lost per run {lost}, duplicated per run {duplicated}",
            flush=True,
        )
    if args.poison:
        workdir = args.workdir / f"poison-{uuid.uuid4().hex[:6]}"
        outcome = asyncio.run(poison_run(workdir, poison=args.poison, sessions=50, exchanges=10, timeout=3600))
        print(f"poison: {outcome.render()}", flush=True)
    if args.outage:
        workdir = args.workdir / f"outage-{uuid.uuid4().hex[:6]}"
        outcome = asyncio.run(outage_run(workdir, outage=args.outage, sessions=args.outage_sessions, timeout=3600))
        print(f"LLM outage: {outcome.render()}", flush=True)


if __name__ == "__main__":
    main()
