"""Start-up and shutdown: SIGINT at any moment of start-up stops everything and exits 0;
`/health` says ready only once the runtime file `memstream publish` needs is written."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from memstream.kafka.broker import free_port
from tests.support.chaos import ROOT, worker_env

pytestmark = [pytest.mark.e2e]


def up(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    env = worker_env("", "st")
    env.pop("MEMSTREAM_KAFKA_BOOTSTRAP")  # the embedded broker, started and stopped by `up`
    env |= {"MEMSTREAM_DATA_DIR": str(tmp_path / "data"), "MEMSTREAM_HTTP_PORT": str(port)}
    return subprocess.Popen(
        [sys.executable, "-m", "memstream.cli", "up"],
        env=env,
        cwd=ROOT,
        stdout=open(tmp_path / "up.out", "ab"),
        stderr=open(tmp_path / "up.log", "ab"),
    )


def started(tmp_path: Path, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while b"memstream: starting" not in (tmp_path / "up.out").read_bytes():
        assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "up.log").read_text()[-3000:]
        time.sleep(0.02)


def health(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def tansu_children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.parametrize("after", [0.0, 0.5, 1.5, 3.0, 6.0])
def test_sigint_at_any_moment_of_start_up_stops_everything(tmp_path: Path, after: float) -> None:
    port = free_port()
    process = up(tmp_path, port)
    try:
        started(tmp_path, process)  # Python has imported memstream
    except BaseException:
        process.kill()  # never leave a worker behind, even when the test fails (it went on running its broker)
        process.wait()
        raise
    time.sleep(after)
    children = tansu_children(process.pid)
    process.send_signal(signal.SIGINT)
    try:
        code = process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()  # never leave a worker behind, even when the test fails
        process.wait()
        raise
    assert code == 0, (tmp_path / "up.log").read_text()[-3000:]
    for child in children:  # the broker went with it
        assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text()
    assert not (tmp_path / "data" / "runtime.json").exists()


def test_ready_only_once_the_runtime_file_is_written(tmp_path: Path) -> None:
    port = free_port()
    process = up(tmp_path, port)
    runtime = tmp_path / "data" / "runtime.json"
    try:
        seen = set()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status = health(port)
            seen.add(status)
            if status == 200:
                assert json.loads(runtime.read_text())["ready"] is True
                break
            time.sleep(0.05)
        assert 200 in seen, (tmp_path / "up.log").read_text()[-3000:]
        live = urllib.request.urlopen(f"http://127.0.0.1:{port}/health/live", timeout=5)
        assert json.loads(live.read())["live"] is True
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()  # never leave a worker behind, even when the test fails
            process.wait()
            raise
        assert code == 0
