"""The ingest machinery with the CLIs' real adapters, on their fixtures: re-runs, growth and rewrites."""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from memstream.capture.adapters.gemini import project_hash
from memstream.capture.run import ingest
from memstream.capture.state import CaptureState
from memstream.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "capture"


def settings_in(path: Path) -> Settings:
    return Settings.from_env({}, data_dir=path)


def run(settings: Settings, *paths: Path) -> str:
    out = io.StringIO()
    ingest(settings, list(paths), out=out, err=out)
    return out.getvalue()


def spooled(settings: Settings) -> list[tuple[str, str, str]]:
    with CaptureState.open(settings.capture_db) as state:
        return [(s.payload["session_id"], s.payload["role"], s.payload["content"]) for s in state.spooled(10_000)]


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini", "kimi"])
def test_a_second_run_over_each_clis_fixtures_publishes_nothing(cli: str, tmp_path: Path) -> None:
    folder = tmp_path / cli
    shutil.copytree(FIXTURES / cli, folder)
    settings = settings_in(tmp_path / "data")
    run(settings, folder)
    first = spooled(settings)
    assert first
    assert "turns: 0 new" in run(settings, folder)
    assert spooled(settings) == first


def test_a_claude_session_read_in_two_steps_gives_the_turns_of_one_read(tmp_path: Path) -> None:
    lines = (FIXTURES / "claude" / "written_session.jsonl").read_text().splitlines(keepends=True)
    whole = tmp_path / "whole" / "s.jsonl"
    whole.parent.mkdir()
    whole.write_text("".join(lines))
    once = settings_in(tmp_path / "once")
    run(once, whole)

    grown = tmp_path / "grown" / "s.jsonl"
    grown.parent.mkdir()
    twice = settings_in(tmp_path / "twice")
    for cut in range(1, len(lines) + 1):  # a hook after every line the CLI writes
        grown.write_text("".join(lines[:cut]))
        run(twice, grown)
    assert spooled(twice) == spooled(once)
    # Both held back the last reply while the file was live; once it is quiet, each takes it whole.
    for path, settings in ((whole, once), (grown, twice)):
        os.utime(path, (time.time() - 3600, time.time() - 3600))
        run(settings, path)
    assert spooled(twice) == spooled(once)
    assert spooled(once)[-1][1] == "assistant"
    assert len(spooled(once)) == len({turn for turn in spooled(once)})


def test_a_rewritten_gemini_json_publishes_only_the_messages_it_gained(tmp_path: Path) -> None:
    root = "/home/ada/src/orbit"
    home = tmp_path / "gemini"
    (home / "tmp" / "orbit" / "chats").mkdir(parents=True)
    (home / "projects.json").write_text(json.dumps({"projects": {root: "orbit"}}))
    session = home / "tmp" / "orbit" / "chats" / "session-2025-09-01T09-00-5b1e2d3c.json"
    doc = json.loads((FIXTURES / "gemini" / "session-2025-09-01T09-00-5b1e2d3c.json").read_text())
    doc["projectHash"] = project_hash(root)
    session.write_text(json.dumps(doc, indent=2))
    settings = settings_in(tmp_path / "data")
    run(settings, session)
    before = spooled(settings)
    assert ("5b1e2d3c-1a2b-4c3d-8e9f-0a1b2c3d4e5f", "user", "What does orbit do?") in before

    # Gemini CLI rewrites the whole file as the conversation goes on.
    doc["messages"] += [
        {"id": "b2-5", "timestamp": "2025-09-01T09:03:00.000Z", "type": "user", "content": "Which backoff?"},
        {"id": "b2-6", "timestamp": "2025-09-01T09:03:05.000Z", "type": "gemini", "content": "Full jitter."},
    ]
    session.write_text(json.dumps(doc, indent=2))
    output = run(settings, session)
    assert [c for _, _, c in spooled(settings)[len(before) :]] == ["Which backoff?", "Full jitter."]
    assert "turns: 2 new" in output


def test_a_held_back_reply_is_taken_once_the_file_is_quiet_even_if_it_never_changes(tmp_path: Path) -> None:
    from memstream.capture.ingest import Capture, CliFormats

    session = tmp_path / "s.jsonl"
    shutil.copy(FIXTURES / "claude" / "system_reminder.jsonl", session)
    settings = settings_in(tmp_path / "data")
    with CaptureState.open(settings.capture_db) as state:
        live = Capture(state, CliFormats()).file(session)
        assert live.new and live.new[-1]["role"] == "user"  # the reply waits: the file was just written
        # Nothing more is written; a later run (the file now quiet) must still take the reply.
        quiet = Capture(state, CliFormats(), live_window=1e-9).file(session)
        assert [p["role"] for p in quiet.new] == ["assistant"]
        assert Capture(state, CliFormats(), live_window=1e-9).file(session).status == "unchanged"
