"""Issue 35.7: starting the embedded broker afresh is invisible to the API. A query loop against
``/search`` on a real `memstream up` (embedded default, raw mode) runs through a forced fresh start
(MEMSTREAM_BROKER_MAX_MB=1: Tansu holds more than that from the start) and sees no refused or
failed request; `memstream publish` run over and over from the moment the fresh start begins waits for
the fresh broker instead of failing."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from memstream.kafka.broker import free_port
from memstream.worker.recycle import CHECK_SECONDS
from tests.e2e.test_up_fresh_broker_e2e import cli, eventually
from tests.faults.test_startup import health
from tests.support.chaos import ROOT, worker_env

pytestmark = pytest.mark.e2e


def test_a_search_loop_sees_no_failed_request_through_a_broker_fresh_start(tmp_path: Path) -> None:
    port, project = free_port(), tmp_path / "project"
    project.mkdir()
    env = worker_env("", "invisible")
    env.pop("MEMSTREAM_KAFKA_BOOTSTRAP")  # the embedded broker
    env |= {"MEMSTREAM_USER": "dev@example.com", "MEMSTREAM_BROKER_MAX_MB": "1"}
    env |= {"MEMSTREAM_DATA_DIR": str(tmp_path / "data"), "MEMSTREAM_HTTP_PORT": str(port)}
    out = tmp_path / "up.out"
    with open(out, "ab") as stdout, open(tmp_path / "up.log", "ab") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "memstream.cli", "up"], env=env, cwd=ROOT, stdout=stdout, stderr=stderr
        )
    failures: list[str] = []
    answered = [0]
    done = threading.Event()
    url = f"http://127.0.0.1:{port}/search?" + urllib.parse.urlencode({"q": "port", "project": str(project)})

    def ask() -> None:
        while not done.is_set():
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    response.read()
                    answered[0] += 1
            except urllib.error.HTTPError as error:
                failures.append(f"HTTP {error.code}")
            except OSError as error:  # refused, reset, timed out
                failures.append(repr(error))
            done.wait(0.1)

    published: list[str] = []

    def publish() -> None:  # a publish during the fresh start waits for it, never "not running"
        while not done.is_set() and b"starting the embedded broker afresh" not in out.read_bytes():
            done.wait(0.05)  # publishing before would keep the quiet moment from coming
        while not done.is_set():
            n = len(published) + len(failures)
            args = ["publish", "--session", "s2", "--project", str(project), "--role", "user", f"turn {n}"]
            try:
                published.append(cli(tmp_path, env, *args))
            except AssertionError as error:
                failures.append(f"publish: {str(error)[-300:]}")
            done.wait(0.2)

    asker = threading.Thread(target=ask, daemon=True)
    publisher = threading.Thread(target=publish, daemon=True)
    try:
        eventually(lambda: health(port) == 200, 90, "memstream up ready")
        cli(tmp_path, env, "publish", "--session", "s1", "--project", str(project), "--role", "user", "Which port?")
        asker.start()
        publisher.start()
        eventually(lambda: b"broker was started afresh on" in out.read_bytes(), CHECK_SECONDS + 60, "the fresh start")
        before = answered[0]
        sent = len(published)
        eventually(lambda: answered[0] >= before + 5, 60, "searches after the fresh start")
        eventually(lambda: len(published) >= sent + 2, 120, "publishes after the fresh start")
    finally:
        done.set()
        for thread in (asker, publisher):
            if thread.is_alive():
                thread.join(timeout=65)
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert b"starting the embedded broker afresh" in out.read_bytes()
    assert failures == [], f"{len(failures)} of {len(failures) + answered[0]} searches failed: {failures[:5]}"
