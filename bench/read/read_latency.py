"""End-to-end latency of the read commands: `memstream block` and `memstream search`, each run as a
user runs it (a new Python process), against a running memstream. Target: p95 under 300 ms.

Starts its own `memstream up` (embedded broker, raw mode) in a temporary data dir, stores a few dozen
memories through POST /memories, then times each command ``--runs`` times. Prints p50/p95 and the load
average, since the machine's load moves these figures.

    .venv/bin/python -m bench.read.read_latency [--runs 30]
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
import urllib.request
import uuid
from pathlib import Path

from memstream.auth import read_token
from memstream.kafka.broker import free_port

ROOT = Path(__file__).resolve().parents[2]
FACTS = [
    "The API is written in Go and served behind nginx",
    "Payments go through Stripe with idempotency keys on every charge",
    "The staging database runs on port 6543",
    "Deploys happen from the main branch through GitHub Actions",
    "The frontend uses React 19 with Vite",
    "Background jobs run on Celery with Redis as the broker",
    "Run the tests with uv run pytest -q from the repo root",
    "Auth uses JWT stored in httpOnly cookies",
    "The checkout page crashed on a missing currency; fixed by defaulting to EUR",
    "Feature flags live in LaunchDarkly",
] * 3


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def start(env: dict[str, str], cwd: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "memstream.cli", "up"],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if line.startswith("Press Ctrl-C"):
            return process
    process.kill()
    raise SystemExit("memstream up did not start")


def seed(api: str, project: Path, token: str) -> None:
    # As the one local user: the token `memstream up` created on first start, which the CLI uses too.
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    for i, fact in enumerate(FACTS):
        body = json.dumps({"text": f"{fact} (note {i})", "project": str(project)}).encode()
        request = urllib.request.Request(f"{api}/memories", data=body, headers=headers)
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()


def time_command(env: dict[str, str], cwd: Path, args: list[str], runs: int, stdin: str = "") -> list[float]:
    took = []
    for _ in range(runs):
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "memstream.cli", *args], env=env, cwd=cwd, capture_output=True, input=stdin.encode()
        )
        took.append((time.perf_counter() - began) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"memstream {' '.join(args)} failed: {done.stderr.decode()}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_", "VOYAGE_"))},
            "MEMSTREAM_DATA_DIR": str(Path(tmp) / "data"),
            "MEMSTREAM_HTTP_PORT": str(free_port()),
            "MEMSTREAM_TOPIC_PREFIX": f"bench{uuid.uuid4().hex[:8]}",
            "MEMSTREAM_USER": "bench@example.com",
            "PYTHONPATH": str(ROOT),
        }
        down = {**env, "MEMSTREAM_HTTP_PORT": str(free_port())}
        event = json.dumps({"hook_event_name": "SessionStart", "source": "startup", "cwd": str(project)})
        took = time_command(down, project, ["hook", "claude-code"], args.runs, stdin=event)
        print(f"load average: {os.getloadavg()[0]:.2f} (cores: {os.cpu_count()})")
        print(f"hook with memstream down: p50 {statistics.median(took):.0f} ms, p95 {percentile(took, 0.95):.0f} ms")
        up = start(env, project)
        try:
            token = read_token(Path(env["MEMSTREAM_DATA_DIR"]) / "local-token")
            seed(f"http://127.0.0.1:{env['MEMSTREAM_HTTP_PORT']}", project, token)
            commands = {
                "memstream block": ["block"],
                "memstream block -q": ["block", "-q", "how do we deploy"],
                "memstream search": ["search", "which database port does staging use"],
            }
            time_command(env, project, ["block"], 2)  # warm the page cache and the API
            print(f"load average before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (cores: {os.cpu_count()})")
            print(f"{'command':<22} {'p50 ms':>8} {'p95 ms':>8} {'min ms':>8}  runs")
            for name, argv in commands.items():
                took = time_command(env, project, argv, args.runs)
                p50, p95 = statistics.median(took), percentile(took, 0.95)
                print(f"{name:<22} {p50:>8.0f} {p95:>8.0f} {min(took):>8.0f}  {len(took)}")
            print(f"load average after: {os.getloadavg()[0]:.2f}")
        finally:
            up.terminate()
            try:
                up.wait(30)
            except subprocess.TimeoutExpired:
                up.kill()


if __name__ == "__main__":
    main()
