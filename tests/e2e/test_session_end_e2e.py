"""Issue 40.3, the last word: a session that ends on the user is stored at once when its host says
the session ended (``Turn.ends_session``), long before the idle window (here an hour) runs out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from memstream.identity import project_key
from memstream.intake.publish import make_turn, publish
from memstream.schemas import Memory, Provenance, Turn
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def live(tmp_module_dir: Path) -> AsyncIterator[runner.Running]:
    # The idle window is an hour: only the session's end can store its last user turn within the test.
    running = await start_pipeline(tmp_module_dir / "data", phase1_idle_seconds=3600.0, phase1_scan_interval=0.2)
    try:
        yield running
    finally:
        await running.stop()


async def test_the_last_user_turn_is_stored_when_the_session_ends(live: runner.Running, tmp_path: Path) -> None:
    project = str(tmp_path / "p")
    turns = [
        make_turn(session_id="ends", project=project, role="user", content="Which port does the gateway use?"),
        make_turn(session_id="ends", project=project, role="assistant", content="It listens on 8443 behind nginx."),
        make_turn(
            session_id="ends",
            project=project,
            role="user",
            content="Remember to move the gateway to the quasar cluster next sprint.",
            ends_session=True,
        ),
    ]
    await publish(live.bootstrap, live.settings.topic_prefix, turns)

    async def last_word() -> list[Memory] | None:
        memories = await live.providers.store.list([project_key(project)])
        return memories if any("quasar cluster" in m.text for m in memories) else None

    memories = await eventually(last_word, timeout=60, what="the session's last user turn as a memory")
    last = next(m for m in memories if "quasar cluster" in m.text)
    assert last.type == "conversation" and last.session_id == "ends"
    hits = await live.providers.store.hybrid_search(
        "quasar cluster",
        await live.providers.embedder.embed_query("quasar cluster"),
        [project_key(project)],
        limit=3,
        min_score=0.0,
    )
    assert hits and "quasar cluster" in hits[0].memory.text


async def test_a_session_left_open_on_the_user_waits_for_the_idle_window(live: runner.Running, tmp_path: Path) -> None:
    """Without the end, the unanswered turn waits (the idle window is an hour); its answered exchange is stored."""
    project = str(tmp_path / "q")
    turns = [
        make_turn(session_id="open", project=project, role="user", content="Where are the nightly dumps kept?"),
        make_turn(session_id="open", project=project, role="assistant", content="In the zephyr bucket, 30 days."),
        make_turn(session_id="open", project=project, role="user", content="Shorten that to a fortnight, later."),
    ]
    await publish(live.bootstrap, live.settings.topic_prefix, turns)

    async def answered() -> list[Memory] | None:
        memories = await live.providers.store.list([project_key(project)])
        return memories if any("zephyr bucket" in m.text for m in memories) else None

    memories = await eventually(answered, timeout=60, what="the answered exchange")
    assert not any("fortnight" in m.text for m in memories)


async def test_an_end_that_names_a_turn_already_sent_only_ends_the_session(
    live: runner.Running, tmp_path: Path
) -> None:
    """Issue 37: a live session's last Stop takes every message, so its SessionEnd finds nothing new and
    capture sends the last turn again as the end, from the place it was first published. The question it
    ended on is stored at once, once: the end is not a second message."""
    project = str(tmp_path / "r")
    file = str(tmp_path / "wire.jsonl")

    def turn(role: str, content: str, line: int, *, ends: bool = False) -> Turn:
        provenance = Provenance(source_type="kimi", session_id="resent", file=file, line=line)
        return make_turn(
            session_id="resent", project=project, role=role, content=content, provenance=provenance, ends_session=ends
        )

    question = "Move the nightly dumps to the nebula bucket?"
    turns = [turn("user", "Which bucket holds the dumps?", 3), turn("assistant", "The zephyr bucket.", 5)]
    await publish(live.bootstrap, live.settings.topic_prefix, [*turns, turn("user", question, 9)])
    await publish(live.bootstrap, live.settings.topic_prefix, [turn("user", question, 9, ends=True)])

    async def ended() -> list[Memory] | None:
        memories = await live.providers.store.list([project_key(project)])
        return memories if any("nebula bucket" in m.text for m in memories) else None

    memories = await eventually(ended, timeout=60, what="the question the session ended on, as a memory")
    (last,) = [m for m in memories if "nebula bucket" in m.text]
    assert last.text.count(question) == 1, last.text
