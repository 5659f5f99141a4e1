"""Live capture gives the memories whole-file capture gives (issue 37, Build 1, the suite's form).

Real recorded sessions of all four CLIs (a few per CLI, ``tests/fixtures/capture/real``) are written the
way their CLI writes them, a chunk at a time, with each payload the host's hook sends taken as ``memstream
up`` takes a hook's note (:func:`memstream.capture.hook.capture`); the same files written once, complete,
with their hooks fired once, are whole-file capture. The spooled turns become memories by the pipeline's
raw-mode rules (``tests/support/live_capture.py``). The two must give the same memories, every labelled
exchange must be whole in one memory of its session's project, and no memory may be in another project or
be a reply without its question. What is stored must be stored when the session ends: the idle flush (15
minutes later) is not counted. The whole set through a real ``memstream up``: ``python -m bench.perf.capture
--live``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import live_capture as lc

#: Per CLI, the sessions replayed: the formats and the cases issue 37 names.
SESSIONS = [
    "kimi-cli-58ad9e0d5c-1",  # Claude Code: the agent runs `cd web` mid-session (37.1)
    "kimi-cli-2e672ecd6a-2",  # Claude Code: plan hand-off, a prompt command, interruptions
    "kimi-cli-2e672ecd6a-1",  # Claude Code: /clear, Task sub-agents, a prompt sent again, microcompaction
    "kimi-cli-77bc73228c-1",  # Claude Code: /clear, background-task notifications, 54-127 KB tool results
    "spotter-4d5611e5",  # Claude Code: an automatic compaction inside a 350-line exchange whose answer must survive
    "rollout-2026-05-11T11-26-55",  # Codex CLI: a 13-message exchange whose final report must survive (37.2)
    "rollout-2026-05-11T13-28-45",  # Codex Desktop: replies recorded only as response items
    "session-2025-12-01T21-45",  # Gemini: a chat naming no path, placed by the hook's cwd (37.3)
    "session-2026-01-16T11-01-file-ops",  # Gemini: tool calls between the replies
    "kimi-code-small-wire",  # Kimi Code's wire: a session that ends on questions no reply answered
    "kimi-code-assistant_tools-wire",  # Kimi Code's wire: replies around tool calls
    "531d195b",  # Kimi CLI before the wire: the context log
]


def memories(tmp_path: Path, recorded: list[lc.Recorded], chunks: int) -> tuple[list[lc.Replayed], set[lc.Stored]]:
    home, data = tmp_path / "home", tmp_path / "data"
    home.mkdir(parents=True)
    data.mkdir(parents=True)
    sessions = lc.replay_in_process(recorded, home, data, chunks=chunks)
    return sessions, set(lc.raw_mode_memories(lc.spooled_turns(data / "capture.db")))


@pytest.mark.parametrize("cli", ["claude", "codex", "gemini", "kimi"])
def test_real_sessions_captured_a_chunk_at_a_time_give_the_memories_of_whole_files(tmp_path: Path, cli: str) -> None:
    recorded = [r for r in lc.recorded_sessions(only=SESSIONS) if r.cli == cli]
    assert len(recorded) >= 2, [r.name for r in recorded]
    sessions, live = memories(tmp_path / "live", recorded, lc.CHUNKS)
    assert all(len(s.steps) > 1 for s in sessions)  # each really written in steps, each with its hook
    _, whole = memories(tmp_path / "whole", recorded, 1)

    assert sorted(live, key=repr) == sorted(whole, key=repr)
    (figures,) = lc.score(sessions, live).values()
    assert figures.met, "\n".join(lc.report({cli: figures}, show_misses=True))
