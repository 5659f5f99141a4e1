"""Claude Code transcripts to turns, on public fixtures and one written for the cases they lack."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from memstream.capture.adapters import claude, parse
from memstream.capture.detect import detect
from memstream.capture.model import Parsed, Source
from memstream.capture.reader import read_session

FIXTURES = Path(__file__).parents[2] / "fixtures" / "capture" / "claude"
MTIME = datetime(2026, 1, 1, tzinfo=UTC)


def read(path: Path, *, final: bool = False) -> Parsed:
    found = read_session(path, final=final)
    parsed = parse(Source.CLAUDE, str(path), found.records, mtime=MTIME)
    parsed.problems[:0] = found.problems
    return parsed


def rows(parsed: Parsed) -> list[tuple[str, str, int]]:
    return [(turn.role, turn.content, turn.line) for turn in parsed.turns]


def test_written_session_keeps_only_the_visible_conversation_in_time_order() -> None:
    parsed = read(FIXTURES / "written_session.jsonl")
    assert rows(parsed) == [
        ("user", "Why does the retry loop never stop?", 3),
        (
            "assistant",
            "The loop never stops because `attempts` is reset inside it.\n\nMove `attempts = 0` above the `while`.",
            5,
        ),
        ("user", "Now add a test for it, please.", 15),  # written after the reply, said before it
        ("assistant", "Added `test_retry_stops_after_three_attempts`.", 14),
    ]
    first, reply, _, last = parsed.turns
    assert {turn.session_id for turn in parsed.turns} == {"7d1e2c44-5b0a-4c1e-9a57-1f2e3d4c5b6a"}
    assert {turn.project for turn in parsed.turns} == {"/home/ada/src/orbit"}
    assert first.ts == datetime(2025, 11, 20, 9, 0, 0, tzinfo=UTC)
    assert reply.ts == datetime(2025, 11, 20, 9, 0, 3, tzinfo=UTC)
    assert (first.model, reply.model, last.model) == ("", "claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805")
    assert (first.message_id, reply.message_id) == ("u-0001", "msg_01AAA")
    assert all(turn.source is Source.CLAUDE and turn.file.endswith("written_session.jsonl") for turn in parsed.turns)


def test_half_written_last_line_waits_while_the_file_is_live_and_is_reported_once_final() -> None:
    live = read(FIXTURES / "written_session.jsonl")
    assert live.problems == []
    final = read(FIXTURES / "written_session.jsonl", final=True)
    assert [(problem.line, problem.reason) for problem in final.problems] == [(22, "half-written last line")]
    assert rows(final) == rows(live)


def test_system_reminder_is_cut_out_and_a_reminder_alone_is_no_prompt() -> None:
    parsed = read(FIXTURES / "system_reminder.jsonl")
    assert rows(parsed) == [
        ("user", "Please review the change.\n# Project notes\nThe tail content still renders as user text.", 1),
        ("assistant", "Reviewed — the tail is preserved and the reminder is annotated.", 2),
    ]
    assert parsed.turns[1].model == "claude-opus-4"
    assert parsed.turns[0].session_id == "system_reminder" and parsed.turns[0].project == "/tmp/project"


def test_sidechain_lines_and_tool_traffic_are_left_out() -> None:
    parsed = read(FIXTURES / "sidechain_integrated.jsonl")
    assert rows(parsed) == [("assistant", "Excellent research! The sub-assistant has identifi...", 6)]
    assert parsed.turns[0].project == "e:\\Workspace\\src\\github\\claude-code-log"
    assert parsed.turns[0].ts == datetime(2025, 11, 19, 22, 55, 40, 790000, tzinfo=UTC)


def test_edge_cases_local_commands_are_dropped_and_broken_lines_reported_never_fatal() -> None:
    parsed = read(FIXTURES / "edge_cases.jsonl")
    assert [(role, line) for role, _, line in rows(parsed)] == [
        ("user", 1),
        ("assistant", 2),
        ("user", 3),
        ("assistant", 9),
        ("user", 12),
    ]
    assert parsed.turns[4].content.startswith("Testing special characters: café, naïve")
    assert not any("<command-name>" in turn.content or "Caveat:" in turn.content for turn in parsed.turns)
    assert [problem.line for problem in parsed.problems] == [13, 15, 16]
    assert all("object was expected" in problem.reason for problem in parsed.problems)


def test_subagent_file_gives_no_turns() -> None:
    assert read(FIXTURES / "agent-5c1d9e.jsonl").turns == []
    assert claude.is_subagent_file("/home/a/.claude/projects/-x/7d1e/subagents/agent-a1.jsonl")
    assert not claude.is_subagent_file("/home/a/.claude/projects/-x/7d1e2c44.jsonl")


def test_a_copy_under_another_name_is_still_claude(tmp_path: Path) -> None:
    copy = tmp_path / "exported.log.jsonl"
    shutil.copy(FIXTURES / "written_session.jsonl", copy)
    assert detect(copy, copy.read_bytes()[:16384]) is Source.CLAUDE
    assert rows(read(copy)) == rows(read(FIXTURES / "written_session.jsonl"))
