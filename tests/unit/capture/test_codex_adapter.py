"""Codex rollouts and its prompt log to turns, on claude-code-log's Codex fixtures and ones written here."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

from memstream.capture.adapters import parse
from memstream.capture.detect import detect
from memstream.capture.model import Parsed, Source
from memstream.capture.reader import read_session

FIXTURES = Path(__file__).parents[2] / "fixtures" / "capture" / "codex"
MTIME = datetime(2026, 3, 1, tzinfo=UTC)
WRITTEN = FIXTURES / "rollout-2025-10-30T08-00-00-0199a5c2-7e41-7d13-9b1f-52c0e8a4d6f1.jsonl"
LEGACY = FIXTURES / "rollout-2025-07-01T10-00-00-5973b6c0-94b8-487b-a530-2aeb6098ae0e.jsonl"


def read(path: Path, *, final: bool = False) -> Parsed:
    found = read_session(path, final=final)
    parsed = parse(Source.CODEX, str(path), found.records, mtime=MTIME)
    parsed.problems[:0] = found.problems
    return parsed


def rows(parsed: Parsed) -> list[tuple[str, str, int]]:
    return [(turn.role, turn.content, turn.line) for turn in parsed.turns]


def test_each_message_once_without_injected_context_reasoning_tools_or_compaction() -> None:
    parsed = read(WRITTEN)
    assert rows(parsed) == [
        ("user", "Why does the retry loop never stop?", 7),
        ("assistant", "`attempts` is reset inside the loop; move it above the `while`.", 12),
        ("user", "Also rename it to max_attempts", 15),
        ("user", "Go ahead with the rename, and add a test.", 24),  # written after its reply, said before it
        ("assistant", "Renamed to `max_attempts` and added a test.", 22),
    ]
    assert {turn.session_id for turn in parsed.turns} == {"0199a5c2-7e41-7d13-9b1f-52c0e8a4d6f1"}
    assert {turn.project for turn in parsed.turns} == {"/home/ada/src/orbit"}
    assert [turn.model for turn in parsed.turns] == ["", "gpt-5-codex", "", "", "gpt-5"]
    assert parsed.turns[0].ts == datetime(2025, 10, 30, 8, 0, 5, 101000, tzinfo=UTC)
    assert parsed.problems == []


def test_public_fixture_event_and_response_item_give_one_turn_each() -> None:
    parsed = read(FIXTURES / "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl")
    assert rows(parsed) == [
        ("user", "List the synthetic files.", 3),
        ("assistant", "The synthetic files are alpha.txt and beta.txt.", 12),
    ]
    assert [turn.model for turn in parsed.turns] == ["", "synthetic-model"]
    assert parsed.turns[1].session_id == "11111111-1111-4111-8111-111111111111"
    assert parsed.turns[1].project == "/workspace/synthetic-project"


def test_a_subagent_rollout_gives_no_turns_and_its_parent_keeps_its_prompt() -> None:
    child = read(FIXTURES / "rollout-2026-01-03T04-05-10-33333333-3333-4333-8333-333333333333.jsonl")
    assert child.turns == []
    parent = read(FIXTURES / "rollout-2026-01-03T04-05-06-22222222-2222-4222-8222-222222222222.jsonl")
    assert rows(parent) == [("user", "Spawn a synthetic researcher.", 2)]


def test_malformed_line_is_reported_and_the_rest_kept() -> None:
    parsed = read(FIXTURES / "rollout-66666666-6666-4666-8666-666666666666.jsonl")
    assert rows(parsed) == [("user", "Safe line before malformed input.", 2)]
    assert [(problem.line, problem.reason.split(":")[0]) for problem in parsed.problems] == [(3, "invalid JSON")]


def test_the_format_before_the_envelope_reads_its_response_items() -> None:
    parsed = read(LEGACY)
    assert rows(parsed) == [
        ("user", "What does this repo do?", 5),
        ("assistant", "It is a small CLI that syncs dotfiles.", 8),
    ]
    assert {turn.session_id for turn in parsed.turns} == {"5973b6c0-94b8-487b-a530-2aeb6098ae0e"}
    assert {turn.project for turn in parsed.turns} == {"/home/ada/src/legacy"}  # from <environment_context>
    assert {turn.ts for turn in parsed.turns} == {MTIME}  # no timestamps in this format


def test_history_holds_prompts_only_with_their_session_and_time() -> None:
    parsed = read(FIXTURES / "history.jsonl")
    assert [(turn.role, turn.session_id, turn.content, turn.line, turn.project) for turn in parsed.turns] == [
        ("user", "5973b6c0-94b8-487b-a530-2aeb6098ae0e", "What does this repo do?", 1, ""),
        ("user", "0199a5c2-7e41-7d13-9b1f-52c0e8a4d6f1", "Why does the retry loop never stop?", 2, ""),
        ("user", "0199b000-0000-7000-8000-000000000001", "Summarise the open PRs", 3, ""),
    ]
    assert parsed.turns[1].ts == datetime.fromtimestamp(1761811205, tz=UTC)
    assert parsed.problems == []  # the half-written last line waits for the CLI
    # the prompts it shares with the rollouts are the same texts, so first-seen content dedup keeps one
    rollout_prompts = {turn.content for turn in read(WRITTEN).turns + read(LEGACY).turns if turn.role == "user"}
    assert {turn.content for turn in parsed.turns} - rollout_prompts == {"Summarise the open PRs"}


def test_copies_elsewhere_are_still_codex(tmp_path: Path) -> None:
    for original in (WRITTEN, LEGACY, FIXTURES / "history.jsonl"):
        copy = tmp_path / f"copy-of-{original.stem[:12]}.jsonl"
        shutil.copy(original, copy)
        assert detect(copy, copy.read_bytes()[:16384]) is Source.CODEX
        assert rows(read(copy)) == rows(read(original))
