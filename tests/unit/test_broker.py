"""The embedded Tansu broker: start, readiness, stop, and no orphan after the parent is SIGKILLed.

Integration-level but fast: each broker is up in well under a second on loopback.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memstream.kafka.broker import EmbeddedBroker, free_port, metadata_ready

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_SECONDS = 20.0


def wait_until(condition: Callable[[], bool], timeout: float = DEADLINE_SECONDS, interval: float = 0.05) -> bool:
    """Poll ``condition`` until it holds or the deadline passes; True if it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


def process_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs.

    A zombie counts as gone: it has exited and only waits for whoever inherited it to reap
    it, which in a container may be a PID 1 that never does.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_metadata_ready_on_a_closed_port_is_false() -> None:
    port = free_port()
    assert metadata_ready("127.0.0.1", port, timeout=0.5) is False


def test_free_port_is_a_usable_loopback_port() -> None:
    port = free_port()
    assert 1024 <= port <= 65535


def test_embedded_broker_runs_answers_and_stops() -> None:
    broker = EmbeddedBroker()
    assert broker.pid is None
    broker.start()
    pid = broker.pid
    try:
        assert pid is not None
        assert broker.host == "127.0.0.1"
        assert broker.bootstrap == f"127.0.0.1:{broker.port}"
        assert metadata_ready(broker.host, broker.port) is True
        os.kill(pid, 0)  # running
    finally:
        broker.stop()
    assert broker.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert metadata_ready(broker.host, broker.port) is False
    broker.stop()  # a second stop is harmless


def test_context_manager_stops_the_broker() -> None:
    with EmbeddedBroker() as broker:
        pid, port = broker.pid, broker.port
        assert pid is not None
        assert metadata_ready("127.0.0.1", port) is True
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert metadata_ready("127.0.0.1", port) is False


_PARENT = textwrap.dedent(
    """
    import time
    from memstream.kafka.broker import EmbeddedBroker

    broker = EmbeddedBroker().start()
    print(broker.pid, broker.port, flush=True)
    time.sleep(600)
    """
)


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            return proc.stdout.readline()
        if proc.poll() is not None:
            break
    raise AssertionError(f"the parent printed no broker pid (exit status {proc.poll()})")


def test_broker_dies_when_its_parent_is_sigkilled() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    broker_pid = 0
    try:
        broker_pid, port = (int(x) for x in _read_line(parent, DEADLINE_SECONDS).split())
        assert metadata_ready("127.0.0.1", port) is True
        assert not process_gone(broker_pid)

        os.kill(parent.pid, signal.SIGKILL)
        assert parent.wait(timeout=DEADLINE_SECONDS) == -signal.SIGKILL

        assert wait_until(lambda: process_gone(broker_pid)), f"broker {broker_pid} outlived its parent"
        assert wait_until(lambda: not metadata_ready("127.0.0.1", port, timeout=0.2))
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if broker_pid and not process_gone(broker_pid):
            os.kill(broker_pid, signal.SIGKILL)
