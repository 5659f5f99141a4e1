"""The runtime file `memstream up` leaves for the other commands, and when it means nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from memstream.runtime import read_runtime_file
from memstream.settings import Settings


def settings(tmp_path: Path) -> Settings:
    return Settings.from_env({}, data_dir=tmp_path)


def test_a_file_naming_this_very_process_is_stale(tmp_path: Path) -> None:
    # A container restarted after a crash gets the same low pid as the process that wrote it.
    (tmp_path / "runtime.json").write_text(json.dumps({"pid": os.getpid(), "bootstrap": "x:1"}))
    assert read_runtime_file(settings(tmp_path)) is None


def test_a_file_naming_a_process_that_is_not_memstream_is_stale(tmp_path: Path) -> None:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / "runtime.json").write_text(json.dumps({"pid": sleeper.pid, "bootstrap": "x:1"}))
        assert read_runtime_file(settings(tmp_path)) is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_live_memstream_process_is_found(tmp_path: Path) -> None:
    fake = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "memstream"])
    try:
        # Until the child has exec'd, /proc shows the forked parent's command line.
        deadline = time.monotonic() + 10
        while b"memstream" not in Path(f"/proc/{fake.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)
        data = {"pid": fake.pid, "bootstrap": "127.0.0.1:9092", "api_url": "http://127.0.0.1:8765"}
        (tmp_path / "runtime.json").write_text(json.dumps(data))
        assert read_runtime_file(settings(tmp_path)) == data
    finally:
        fake.kill()
        fake.wait()


def test_no_file_or_a_garbled_one_means_not_running(tmp_path: Path) -> None:
    assert read_runtime_file(settings(tmp_path)) is None
    (tmp_path / "runtime.json").write_text("{not json")
    assert read_runtime_file(settings(tmp_path)) is None
