"""Hook latency: ``memstream hook claude-code`` (a Stop hook) from start to exit, as a coding CLI waits for it.

    .venv/bin/python -m bench.perf.hook_latency [--hooks 60] [--sessions 60 --turns 20] [--hook-pythonpath DIR]

Three conditions, each timed ``--hooks`` times, every hook after two new turns were appended to a real
Claude Code session file (copies of ``tests/fixtures/capture/claude`` with fresh ids):

- ``up down``: no ``memstream up`` on the data dir: the hook reads the file and commits the turns to the
  spool itself;
- ``up running and ingesting``: a real ``memstream up`` process (embedded broker, local store, raw mode)
  on the data dir while ``memstream ingest`` pushes a backlog of ``--sessions`` files through it (the spool,
  the broker, the pipeline and the embedder all busy): the hook hands off to ``up``;
- beside each, ``python -c pass`` started the same way: the floor of any Python hook on this machine now.

Each condition times the hook as ``memstream install`` writes it (the shell script in the data dir,
which hands off to ``up`` or runs the Python hook) and the Python hook (``memstream hook``) itself.

It prints p50 and p95 per condition with the load average. Target (issue 24): p95 <= 150 ms with ``up``
running and ingesting. ``--hook-pythonpath`` runs the hooks from another source tree (say the previous
commit's, from ``git archive``) against the same ``up``, to measure a before and after on the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.perf.capture import append_turns, build_backlog, percentile

ROOT = Path(__file__).resolve().parents[2]
TARGET_P95_MS = 150.0
#: Variables that would make `up` call a hosted model: the benchmark runs raw mode, offline.
PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "XAI_API_KEY")


def time_process(argv: list[str], env: dict[str, str], stdin: str = "") -> float:
    began = time.perf_counter()
    subprocess.run(argv, input=stdin, text=True, env=env, capture_output=True, timeout=120, check=False)
    return (time.perf_counter() - began) * 1000


def time_hooks(
    files: list[Path], count: int, commands: dict[str, list[str]], env: dict[str, str]
) -> dict[str, list[float]]:
    """Start-to-exit ms of each command per round, interleaved so that all see the same load; every
    round first appends two turns to a session file. ``pass`` rounds run ``python -c pass``."""
    took: dict[str, list[float]] = {name: [] for name in [*commands, "python -c pass"]}
    for n in range(count):
        path = files[n % len(files)]
        append_turns(path, n)
        payload = json.dumps(
            {"session_id": "s", "transcript_path": str(path), "cwd": "/bench", "hook_event_name": "Stop"}
        )
        for name, argv in commands.items():
            took[name].append(time_process(argv, env, payload))
        took["python -c pass"].append(time_process([sys.executable, "-c", "pass"], env))
    return took


def hook_commands(data_dir: Path, *, script: bool) -> dict[str, list[str]]:
    """The hook as `memstream install` writes it (the shell hand-off script), and the Python hook itself."""
    real = str(Path(sys.executable).with_name("memstream"))
    commands = {"memstream hook (python)": [real, "hook", "claude-code", "--data-dir", str(data_dir)]}
    if script:
        from memstream.capture.handoff import hook_script

        path = data_dir / "hook-bin" / "memstream"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(hook_script(real, data_dir))
        path.chmod(0o755)
        commands["installed hook (script)"] = [str(path), "hook", "claude-code", "--data-dir", str(data_dir)]
    return commands


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(values), "p95_ms": percentile(values, 95), "runs": len(values)}


def start_up(data_dir: Path, env: dict[str, str], timeout: float) -> subprocess.Popen[bytes]:
    """A real `memstream up` on ``data_dir``; returns once its runtime file says it is ready."""
    from memstream.kafka.broker import free_port

    up_env = {
        **env,
        "MEMSTREAM_DATA_DIR": str(data_dir),
        "MEMSTREAM_HTTP_PORT": str(free_port()),
        "MEMSTREAM_TOPIC_PREFIX": f"bench{uuid.uuid4().hex[:8]}",
    }
    log = (data_dir.parent / "up.log").open("wb")
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("memstream")), "up"],
        env=up_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    runtime = data_dir / "runtime.json"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"memstream up exited ({process.returncode}); see {data_dir.parent / 'up.log'}")
        try:
            if json.loads(runtime.read_text()).get("ready"):
                return process
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.2)
    stop_up(process)
    raise RuntimeError(f"memstream up was not ready within {timeout:.0f}s")


def stop_up(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def ingest_load(backlog: Path, data_dir: Path, env: dict[str, str], stop: threading.Event) -> int:
    """`memstream ingest` over the backlog, again with fresh files each round, until ``stop``: the
    spool, broker, pipeline and embedder stay busy. Returns the rounds run."""
    rounds = 0
    while not stop.is_set():
        fresh = backlog.parent / f"round{rounds}"
        shutil.copytree(backlog, fresh)
        # New session and message ids: every round is new work for the pipeline, not duplicates.
        for path in fresh.rglob("*.jsonl"):
            session = str(uuid.uuid4())
            text = path.read_text()
            old = json.loads(text.splitlines()[0]).get("sessionId", "")
            path.write_text(text.replace(old, session) if old else text)
        subprocess.run(
            [str(Path(sys.executable).with_name("memstream")), "ingest", str(fresh)],
            env={**env, "MEMSTREAM_DATA_DIR": str(data_dir)},
            capture_output=True,
            timeout=900,
            check=False,
        )
        rounds += 1
    return rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hooks", type=int, default=60, help="hooks timed per condition")
    parser.add_argument("--sessions", type=int, default=60, help="session files in the ingest backlog")
    parser.add_argument("--turns", type=int, default=20, help="turns per backlog session")
    parser.add_argument("--start-timeout", type=float, default=300.0, help="longest wait for `memstream up`")
    parser.add_argument("--hook-pythonpath", help="run the hooks from this source tree (a before/after)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="memstream-bench-hooks-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_") and k not in PROVIDER_KEYS}
    hook_env = dict(env)
    if args.hook_pythonpath:
        hook_env["PYTHONPATH"] = str(Path(args.hook_pythonpath).resolve())
    live = work / "live"
    build_backlog(live, 8, 10, real=True)
    files = sorted(live.rglob("*.jsonl"))
    backlog = work / "backlog" / "sessions"
    build_backlog(backlog, args.sessions, args.turns, real=True)
    figures: dict[str, Any] = {"hooks_from": args.hook_pythonpath or "this tree"}
    script = not args.hook_pythonpath  # an older tree has no hook script
    try:
        down_dir = work / "down"
        took = time_hooks(files, args.hooks, hook_commands(down_dir, script=script), hook_env)
        figures["up down"] = {name: summary(values) for name, values in took.items()}
        figures["up down"]["load average"] = os.getloadavg()[0]

        data_dir = work / "data"
        data_dir.mkdir()
        up = start_up(data_dir, env, args.start_timeout)
        stop = threading.Event()
        rounds: list[int] = []
        loader = threading.Thread(target=lambda: rounds.append(ingest_load(backlog, data_dir, env, stop)))
        try:
            loader.start()
            time.sleep(5)  # the first ingest round is spooling and publishing: up is busy
            took = time_hooks(files, args.hooks, hook_commands(data_dir, script=script), hook_env)
            figures["up running and ingesting"] = {name: summary(values) for name, values in took.items()}
            figures["up running and ingesting"]["load average"] = os.getloadavg()[0]
        finally:
            stop.set()
            loader.join()
            stop_up(up)
        figures["ingest rounds during the hooks"] = rounds[0] if rounds else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(figures, indent=2, default=lambda v: round(v, 1)))
    for condition in ("up down", "up running and ingesting"):
        row = figures[condition]
        parts = [
            f"{name} p50 {row[name]['p50_ms']:.0f} / p95 {row[name]['p95_ms']:.0f} ms"
            for name in row
            if name != "load average"
        ]
        print(f"{condition} (load average {row['load average']:.1f}): " + "; ".join(parts))
    running = figures["up running and ingesting"]
    hook = running.get("installed hook (script)") or running["memstream hook (python)"]
    verdict = "met" if hook["p95_ms"] <= TARGET_P95_MS else "missed"
    print(f"target: hook p95 <= {TARGET_P95_MS:.0f} ms with up running and ingesting: {verdict}")


if __name__ == "__main__":
    main()
