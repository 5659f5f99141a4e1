"""Standard locations, detection by path then by content, and discovery of session files in folders."""

from __future__ import annotations

import shutil
from pathlib import Path

from memstream.capture.adapters import ADAPTERS
from memstream.capture.detect import detect, detect_by_path, discover, standard_roots
from memstream.capture.model import Source

FIXTURES = Path(__file__).parents[2] / "fixtures" / "capture"
CLAUDE = FIXTURES / "claude" / "written_session.jsonl"
CODEX = FIXTURES / "codex" / "rollout-2025-10-30T08-00-00-0199a5c2-7e41-7d13-9b1f-52c0e8a4d6f1.jsonl"
CODEX_HISTORY = FIXTURES / "codex" / "history.jsonl"
GEMINI = FIXTURES / "gemini" / "session-2026-08-20T10-15-3c9a1f20.jsonl"
GEMINI_JSON = FIXTURES / "gemini" / "session-2025-09-01T09-00-5b1e2d3c.json"
KIMI = FIXTURES / "kimi" / "sessions" / "aba723d5ea38e0b657ee4c05d39f2579" / "6f2b1c9e-4d3a-4e5f-9a8b-7c6d5e4f3a2b"


def test_every_source_has_an_adapter() -> None:
    assert set(ADAPTERS) == set(Source)


def test_standard_roots() -> None:
    home = Path("/home/ada")
    assert standard_roots(home) == {
        Source.CLAUDE: [home / ".claude/projects"],
        Source.CODEX: [home / ".codex/sessions", home / ".codex/archived_sessions", home / ".codex/history.jsonl"],
        Source.GEMINI: [home / ".gemini/tmp"],
        Source.KIMI: [home / ".kimi/sessions", home / ".kimi-code/sessions"],
    }


def test_path_patterns_come_first() -> None:
    home = Path("/home/ada")
    cases = {
        home / ".claude/projects/-home-ada-src-orbit/7d1e2c44.jsonl": Source.CLAUDE,
        home / ".codex/sessions/2025/10/30/rollout-2025-10-30T08-00-00-0199a5c2.jsonl": Source.CODEX,
        home / ".codex/history.jsonl": Source.CODEX,
        home / ".gemini/tmp/orbit/chats/session-2026-08-20T10-15-3c9a1f20.jsonl": Source.GEMINI,
        home / ".gemini/tmp/5688/chats/session-2025-09-01T09-00-5b1e2d3c.json": Source.GEMINI,
        home / ".gemini/tmp/5688/checkpoint-orbit.json": Source.GEMINI,
        home / ".kimi/sessions/aba7/6f2b/wire.jsonl": Source.KIMI,
        home / ".kimi/sessions/aba7/6f2b/context.jsonl": None,
        home / ".claude/history.jsonl": None,
        home / ".gemini/tmp/orbit/logs.json": None,
    }
    assert {path: detect_by_path(path) for path in cases} == cases
    # the path decides even when the head says nothing
    assert detect(home / ".kimi/sessions/aba7/6f2b/wire.jsonl", b"") is Source.KIMI


def test_content_markers_recognise_copies_under_any_name(tmp_path: Path) -> None:
    originals = {
        CLAUDE: Source.CLAUDE,
        CODEX: Source.CODEX,
        CODEX_HISTORY: Source.CODEX,
        GEMINI: Source.GEMINI,
        GEMINI_JSON: Source.GEMINI,
        FIXTURES / "gemini" / "checkpoint-orbit-intro.json": Source.GEMINI,
        KIMI / "wire.jsonl": Source.KIMI,
    }
    for number, (original, source) in enumerate(originals.items()):
        copy = tmp_path / f"{number}{original.suffix}"
        shutil.copy(original, copy)
        assert detect(copy, copy.read_bytes()[:4096]) is source, original.name
    stranger = tmp_path / "notes.jsonl"
    stranger.write_text('{"role": "user", "content": "hi"}\n{"a": 1}\n')
    assert detect(stranger, stranger.read_bytes()) is None


def test_discover_walks_given_folders_and_files(tmp_path: Path) -> None:
    found = discover([FIXTURES / "kimi", CLAUDE, tmp_path / "missing"])
    assert found == [
        (CLAUDE, Source.CLAUDE),
        (
            FIXTURES / "kimi/sessions/aba723d5ea38e0b657ee4c05d39f2579/0b9a8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d/wire.jsonl",
            Source.KIMI,
        ),
        (KIMI / "subagents/a7c31e02/wire.jsonl", Source.KIMI),
        (KIMI / "wire.jsonl", Source.KIMI),
    ]  # kimi.json and context.jsonl are not session files


def test_discover_standard_roots_lists_codex_history_after_the_rollouts(tmp_path: Path) -> None:
    home = tmp_path
    day = home / ".codex/sessions/2025/10/30"
    day.mkdir(parents=True)
    shutil.copy(CODEX, day / CODEX.name)
    shutil.copy(CODEX_HISTORY, home / ".codex/history.jsonl")
    chats = home / ".gemini/tmp/orbit/chats"
    chats.mkdir(parents=True)
    shutil.copy(GEMINI, chats / GEMINI.name)
    shutil.copy(GEMINI_JSON, chats / GEMINI_JSON.name)
    shutil.copy(FIXTURES / "gemini/checkpoint-orbit-intro.json", chats.parent / "checkpoint-orbit-intro.json")
    (chats.parent / "logs.json").write_text("[]")
    project = home / ".claude/projects/-home-ada-src-orbit"
    project.mkdir(parents=True)
    shutil.copy(CLAUDE, project / "7d1e2c44-5b0a-4c1e-9a57-1f2e3d4c5b6a.jsonl")
    found = discover([], standard_roots(home))
    assert [(path.relative_to(home).as_posix(), source) for path, source in found] == [
        (".claude/projects/-home-ada-src-orbit/7d1e2c44-5b0a-4c1e-9a57-1f2e3d4c5b6a.jsonl", Source.CLAUDE),
        (f".codex/sessions/2025/10/30/{CODEX.name}", Source.CODEX),
        (f".gemini/tmp/orbit/chats/{GEMINI_JSON.name}", Source.GEMINI),
        (f".gemini/tmp/orbit/chats/{GEMINI.name}", Source.GEMINI),
        (".gemini/tmp/orbit/checkpoint-orbit-intro.json", Source.GEMINI),
        (".codex/history.jsonl", Source.CODEX),
    ]


def test_a_first_line_longer_than_the_head_is_still_recognised(tmp_path: Path) -> None:
    prompt = "x" * 100_000  # Codex writes its whole system prompt into session_meta
    heads = {
        Source.CODEX: '{"timestamp":"2025-10-30T08:00:00.000Z","type":"session_meta","payload":{"instructions":"',
        Source.GEMINI: '{"sessionId": "3c9a", "projectHash": "5688", "summary": "',
        Source.KIMI: '{"timestamp": 1763600000.0, "message": {"type": "TurnBegin", "payload": {"user_input": "',
        Source.CLAUDE: '{"parentUuid":null,"isSidechain":false,"userType":"external","cwd":"/x","message":"',
    }
    for source, opening in heads.items():
        copy = tmp_path / f"{source}.jsonl"
        copy.write_text(opening + prompt + '"}}\n')
        assert detect(copy, copy.read_bytes()[:65536]) is source
