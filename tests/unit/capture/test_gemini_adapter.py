"""Gemini CLI chats (JSONL and the older JSON), checkpoints and project map, on fixtures written from its source."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from memstream.capture.adapters import gemini, parse
from memstream.capture.detect import detect
from memstream.capture.model import Parsed, Source
from memstream.capture.reader import read_session

FIXTURES = Path(__file__).parents[2] / "fixtures" / "capture" / "gemini"
MTIME = datetime(2026, 9, 1, tzinfo=UTC)
ROOT = "/home/ada/src/orbit"
PROJECTS = {gemini.project_hash(ROOT): ROOT}
SESSION = FIXTURES / "session-2026-08-20T10-15-3c9a1f20.jsonl"
LEGACY = FIXTURES / "session-2025-09-01T09-00-5b1e2d3c.json"
CHECKPOINT = FIXTURES / "checkpoint-orbit-intro.json"


def read(path: Path, projects: dict[str, str] | None = None) -> Parsed:
    found = read_session(path)
    parsed = parse(Source.GEMINI, str(path), found.records, mtime=MTIME, projects=projects)
    parsed.problems[:0] = found.problems
    return parsed


def rows(parsed: Parsed) -> list[tuple[str, str, int, str]]:
    return [(turn.role, turn.content, turn.line, turn.model) for turn in parsed.turns]


def test_jsonl_session_keeps_each_message_once_and_retracts_nothing_on_rewind() -> None:
    parsed = read(SESSION, PROJECTS)
    assert rows(parsed) == [
        ("user", "Explain @src/retry.ts", 2, ""),  # displayContent: what the person typed, not the @file expansion
        ("assistant", "`retry` resets `attempts` on every pass, so it never gives up.", 7, "gemini-2.5-pro"),
        ("user", "Rewrite it with exponential backoff", 12, ""),  # rewound later, but it was said
        ("assistant", "Here is a version with exponential backoff: …", 13, "gemini-2.5-flash"),
        ("user", "Thanks! Add a unit test too.", 19, ""),  # written last, said earlier
        ("user", "Keep it linear, just cap it at three attempts", 15, ""),
        ("assistant", "Capped at three attempts, linear delay kept.", 16, "gemini-2.5-flash"),
    ]
    assert {turn.session_id for turn in parsed.turns} == {"3c9a1f20-8d2e-4b7a-9e11-5f0c2a7d4e63"}
    assert {turn.project for turn in parsed.turns} == {ROOT}
    assert parsed.turns[0].ts == datetime(2026, 8, 20, 10, 15, 30, 120000, tzinfo=UTC)
    assert parsed.turns[1].message_id == "a1f0c9d2-0004-4000-8000-000000000004"
    assert [(problem.line, problem.reason.split(":")[0]) for problem in parsed.problems] == [(17, "invalid JSON")]


def test_without_a_project_map_the_root_is_the_ancestor_of_a_tool_path_with_the_project_hash() -> None:
    # the session's read_file call names /home/ada/src/orbit/src/retry.ts; sha256("/home/ada/src/orbit")
    # is its projectHash, as Gemini CLI computes it
    assert {turn.project for turn in read(SESSION, {}).turns} == {ROOT}
    assert {turn.project for turn in read(LEGACY, {}).turns} == {""}  # names no path: unknown


def test_older_single_json_session() -> None:
    parsed = read(LEGACY, PROJECTS)
    assert rows(parsed) == [
        ("user", "What does orbit do?", 7, ""),
        ("assistant", "Orbit schedules retries for flaky HTTP calls.", 13, "gemini-2.5-pro"),
    ]
    assert {turn.session_id for turn in parsed.turns} == {"5b1e2d3c-1a2b-4c3d-8e9f-0a1b2c3d4e5f"}
    assert {turn.project for turn in parsed.turns} == {ROOT}
    assert parsed.turns[1].ts == datetime(2025, 9, 1, 9, 0, 9, tzinfo=UTC)


def test_checkpoint_drops_the_setup_context_thoughts_and_tools() -> None:
    parsed = read(CHECKPOINT)
    assert rows(parsed) == [
        ("user", "What does orbit do?", 19, ""),
        ("assistant", "Orbit schedules retries for flaky HTTP calls.", 27, ""),
    ]
    assert {(turn.session_id, turn.ts, turn.message_id) for turn in parsed.turns} == {
        ("checkpoint-orbit-intro", MTIME, "")
    }


def test_subagent_chat_gives_no_turns() -> None:
    (subagent,) = (FIXTURES / "3c9a1f20-8d2e-4b7a-9e11-5f0c2a7d4e63").glob("*.jsonl")
    assert read(subagent, PROJECTS).turns == []


def test_project_map_from_registry_markers_and_candidates(tmp_path: Path) -> None:
    home = tmp_path / ".gemini"
    (home / "tmp" / "orbit" / "chats").mkdir(parents=True)
    (home / "tmp" / "notes").mkdir(parents=True)
    (home / "projects.json").write_text(json.dumps({"projects": {ROOT: "orbit"}}))
    (home / "tmp" / "notes" / ".project_root").write_text("/home/ada/notes\n")
    (home / "trustedFolders.json").write_text(json.dumps({"/home/ada/work": "TRUST_FOLDER"}))
    projects = gemini.load_projects(home, candidates=["/srv/legacy"])
    assert projects == {
        "orbit": ROOT,
        "notes": "/home/ada/notes",
        gemini.project_hash(ROOT): ROOT,
        gemini.project_hash("/home/ada/notes"): "/home/ada/notes",
        gemini.project_hash("/home/ada/work"): "/home/ada/work",
        gemini.project_hash("/srv/legacy"): "/srv/legacy",
    }
    # a file whose projectHash is unknown is placed by the folder it sits in
    moved = home / "tmp" / "orbit" / "chats" / SESSION.name
    moved.write_text(SESSION.read_text().replace(gemini.project_hash(ROOT), "0" * 64))
    assert {turn.project for turn in read(moved, projects).turns} == {ROOT}
    # the registry finds that map by itself from where the file lives
    found = read_session(moved)
    assert {turn.project for turn in parse(Source.GEMINI, str(moved), found.records, mtime=MTIME).turns} == {ROOT}
    assert gemini.load_projects(tmp_path / "absent") == {}


def test_copies_under_other_names_are_still_gemini(tmp_path: Path) -> None:
    for original in (SESSION, LEGACY, CHECKPOINT):
        copy = tmp_path / f"exported{original.suffix}"
        shutil.copy(original, copy)
        assert detect(copy, copy.read_bytes()[:16384]) is Source.GEMINI
