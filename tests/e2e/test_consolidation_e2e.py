"""The consolidation spec end to end on the real broker: Phase 1 per idle session, Phase 2 through the
one-partition consolidation topic, the workspace on disk and the summary in the block."""

from __future__ import annotations

import asyncio
import urllib.parse
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memstream.agents.consolidate import consolidated_memory_id
from memstream.identity import project_key
from memstream.intake.publish import publish, publish_events
from memstream.rules import phase2
from memstream.schemas import ConsolidationRequest, MemoryUsage, RolloutOutput, Turn
from memstream.store import artifacts
from memstream.topics.catalog import CONSOLIDATION
from tests.e2e.conftest import eventually, read_topic, start_pipeline, values
from tests.e2e.phase_model import PhaseModel
from tests.fakes.anthropic_server import FakeAnthropic

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

#: A provider token in a turn: it must not reach the workspace.
SECRET = "sk-ant-api03-" + "Q" * 40

FAST_PHASES = {
    "phase1_idle_seconds": 1.0,
    "phase1_scan_interval": 0.3,
    "consolidation_debounce": 0.5,
    "consolidation_retry_delay": 0.2,
    "phase1_retry_delay": 0.3,
    "llm_retries": 0,
    "llm_backoff": 0.05,
}


def session(session_id: str, project: str, topic: str, reply: str, *, ts: datetime | None = None) -> list[Turn]:
    ts = ts or datetime.now(UTC)
    return [
        Turn(session_id=session_id, project=project, role="user", content=topic, ts=ts, user="dev@example.com"),
        Turn(session_id=session_id, project=project, role="assistant", content=reply, ts=ts, user="dev@example.com"),
    ]


def get(url: str, path: str, **params: str) -> str:
    with urllib.request.urlopen(f"{url}{path}?{urllib.parse.urlencode(params)}", timeout=10) as response:
        return response.read().decode()


async def test_two_phases_end_to_end(tmp_path: Path) -> None:
    model = PhaseModel()
    model.phase1_delay = 0.5  # long enough for the three sessions' calls to overlap
    model.fail_phase1 = 1  # one Phase 1 job fails, and is retried after its backoff
    with FakeAnthropic(model, api_key="sk-test") as fake:
        running = await start_pipeline(
            tmp_path / "data",
            anthropic_api_key="sk-test",
            anthropic_base_url=fake.base_url,
            phase1_concurrency=2,
            **FAST_PHASES,
        )
        try:
            settings = running.settings
            data_dir = settings.data_dir
            shop, blog = str(tmp_path / "shop"), str(tmp_path / "blog")
            shop_key, blog_key = project_key(shop), project_key(blog)
            old = datetime.now(UTC) - timedelta(days=settings.phase1_max_age_days + 1)
            await publish(
                running.bootstrap,
                settings.topic_prefix,
                [
                    *session("s-auth", shop, "Set up auth for the shop", f"Done, the key is {SECRET}."),
                    *session("s-cart", shop, "Build the cart page", "The cart page renders totals."),
                    *session("s-blog", blog, "Write the blog theme", "The theme uses Tailwind."),
                    # Last active outside the age window: never distilled.
                    *session("s-ancient", blog, "Ancient history talk", "Long ago.", ts=old),
                ],
            )

            # Phase 1: one output per idle session inside the age window.
            topic = f"{settings.topic_prefix}.consolidation"
            records = await read_topic(
                running.bootstrap,
                topic,
                until=lambda rs: len({v.rollout_id for v in values(rs) if isinstance(v, RolloutOutput)}) >= 3,
            )
            outputs = {v.rollout_id: v for v in values(records) if isinstance(v, RolloutOutput)}
            assert set(outputs) == {"s-auth", "s-cart", "s-blog"}
            assert all(o.outcome == "succeeded" for o in outputs.values())
            assert outputs["s-auth"].slug == "set-up-auth-for"
            assert SECRET not in outputs["s-auth"].raw_memory and "[REDACTED" in outputs["s-auth"].raw_memory
            assert model.phase1_max_in_flight <= 2  # the concurrency cap
            assert len(model.phase1_prompts) == 4  # three sessions, one of them twice

            # Phase 2: the workspace, per project and global, and each project's summary.
            shop_dir, blog_dir = artifacts.project_dir(data_dir, shop_key), artifacts.project_dir(data_dir, blog_key)
            # Sessions go idle in their own time, so the first runs may see only some of them.
            await eventually(lambda: _exists(blog_dir / artifacts.CONSOLIDATED), what="the blog consolidated")
            await eventually(
                lambda: _mentions(shop_dir, "set-up-auth-for", "build-the-cart-page"), what="the shop consolidated"
            )
            raw = (artifacts.global_dir(data_dir) / artifacts.RAW_MEMORIES).read_text()
            assert raw.count("## ") == 3 and SECRET not in raw
            # Latest first: the three sessions were published in order.
            assert raw.index("build-the-cart-page") < raw.index("set-up-auth-for")
            assert sorted(p.name.split("-")[0] for p in (shop_dir / artifacts.SUMMARIES).iterdir()) == ["build", "set"]
            assert len(list((blog_dir / artifacts.SUMMARIES).iterdir())) == 1

            # The consolidated memory is stored once per project and leads the block.
            memory = await eventually(
                lambda: running.providers.store.get(consolidated_memory_id(shop_key)), what="the shop's summary memory"
            )
            assert memory.type == "consolidated" and memory.scope_key == shop_key
            block = await asyncio.to_thread(get, settings.api_url, "/block", project=shop)
            assert block.splitlines()[1] == "## Consolidated Memory"
            first_runs = len(model.phase2_prompts)
            assert all(phase2.SYSTEM not in p for p in model.phase2_prompts)

            # A clean request (nothing new since the last success) runs nothing.
            await publish_events(
                running.bootstrap,
                settings.topic_prefix,
                CONSOLIDATION,
                [("test", ConsolidationRequest(reason="schedule", ts=datetime.now(UTC)))],
            )
            # New turns in one session: Phase 1 again, then a run that sees it as added.
            model.fail_phase2 = 2  # ...and that run fails twice before it succeeds
            # The first runs may already have written "retained: set-up-auth-for" (when s-cart's Phase 1
            # was the one retried, the shop ran once per session), so wait for this run's own write.
            written_before = (shop_dir / artifacts.CONSOLIDATED).stat().st_mtime_ns
            await publish(
                running.bootstrap,
                settings.topic_prefix,
                session("s-cart", shop, "Now add coupons", "Coupons apply before tax."),
            )
            await eventually(
                lambda: _rewritten_after(
                    shop_dir, written_before, model, first_runs, shop, "retained: set-up-auth-for"
                ),
                what="the second shop run",
            )
            second = [p for p in model.phase2_prompts[first_runs:] if shop in p]
            assert len(second) == 3  # failed, failed, succeeded: retried with backoff
            assert all("ADDED sessions:\n### build-the-cart-page" in p for p in second)
            assert all("RETAINED sessions:\n### set-up-auth-for" in p for p in second)
            # The blog had nothing new: no call for it; the clean request made none either.
            assert not [p for p in model.phase2_prompts[first_runs:] if blog in p]
            assert "Now add coupons" in model.phase1_prompts[-1] and "Build the cart page" in model.phase1_prompts[-1]

            # Each artifact once, each memory once, after retries.
            assert len(list((shop_dir / artifacts.SUMMARIES).iterdir())) == 2
            consolidated = [
                m for m in await running.providers.store.list([shop_key, blog_key]) if m.type == "consolidated"
            ]
            assert len(consolidated) == 2

            # Usage: the block returned the shop's memories, so the consolidation topic has a
            # usage record naming the sessions they came from (the summary memory has none).
            records = await read_topic(
                running.bootstrap, topic, until=lambda rs: any(isinstance(v, MemoryUsage) for v in values(rs))
            )
            usage = [v for v in values(records) if isinstance(v, MemoryUsage)]
            assert set(usage[0].rollout_ids) <= {"s-auth", "s-cart"} and usage[0].rollout_ids
            assert consolidated_memory_id(shop_key) in usage[0].memory_ids
        finally:
            await running.stop()


