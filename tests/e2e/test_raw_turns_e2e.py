"""Raw mode keeps every turn (issue 14: 144 of 5,882 turns reached no memory): a session that ends
on the user, and user turns that arrive back to back, are stored too."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
import pytest_asyncio

from memstream.identity import project_key
from memstream.intake.publish import make_turn, publish
from memstream.schemas import Fact, Memory
from memstream.topics.catalog import FACTS, topic_name
from memstream.worker import runner
from tests.e2e.conftest import eventually, read_topic, start_pipeline, values

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


async def test_an_exchange_that_goes_on_faster_than_it_is_embedded_is_embedded_once_per_batch(
    live: runner.Running, tmp_path: Path
) -> None:
    """A long exchange published at once (a hook's chunk, a whole file) made one fact per message, each the
    whole exchange so far, and each was embedded and stored in turn: O(messages) embeddings for one memory
    (the 2.4 MB spotter session: 72 for one exchange). The facts of one exchange that wait together are
    embedded once, as the newest of them; the final reply is in the memory."""
    project, session = str(tmp_path / "s"), "runs-ahead"
    notes = [("assistant", f"Progress note {i}: checked shard {i} of the reindex job.") for i in range(1, 8)]
    turns = [
        ("user", "Why is the search index rebuild so slow on shard seven?"),
        *notes,
        ("assistant", "Done: the rebuild now streams shard seven in pages of 500; it takes 4 minutes, not 40."),
    ]
    embedder = live.providers.embedder
    gate = asyncio.Event()
    embedded: list[str] = []

    async def gated(texts: Sequence[str]) -> list[list[float]]:
        await gate.wait()  # the embedder is busy: what comes meanwhile waits for the next batch
        embedded.extend(texts)
        return await real(texts)

    real = embedder.embed_documents
    embedder.embed_documents = gated  # type: ignore[method-assign]
    try:
        await publish(
            live.bootstrap,
            live.settings.topic_prefix,
            [make_turn(session_id=session, project=project, role=r, content=c) for r, c in turns],
        )

        def all_facts(records: list[object]) -> bool:
            facts = [v for v in values(records) if isinstance(v, Fact) and v.session_id == session]
            return len(facts) >= len(turns) - 1

        await read_topic(live.bootstrap, topic_name(live.settings.topic_prefix, FACTS), until=all_facts)
        gate.set()
        memories = await eventually(lambda: _holding(live, project, "4 minutes, not 40"), timeout=60, what="the answer")
    finally:
        gate.set()
        embedder.embed_documents = real  # type: ignore[method-assign]
    [memory] = [m for m in memories if "shard seven" in m.text]
    assert "search index rebuild" in memory.text and "4 minutes, not 40" in memory.text
    of_this_exchange = [t for t in embedded if "shard seven" in t]
    assert 1 <= len(of_this_exchange) <= 2, len(of_this_exchange)  # was one per message: 8


async def _holding(running: runner.Running, project: str, *needles: str) -> list[Memory] | None:
    memories = await stored(running, project)
    text = " ".join(m.text for m in memories)
    return memories if all(n in text for n in needles) else None
