"""A coding CLI's Stop hook, as `memstream install` wrote it, with `memstream up` running: the hook hands
the payload to `up` and exits, and `up` reads the session file and sends its turns to the broker."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstream.capture.state import CaptureState
from memstream.kafka.broker import free_port
from tests.support.group import GROUP_ENV

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SESSION = ROOT / "tests" / "fixtures" / "capture" / "claude" / "written_session.jsonl"
DEADLINE = 120.0


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_", "VOYAGE_"))}
    (tmp_path / "home").mkdir()
    return {
        **clean,
        "HOME": str(tmp_path / "home"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "MEMSTREAM_DATA_DIR": str(tmp_path / "data"),
        "MEMSTREAM_HTTP_PORT": str(free_port()),
        "MEMSTREAM_TOPIC_PREFIX": f"hook{uuid.uuid4().hex[:8]}",
        "MEMSTREAM_PARTITIONS": "2",
        **GROUP_ENV,
        "PYTHONPATH": str(ROOT),
    }


@pytest.fixture
def up(env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "memstream.cli", "up"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_for(check: object, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_the_installed_stop_hook_hands_off_to_up_which_sends_the_turns(
    env: dict[str, str], tmp_path: Path, up: subprocess.Popen[bytes]
) -> None:
    data = tmp_path / "data"
    done = subprocess.run(
        [sys.executable, "-m", "memstream.cli", "install", "claude-code"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    settings = json.loads((tmp_path / "home" / ".claude" / "settings.json").read_text())
    command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert command.startswith(str(data / "hook-bin" / "memstream"))

    wait_for(lambda: (data / "hook-queue" / "taker.pid").exists(), "up to take the hooks' notes")
    session = tmp_path / "session.jsonl"
    shutil.copy(SESSION, session)
    payload = json.dumps({"session_id": "s", "transcript_path": str(session), "hook_event_name": "Stop"})
    hook = subprocess.run(["sh", "-c", command], input=payload, capture_output=True, text=True, env=env, timeout=60)
    assert (hook.returncode, hook.stdout, hook.stderr) == (0, "", "")

    def read_and_sent() -> bool:
        if not (data / "capture.sent").exists():
            return False
        with CaptureState.open(data / "capture.db", readonly=True) as state:
            return state.checkpoint(str(session)) is not None and state.spool_size() == 0

    wait_for(read_and_sent, "up to read the session file and send its turns")
    assert (data / "hook-runs" / "claude-code.Stop").exists()
    assert [p.name for p in (data / "hook-queue").iterdir()] == ["taker.pid"]