async def test_raw_mode_consolidates_on_schedule(tmp_path: Path) -> None:
    """No LLM: Phase 1 keeps the session's own exchanges, and with the debounce far off,
    the scheduled request alone runs Phase 2, which syncs the workspace (no summary)."""
    running = await start_pipeline(
        tmp_path / "data", **{**FAST_PHASES, "consolidation_debounce": 3600.0, "consolidation_interval": 1.0}
    )
    try:
        repo = str(tmp_path / "repo")
        await publish(
            running.bootstrap,
            running.settings.topic_prefix,
            session("s-raw", repo, "Rename the build target", "Renamed it to dist."),
        )
        summaries = artifacts.project_dir(running.settings.data_dir, project_key(repo)) / artifacts.SUMMARIES
        await eventually(lambda: _exists(summaries), what="the scheduled Phase 2 run")
        (summary,) = summaries.iterdir()
        assert summary.name.startswith("rename-the-build-target-")
        assert "Renamed it to dist." in summary.read_text()
        assert not (summaries.parent / artifacts.CONSOLIDATED).exists()
    finally:
        await running.stop()


async def _exists(*paths: Path) -> bool:
    return all(p.exists() for p in paths)


async def _rewritten_after(
    directory: Path, written_before: int, model: PhaseModel, first_runs: int, project: str, text: str
) -> bool:
    """The third Phase 2 call for ``project`` since ``first_runs`` (two scripted failures, then the
    success) was made and its result written over the file as it stood at ``written_before``."""
    calls = [p for p in model.phase2_prompts[first_runs:] if project in p]
    path = directory / artifacts.CONSOLIDATED
    return len(calls) >= 3 and path.stat().st_mtime_ns != written_before and await _mentions(directory, text)


async def _mentions(directory: Path, *texts: str) -> bool:
    path = directory / artifacts.CONSOLIDATED
    return path.exists() and all(text in path.read_text() for text in texts)
