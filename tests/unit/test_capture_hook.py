"""`memstream hook`: finding each host's session file, spooling from the checkpoint, never failing the agent."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memstream.capture import hook
from memstream.capture.state import CaptureState
from memstream.hooks import dispatch, main, read_payload
from memstream.settings import Settings
from tests.unit.capture_fakes import FakeFormats, message, session_file

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.from_env({}, data_dir=tmp_path / "data", codex_dir=tmp_path / "codex", kimi_dir=tmp_path / "kimi")


def spool(settings: Settings) -> list[str]:
    with CaptureState.open(settings.capture_db) as state:
        return [s.payload["content"] for s in state.spooled(1000)]


def test_a_stop_hook_spools_the_new_turns_and_the_next_call_only_what_came_since(
    settings: Settings, tmp_path: Path
) -> None:
    transcript = session_file(tmp_path / "claude" / "s1.jsonl", "s1", 2)
    payload = {"session_id": "s1", "transcript_path": str(transcript), "cwd": "/w", "hook_event_name": "Stop"}
    assert hook.capture("claude-code", payload, settings, formats=FakeFormats()) == 2
    # Stop fired before the reply's last line reached the disk: the next call picks it up.
    with transcript.open("a") as handle:
        handle.write(message(2) + message(3))
    assert hook.capture("claude-code", payload, settings, formats=FakeFormats()) == 2
    assert hook.capture("claude-code", payload, settings, formats=FakeFormats()) == 0
    assert spool(settings) == [f"message {i} of the session" for i in range(4)]


def test_memstream_down_keeps_the_turns_spooled_and_starts_no_flusher(settings: Settings, tmp_path: Path) -> None:
    transcript = session_file(tmp_path / "s1.jsonl", "s1", 2)
    hook.capture(
        "gemini", {"transcript_path": str(transcript), "hook_event_name": "AfterAgent"}, settings, formats=FakeFormats()
    )
    assert not hook.start_flusher(settings)
    assert len(spool(settings)) == 2


def test_codex_notify_finds_the_rollout_by_thread_id(settings: Settings) -> None:
    thread = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    day = settings.codex_dir / "sessions" / "2026" / "02" / "03"
    rollout = session_file(day / f"rollout-2026-02-03T10-00-00-{thread}.jsonl", thread, 2)
    session_file(
        settings.codex_dir / "sessions" / "2026" / "02" / "01" / "rollout-2026-02-01T10-00-00-other.jsonl", "x", 1
    )
    notify = {"type": "agent-turn-complete", "thread-id": thread, "turn-id": "1", "cwd": "/w", "input-messages": []}
    assert hook.session_file("codex", notify, settings) == rollout
    # Codex's Stop hook gives the path itself (or null, then its session id is the thread).
    stop = {"hook_event_name": "Stop", "session_id": thread, "transcript_path": None, "cwd": "/w"}
    assert hook.session_file("codex", stop, settings) == rollout
    assert hook.session_file("codex", {"thread-id": "../etc"}, settings) is None


def test_kimi_derives_the_wire_log_from_session_and_work_dir(settings: Settings) -> None:
    cwd = "/home/dev/shop"
    wire = session_file(
        settings.kimi_dir / "sessions" / hashlib.md5(cwd.encode()).hexdigest() / "abc" / "wire.jsonl", "abc", 1
    )
    assert hook.session_file("kimi", {"hook_event_name": "Stop", "session_id": "abc", "cwd": cwd}, settings) == wire
    # A work dir that moved: found by the session id alone.
    assert hook.session_file("kimi", {"session_id": "abc", "cwd": "/elsewhere"}, settings) == wire
    assert hook.session_file("kimi", {"session_id": "nope", "cwd": cwd}, settings) is None


def test_codex_notify_json_is_the_last_argument() -> None:
    payload = read_payload(["--data-dir", "/d", '{"type": "agent-turn-complete", "thread-id": "t"}'], io.StringIO(""))
    assert payload == {"type": "agent-turn-complete", "thread-id": "t"}
    assert read_payload([], io.StringIO('{"hook_event_name": "Stop"}')) == {"hook_event_name": "Stop"}
    assert read_payload([], io.StringIO("not json")) == {}
    assert read_payload([], io.StringIO("[1, 2]")) == {}


def test_session_start_without_the_recall_side_prints_nothing() -> None:
    assert dispatch("claude-code", {"hook_event_name": "SessionStart", "source": "startup"}) == ""


@pytest.mark.parametrize(
    "argv, stdin",
    [
        (["claude-code"], "garbage"),
        (["claude-code"], '{"hook_event_name": "Stop", "transcript_path": "/no/such/file.jsonl"}'),
        (["nonsense-host"], "{}"),
        ([], ""),
        (["codex", "--data-dir"], ""),
    ],
)
def test_whatever_happens_a_hook_exits_0_with_nothing_on_stdout(
    argv: list[str], stdin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path))
    assert main(argv, stdin=io.StringIO(stdin), stdout=out) == 0
    assert out.getvalue() == ""


def test_the_hook_command_exits_0_fast_with_memstream_down(tmp_path: Path) -> None:
    transcript = session_file(tmp_path / "s1.jsonl", "s1", 2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    payload = json.dumps({"session_id": "s1", "transcript_path": str(transcript), "hook_event_name": "Stop"})
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "memstream.cli", "hook", "claude-code", "--data-dir", str(tmp_path / "data")],
        input=payload,
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        timeout=60,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout) == (0, "")
    assert time.monotonic() - began < 60  # bounded; the figure itself is bench/capture.py's


def test_the_hook_imports_no_faust_kafka_or_sdk(tmp_path: Path) -> None:
    transcript = session_file(tmp_path / "s1.jsonl", "s1", 2)
    payload = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript)})
    probe = (
        "import sys, io; from memstream.hooks import main; "
        f"main(['claude-code'], stdin=io.StringIO({payload!r})); "
        "heavy = [m for m in ('faust', 'aiokafka', 'anthropic', 'google.genai', 'xai_sdk', 'voyageai', "
        "'qdrant_client', 'numpy', 'opentelemetry') if m in sys.modules]; print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MEMSTREAM_DATA_DIR": str(tmp_path)},
        timeout=60,
    )
    assert done.stdout.strip() == "[]", done.stderr


def test_codex_notify_through_the_cli_module_finds_the_rollout(tmp_path: Path) -> None:
    thread = "0199a5c2-7e41-7d13-9b1f-52c0e8a4d6f1"
    codex = tmp_path / "codex"
    rollout = session_file(
        codex / "sessions" / "2026" / "02" / "03" / f"rollout-2026-02-03T10-00-00-{thread}.jsonl", thread, 2
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    notify = json.dumps({"type": "agent-turn-complete", "thread-id": thread, "turn-id": "1", "cwd": "/w"})
    done = subprocess.run(
        [sys.executable, "-m", "memstream.cli", "hook", "codex", "--data-dir", str(tmp_path / "data"), notify],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT), "MEMSTREAM_CODEX_DIR": str(codex)},
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert (done.returncode, done.stdout) == (0, "")
    with CaptureState.open(tmp_path / "data" / "capture.db") as state:
        assert state.checkpoint(str(rollout)) is not None  # found by thread id and read (its format: the test's)
