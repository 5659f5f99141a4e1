"""Where a turn's CPU goes: py-spy samples the overhead run, and the samples are grouped by stage.

    .venv/bin/python -m bench.perf.turn_budget [--sessions 100] [--turns 5] [--rate 250]

Runs ``bench.perf.pipeline.run`` (instant fake LLM, fake embedder) under ``py-spy record --gil``: only
samples of the thread holding the GIL count, so the figures are CPU spent in this interpreter, not
waiting. Start-up is left out (only samples under the run's event loop or a worker thread count,
and not those opening stores or starting the app). Each sample goes to the first group that
claims it, in this order:

* ``extract: LLM call through the SDK``: the Anthropic SDK and its HTTP client, for the call the
  extract stage makes (the fake model answers at once, in a process of its own);
* ``stage code: <stage>``: an agent's own code, with the sends and table writes it makes;
* ``store calls on the shard thread``: Qdrant edge calls and their payload conversion;
* ``bench driver``: the publisher and the memory-updated follower (an agent host's and a
  downstream service's share, which run in this process only because the bench puts them here);
* ``Faust and aiokafka``: fetching, dispatching to streams, acks, commits and the producer;
* ``asyncio and the rest``.

The ms per turn of each group is its share of the samples times the run's CPU per turn. py-spy is
in the ``bench`` extra (``make bench`` installs it); sampling another process needs ptrace, which
a child of this process allows.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

#: The run py-spy samples; prints the CPU per turn on its last line.
_RUN = """
import asyncio, logging, sys
from bench.perf import pipeline
logging.basicConfig(level=logging.ERROR)
r = asyncio.run(pipeline.run(sessions=int(sys.argv[1]), turns_per_session=int(sys.argv[2]), llm_latency=0.0,
                             embedder="fake"))
print("turn-budget", r.cpu_ms_per_turn, r.turns_per_s)
"""
#: Frames of start-up and shut-down work, not of a turn.
_SETUP = ("runner.py", "build_providers", "_open_shard", "records_written", "open_payload_shard", "EdgeBacked.close")
_AGENT = re.compile(r"agents/(\w+)\.py")
_FRAMEWORK = ("faust/", "aiokafka/", "mode/")
_PLUMBING = {"base", "agent", "manager", "__init__"}


def group(stack: str) -> str | None:
    """The budget group of one sampled stack (frames root first, ``;``-separated); None: not a turn's."""
    if "run_until_complete" not in stack and "concurrent/futures/thread.py" not in stack:
        return None
    if any(frame in stack for frame in _SETUP):
        return None
    if "anthropic/" in stack and "_complete_once" in stack:
        return "extract: LLM call through the SDK"
    for frame in reversed(stack.split(";")):
        found = _AGENT.search(frame)
        if found and found.group(1) not in _PLUMBING:
            return f"stage code: {found.group(1)}"
    if "concurrent/futures/thread.py" in stack or "memstream/store/" in stack:
        return "store calls on the shard thread"
    if "bench/perf/pipeline.py" in stack:
        return "bench driver (publish, follow memory-updated)"
    if any(name in stack for name in _FRAMEWORK):
        return "Faust and aiokafka (fetch, dispatch, ack, produce)"
    return "asyncio and the rest"


def budget(raw: str) -> Counter[str]:
    """Samples per group, from py-spy's ``--format raw`` output (``stack count`` per line)."""
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        name = group(stack) if stack and count.isdigit() else None
        if name is not None:
            counts[name] += int(count)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--rate", type=int, default=250, help="samples per second")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise SystemExit("py-spy is not installed: pip install -e '.[bench]'")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "samples.txt"
        run = [sys.executable, "-c", _RUN, str(args.sessions), str(args.turns)]
        done = subprocess.run(
            [spy, "record", "--gil", "--format", "raw", "--rate", str(args.rate), "--output", str(out), "--", *run],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        if done.returncode != 0 or not out.exists():
            raise SystemExit(f"py-spy failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        counts = budget(out.read_text())
    # py-spy prints its own lines to stdout too: the run's is the one it tagged.
    result = next(line for line in done.stdout.splitlines() if line.startswith("turn-budget "))
    cpu_ms, rate = (float(x) for x in result.split()[1:])
    total = sum(counts.values())
    print(f"{args.sessions} sessions × {args.turns} turns: {rate:.1f} turns/s, {cpu_ms:.2f} ms CPU per turn")
    print(f"{total} samples of the GIL's holder during the run, grouped:")
    for name, n in counts.most_common():
        print(f"  {n / total * 100:5.1f}%  {n / total * cpu_ms:5.2f} ms/turn  {name}")


if __name__ == "__main__":
    main()
