"""Does `memstream up` keep every acknowledged exchange however it is stopped (issue 35, Done when)?

    .venv/bin/python -m bench.faults.durable [--series 10] [--how kill-9-group,sigint-group,sigterm-up]
        [--llm] [--delay 0.5] [--exchanges 300] [--json]

Each run starts `up` (embedded default) on a fresh data dir, publishes ``--exchanges`` exchanges with
``memstream publish --file`` (acknowledged once it exits 0), stops `up` at a random instant 0-3 s
later -- kill -9 of its process group, SIGINT to the group, or SIGTERM to up alone -- starts it again
on the same data dir and counts the memories: lost, duplicated, unexpected. ``--llm``: LLM mode against
a fake Anthropic model that answers each call ``--delay`` seconds late. A series is one run of each
``--how``; tests/faults/test_durable_up.py and test_durable_up_signals.py run one of each in the suite
(tests.support.durable_up).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from tests.support.durable_up import Run, stopped_and_started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=10)
    parser.add_argument("--how", default="kill-9-group,sigint-group,sigterm-up")
    parser.add_argument("--llm", action="store_true", help="LLM mode with a slow fake model")
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the fake model takes per answer")
    parser.add_argument("--exchanges", type=int, default=300, help="published before the stop (60 sessions)")
    parser.add_argument("--json", action="store_true", help="one JSON object per run, then the totals")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for every memory after the restart")
    parser.add_argument(
        "--grace",
        type=float,
        default=300,
        help="when some are missing at --timeout, wait this long more: late, not lost",
    )
    parser.add_argument("--keep", type=Path, help="copy a run's work dir (up.log, data dir) here when it is not clean")
    args = parser.parse_args()
    # A timeout's or a service manager's SIGTERM must stop the run's `up` (a session of its own) too: as an
    # exit, it unwinds through tests.support.durable_up.Up, which stops it, as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    runs: list[Run] = []
    failed = 0
    for series in range(args.series):
        for how in args.how.split(","):
            with tempfile.TemporaryDirectory(prefix="durable-bench-") as tmp:
                try:
                    run = asyncio.run(
                        stopped_and_started(
                            Path(tmp),
                            how,
                            llm=args.llm,
                            delay=args.delay,
                            sessions=60,
                            exchanges=max(1, args.exchanges // 60),
                            timeout=args.timeout,
                            grace=args.grace,
                        )
                    )
                except Exception as exc:  # up did not start again, say: keep what shows why, go on
                    kept_at = ""
                    if args.keep is not None:
                        kept = args.keep / f"{how}{'-llm' if args.llm else ''}-failed-{Path(tmp).name}"
                        shutil.copytree(tmp, kept, ignore=shutil.ignore_patterns("*.lock"))
                        kept_at = str(kept)
                    failed += 1
                    print(json.dumps({"series": series, "how": how, "failed": repr(exc), "kept": kept_at}), flush=True)
                    continue
                if args.keep is not None and (run.late, run.lost, run.duplicated, run.unexpected) != (0, 0, 0, 0):
                    kept = args.keep / f"{how}{'-llm' if run.llm else ''}-{run.seed}"
                    shutil.copytree(tmp, kept, ignore=shutil.ignore_patterns("*.lock"))
                    run.log = str(kept / "up.log")
            runs.append(run)
            if args.json:
                print(json.dumps({"series": series, **run.as_dict()}), flush=True)
            else:
                print(
                    f"series {series} {how}{' llm' if run.llm else ''}: {run.stored} of {run.expected} stored,"
                    f" lost {run.lost}, late {run.late}, duplicated {run.duplicated}, unexpected {run.unexpected}"
                    f" ({run.seconds:.0f} s, seed {run.seed})",
                    flush=True,
                )
    totals = {
        "runs": len(runs),
        "lost": sum(r.lost for r in runs),
        "late": sum(r.late for r in runs),
        "duplicated": sum(r.duplicated for r in runs),
        "unexpected": sum(r.unexpected for r in runs),
        "clean_runs": sum(1 for r in runs if (r.lost, r.duplicated, r.unexpected) == (0, 0, 0)),
        "failed_runs": failed,
    }
    print(json.dumps(totals) if args.json else f"totals: {totals}", flush=True)


if __name__ == "__main__":
    main()
