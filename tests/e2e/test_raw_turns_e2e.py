"""Raw mode keeps every turn (issue 14: 144 of 5,882 turns reached no memory): a session that ends
on the user, and user turns that arrive back to back, are stored too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from memstream.identity import project_key
from memstream.intake.publish import make_turn, publish
from memstream.schemas import Memory
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def live(tmp_module_dir: Path) -> AsyncIterator[runner.Running]:
    # A session counts as idle after 1 s without a turn; the flush looks every 0.2 s.
    running = await start_pipeline(tmp_module_dir / "data", phase1_idle_seconds=1.0, phase1_scan_interval=0.2)
    try:
        yield running
    finally:
        await running.stop()


async def stored(running: runner.Running, project: str) -> list[Memory]:
    return await running.providers.store.list([project_key(project)])


async def test_a_session_ending_on_the_user_still_reaches_memory(live: runner.Running, tmp_path: Path) -> None:
    project = str(tmp_path / "p")
    turns = [
        ("user", "How do I rotate the signing key?"),
        ("assistant", "Run make rotate-key; it writes the new key to Vault."),
        ("user", "And the old tokens, do they stay valid for a day after rotation?"),
    ]
    await publish(
        live.bootstrap,
        live.settings.topic_prefix,
        [make_turn(session_id="ends-on-user", project=project, role=r, content=c) for r, c in turns],
    )

    async def both() -> list[Memory] | None:
        memories = await stored(live, project)
        return memories if any("stay valid for a day" in m.text for m in memories) and len(memories) >= 2 else None

    memories = await eventually(both, timeout=60, what="the last user turn as a memory")
    last = next(m for m in memories if "stay valid for a day" in m.text)
    assert last.type == "conversation" and last.session_id == "ends-on-user"
    assert [s.session_id for s in last.sources] == ["ends-on-user"]


async def test_user_turns_back_to_back_are_all_kept(live: runner.Running, tmp_path: Path) -> None:
    project = str(tmp_path / "q")
    turns = [
        ("user", "The build fails on ARM runners."),
        ("user", "Also the cache key ignores the lockfile."),
        ("assistant", "Pinned the ARM image and added the lockfile hash to the cache key."),
    ]
    await publish(
        live.bootstrap,
        live.settings.topic_prefix,
        [make_turn(session_id="two-users", project=project, role=r, content=c) for r, c in turns],
    )

    async def exchange() -> list[Memory] | None:
        memories = await stored(live, project)
        return memories if any("lockfile hash" in m.text for m in memories) else None

    memories = await eventually(exchange, timeout=60, what="the exchange")
    text = " ".join(m.text for m in memories)
    assert "fails on ARM runners" in text and "ignores the lockfile" in text


async def test_an_exchange_that_goes_on_is_one_memory_refreshed_in_place(live: runner.Running, tmp_path: Path) -> None:
    """Issue 25.3: a Claude reply comes as several assistant messages, and a question stored while it
    waited for its answer is stored again with it; each snapshot extends the exchange stored before."""
    project = str(tmp_path / "r")
    session = "goes-on"
    first = [
        ("user", "Why does the nightly export time out?"),
        ("assistant", "Let me look at the export job's logs."),
    ]
    rest = [
        ("assistant", "The export scans the whole orders table without an index on created_at."),
        ("user", "Add the index then."),
        ("assistant", "Added a migration creating the index on orders.created_at."),
    ]
    turns = [make_turn(session_id=session, project=project, role=r, content=c) for r, c in first]
    await publish(live.bootstrap, live.settings.topic_prefix, turns)
    await eventually(
        lambda: _holding(live, project, "export job's logs"), timeout=60, what="the first part of the exchange"
    )
    turns = [make_turn(session_id=session, project=project, role=r, content=c) for r, c in rest]
    await publish(live.bootstrap, live.settings.topic_prefix, turns)
    memories = await eventually(
        lambda: _holding(live, project, "orders.created_at", "without an index"), timeout=60, what="both exchanges"
    )
    texts = sorted(m.text for m in memories)
    assert len(texts) == 2, texts
    assert not any(a != b and b.startswith(a) for a in texts for b in texts), texts
    [whole] = [t for t in texts if "nightly export" in t]
    assert "export job's logs" in whole and "without an index" in whole


async def _holding(running: runner.Running, project: str, *needles: str) -> list[Memory] | None:
    memories = await stored(running, project)
    text = " ".join(m.text for m in memories)
    return memories if all(n in text for n in needles) else None
