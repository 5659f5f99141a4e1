"""A lever measured beside the unchanged code in one run: the CPU per turn of two trees, alternately.

    .venv/bin/python -m bench.perf.ab --a HEAD~1 [--b .] [--rounds 3] [--sessions 100] [--turns 5]

Each tree runs ``bench.perf.pipeline.run`` (instant fake LLM, fake embedder) in a process of its own
(:func:`bench.perf.baseline.pipeline`); ``--a`` and ``--b`` are git revisions of this clone, or ``.`` for
the working tree as it is. The trees take turns, and the first of each round alternates: on this
machine the first run of a pair is repeatedly the slower. Prints every run, then each tree's
median and range, and B's median as a ratio of A's.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from bench.perf import baseline


@contextmanager
def tree(rev: str) -> Iterator[Path]:
    """``.``: this clone's working tree; else the revision unpacked (:func:`bench.perf.baseline.checkout`)."""
    if rev == ".":
        yield baseline.ROOT
        return
    with baseline.checkout(rev) as path:
        yield path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="the unchanged code: a revision, or . for the working tree")
    parser.add_argument("--b", default=".", help="the lever: a revision, or . for the working tree (default)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    cpu: dict[str, list[float]] = {"a": [], "b": []}
    rate: dict[str, list[float]] = {"a": [], "b": []}
    with ExitStack() as stack:
        trees = {"a": stack.enter_context(tree(args.a)), "b": stack.enter_context(tree(args.b))}
        print(f"A = {args.a}, B = {args.b}; load {os.getloadavg()}", flush=True)
        for n in range(args.rounds):
            for side in ("a", "b") if n % 2 == 0 else ("b", "a"):
                r = baseline.pipeline(trees[side], sessions=args.sessions, turns_per_session=args.turns)
                if not r["order_kept"]:
                    raise SystemExit(f"{side.upper()} did not keep the order per key: {r}")
                cpu[side].append(r["cpu_ms_per_turn"])
                rate[side].append(r["turns_per_s"])
                print(
                    f"round {n + 1} {side.upper()}: {r['cpu_ms_per_turn']:.2f} ms CPU/turn, "
                    f"{r['turns_per_s']:.1f} turns/s, {r['events_per_turn']:.1f} events/turn",
                    flush=True,
                )
    for side, rev in (("a", args.a), ("b", args.b)):
        runs = cpu[side]
        print(
            f"{side.upper()} ({rev}): {statistics.median(runs):.2f} ms CPU/turn ({min(runs):.2f}–{max(runs):.2f}), "
            f"{statistics.median(rate[side]):.1f} turns/s"
        )
    ratio = statistics.median(cpu["b"]) / statistics.median(cpu["a"])
    print(f"B / A: ×{ratio:.2f} CPU per turn; load at the end {os.getloadavg()}")


if __name__ == "__main__":
    main()
