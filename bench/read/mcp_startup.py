"""How long ``memstream mcp`` takes to answer ``initialize``, and then ``tools/list`` (issue 25).

    .venv/bin/python -m bench.read.mcp_startup [--runs 20] [--code DIR]

Each run starts ``python -m memstream.cli mcp`` as a coding CLI does (stdio, a fresh process), writes
the ``initialize`` request at once and times the answer from the process's start; then sends
``notifications/initialized`` and ``tools/list`` and times that answer too. The load is whatever the
machine carries: the load average is printed beside the figures. ``--code`` measures another
checkout's package (the base commit's, for the comparison). Target: initialize within 500 ms, p95.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"roots": {"listChanged": True}},
        "clientInfo": {"name": "bench", "version": "0"},
    },
}
TARGET_MS = 500.0


def one_run(code: Path, cwd: Path) -> tuple[float, float]:
    """(ms to the initialize answer, ms to the tools/list answer), both from the process's start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    env.update({"PYTHONPATH": str(code), "MEMSTREAM_DATA_DIR": str(cwd / "data"), "MEMSTREAM_USER": "dev@example.com"})
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "memstream.cli", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=cwd,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
        child.stdin.flush()
        answer = json.loads(child.stdout.readline())
        initialized = (time.perf_counter() - start) * 1000
        if answer.get("id") != 1 or "result" not in answer:
            raise RuntimeError(f"initialize failed: {answer}")
        child.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode() + b"\n")
        child.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).encode() + b"\n")
        child.stdin.flush()
        listed = json.loads(child.stdout.readline())
        if listed.get("id") != 2 or not listed.get("result", {}).get("tools"):
            raise RuntimeError(f"tools/list failed: {listed}")
        return initialized, (time.perf_counter() - start) * 1000
    finally:
        child.stdin.close()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose memstream to start")
    args = parser.parse_args()
    init_ms: list[float] = []
    list_ms: list[float] = []
    loads: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.runs):
            loads.append(os.getloadavg()[0])
            first, second = one_run(args.code, Path(tmp))
            init_ms.append(first)
            list_ms.append(second)
    print(
        f"code: {args.code}  runs: {args.runs}  "
        f"load average (1 min) {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores"
    )
    print(
        f"initialize: median {statistics.median(init_ms):.0f} ms, p95 {p95(init_ms):.0f} ms "
        f"(target p95 <= {TARGET_MS:.0f} ms)"
    )
    print(
        f"tools/list: median {statistics.median(list_ms):.0f} ms, p95 {p95(list_ms):.0f} ms (from the process's start)"
    )


if __name__ == "__main__":
    main()
