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


def _started(argv: list[str], *, until: str) -> subprocess.Popen[bytes]:
    """A child process, once it has exec'd (until then /proc shows the forked parent's command line)."""
    child = subprocess.Popen(argv)
    deadline = time.monotonic() + 10
    while until.encode() not in Path(f"/proc/{child.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)
    return child


def test_a_file_naming_a_process_that_is_not_memstream_is_stale(tmp_path: Path) -> None:
    sleeper = _started([sys.executable, "-c", "import time; time.sleep(30)"], until="time.sleep")
    try:
        (tmp_path / "runtime.json").write_text(json.dumps({"pid": sleeper.pid, "bootstrap": "x:1"}))
        assert read_runtime_file(settings(tmp_path)) is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_another_live_memstream_process_with_the_pid_is_not_taken_for_up(tmp_path: Path) -> None:
    """The pid was reused by another process from the same venv (a hook, `memstream mcp`): not `up`."""
    mcp_like = _started([sys.executable, "-c", "import time; time.sleep(30)", "memstream", "mcp"], until="memstream")
    try:
        # What `up` wrote before it died, the pid since reused: the identity no longer matches.
        stale = {"pid": mcp_like.pid, "process": "an-earlier-boot:12345", "bootstrap": "127.0.0.1:9092"}
        (tmp_path / "runtime.json").write_text(json.dumps(stale))
        assert read_runtime_file(settings(tmp_path)) is None
        # A file from before the identity was recorded cannot be told from a reused pid either.
        (tmp_path / "runtime.json").write_text(json.dumps({"pid": mcp_like.pid, "bootstrap": "127.0.0.1:9092"}))
        assert read_runtime_file(settings(tmp_path)) is None
    finally:
        mcp_like.kill()
        mcp_like.wait()


def test_the_process_that_wrote_the_file_is_found(tmp_path: Path) -> None:
    script = (
        "import sys, time; from pathlib import Path\n"
        "from memstream.runtime import write_runtime_file\n"
        "from memstream.settings import Settings\n"
        "write_runtime_file(Settings.from_env({}, data_dir=Path(sys.argv[1])),"
        " {'bootstrap': '127.0.0.1:9092', 'api_url': 'http://127.0.0.1:8765'})\n"
        "time.sleep(30)\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)])
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "runtime.json").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        found = read_runtime_file(settings(tmp_path))
        assert found is not None
        assert (found["pid"], found["bootstrap"], found["api_url"]) == (
            writer.pid,
            "127.0.0.1:9092",
            "http://127.0.0.1:8765",
        )
    finally:
        writer.kill()
        writer.wait()
    # The writer is gone: the same file now means nothing.
    assert read_runtime_file(settings(tmp_path)) is None


def test_no_file_or_a_garbled_one_means_not_running(tmp_path: Path) -> None:
    assert read_runtime_file(settings(tmp_path)) is None
    (tmp_path / "runtime.json").write_text("{not json")
    assert read_runtime_file(settings(tmp_path)) is None
