"""`memstream up` starts its embedded broker afresh above MEMSTREAM_BROKER_MAX_MB and goes on serving
(memstream.worker.recycle; tests/e2e/test_recycle_e2e.py covers what is carried over): the same
bootstrap, a new broker process, every exchange before and after searchable, a clean stop."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memstream.kafka.broker import free_port
from memstream.worker.recycle import CHECK_SECONDS
from tests.faults.test_startup import health, tansu_children
from tests.support.chaos import ROOT, worker_env

pytestmark = [pytest.mark.e2e]


def cli(tmp_path: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "memstream.cli", *args], env=env, cwd=tmp_path, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode()


def eventually(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def test_up_starts_its_broker_afresh_above_the_bound_and_goes_on_serving(tmp_path: Path) -> None:
    port, project = free_port(), tmp_path / "project"
    project.mkdir()
    env = worker_env("", "fresh")
    env.pop("MEMSTREAM_KAFKA_BOOTSTRAP")  # the embedded broker
    env.pop("MEMSTREAM_API_OPEN")  # the CLI publishes with up's local token, as a user's does
    env |= {"MEMSTREAM_USER": "dev@example.com"}
    env |= {"MEMSTREAM_DATA_DIR": str(tmp_path / "data"), "MEMSTREAM_HTTP_PORT": str(port)}
    env |= {"MEMSTREAM_BROKER_MAX_MB": "1"}  # Tansu holds more than that from the start
    out = tmp_path / "up.out"
    with open(out, "ab") as stdout, open(tmp_path / "up.log", "ab") as stderr:  # the child keeps its own copies
        process = subprocess.Popen(
            [sys.executable, "-m", "memstream.cli", "up"], env=env, cwd=ROOT, stdout=stdout, stderr=stderr
        )
    try:
        eventually(lambda: health(port) == 200, 90, "memstream up ready")
        bootstrap = json.loads((tmp_path / "data" / "runtime.json").read_text())["bootstrap"]
        [broker] = tansu_children(process.pid)

        def say(session: str, role: str, text: str) -> None:
            cli(tmp_path, env, "publish", "--session", session, "--project", str(project), "--role", role, text)

        say("s1", "user", "Which port does the API use?")
        say("s1", "assistant", "Port 8431, set in api.toml.")
        # The first look at the broker comes a check interval after start, then at a quiet moment.
        eventually(lambda: b"broker was started afresh on" in out.read_bytes(), CHECK_SECONDS + 60, "the fresh start")
        eventually(lambda: health(port) == 200, 60, "memstream up ready again")
        assert json.loads((tmp_path / "data" / "runtime.json").read_text())["bootstrap"] == bootstrap
        [fresh] = tansu_children(process.pid)
        assert fresh != broker

        say("s1", "user", "Which database?")
        say("s1", "assistant", "Postgres 16 on the db host.")

        def found() -> bool:
            answer = cli(tmp_path, env, "search", "--project", str(project), "--json", "database port")
            return "8431" in answer and "Postgres 16" in answer

        eventually(found, 60, "both exchanges searchable")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    assert code == 0, (tmp_path / "up.log").read_text()[-3000:]
    assert tansu_children(process.pid) == []
