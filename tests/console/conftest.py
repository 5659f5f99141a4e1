"""The console in a real browser: Debian's chromium driven by Playwright, against one real pipeline
per module (embedded broker, edge store, bundled embedder, graph on), with tokens for alice (project
alpha), bob (project beta) and an admin.

Playwright's own browser download cannot work here (``playwright install`` is never run): the
project's set-up (``make``) installs Debian's ``chromium``, launched by its path.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memstream.auth import TokenStore, user_principal
from memstream.identity import project_key
from memstream.intake.publish import publish_events
from memstream.schemas import Entity, Fact, Provenance
from memstream.topics import FACTS
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline

CHROMIUM = Path("/usr/bin/chromium")
#: Headless as root in a container: no sandbox, no GPU, and none of chromium's own network traffic.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: The longest a browser step may wait for the page (a test waits on conditions, never sleeps).
STEP_MS = 30_000

A, B = "/repos/alpha", "/repos/beta"
ALICE, BOB, OPS = "alice@example.com", "bob@example.com", "ops@example.com"
SAID = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)
#: alice's memories in alpha: (text, type, session, line, the entity triple its fact came with).
ALPHA = [
    ("The event bus is Kafka, one topic per stage, keyed by session", "architecture", "sess-a1", 3, "kafka"),
    ("Tests run with make test; the suite must fit two cores", "tech-context", "sess-a1", 7, "make test"),
    ("The deploy uses Helm with a values file per cluster", "project-config", "sess-a2", 2, "helm"),
    ("Release notes are written by hand before each tag", "progress", "sess-a2", 9, "release notes"),
    ("<script>window.__pwned = 1; alert('xss')</script> leaked into a turn", "conversation", "sess-a3", 1, "chat"),
    ('An image <img src=x onerror="window.__pwned = 2; alert(2)"> was pasted', "conversation", "sess-a3", 2, "chat"),
    ("See [the runbook](javascript:window.__pwned=3) for the steps", "conversation", "sess-a3", 3, "runbook"),
]
#: bob's: nothing of it may ever reach alice's browser.
BETA = [("BOB-SECRET: the staging database password rotates on Fridays", "tech-context", "sess-b1", 4, "postgres")]


@dataclass
class World:
    running: runner.Running
    base: str
    tokens: dict[str, str]
    browser: Any

    async def sign_in_link(self, who: str) -> str:
        """What `memstream console` prints: a one-time link for the token's principal."""
        async with httpx.AsyncClient(base_url=self.base) as client:
            reply = await client.post("/console/codes", headers={"Authorization": f"Bearer {self.tokens[who]}"})
            reply.raise_for_status()
            return self.base + str(reply.json()["path"])

    async def page(self, who: str, *, width: int = 1440, height: int = 900) -> Any:
        """A fresh browser context (its own cookies), signed in as ``who`` by link."""
        context = await self.browser.new_context(viewport={"width": width, "height": height})
        context.set_default_timeout(STEP_MS)
        page = await context.new_page()
        await page.goto(await self.sign_in_link(who))
        await page.wait_for_url(f"{self.base}/console/")
        return page


def fact(text: str, kind: str, session: str, line: int, uses: str, project: str, *, i: int) -> Fact:
    key = project_key(project)
    return Fact(
        fact_id=f"console-{key}-{i}",
        text=text,
        type=kind,  # type: ignore[arg-type]
        scope="project",
        scope_key=key,
        project=project,
        session_id=session,
        source_chunk=f"[user] what do we know about {uses}? [assistant] {text}",
        origin=f"snapshot-{session}",
        sources=[Provenance(source_type="claude", session_id=session, file=f"/home/dev/{session}.jsonl", line=line)],
        entities=[Entity(source="memstream", relationship="uses", target=uses)],
        ts=SAID,
    )


def _chromium_or_skip() -> None:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            raise AssertionError("chromium is missing: `make` installs it (apt-get install chromium)")
        pytest.skip("Debian's chromium is not installed (make installs it)")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: Any) -> AsyncIterator[World]:
    _chromium_or_skip()
    from playwright.async_api import async_playwright

    data = tmp_path_factory.mktemp("console")
    running = await start_pipeline(data, api_open=False, graph_enabled=True)
    playwright = await async_playwright().start()
    browser = None
    try:
        store = TokenStore(running.settings.tokens_file)
        tokens = {
            "alice": store.create(user_principal(ALICE, [A], label="alice laptop"))[0],
            "bob": store.create(user_principal(BOB, [B], label="bob laptop"))[0],
            "ops": store.create(user_principal(OPS, all_projects=True, admin=True, label="ops"))[0],
        }
        facts = [fact(*row, A, i=i) for i, row in enumerate(ALPHA)] + [
            fact(*row, B, i=100 + i) for i, row in enumerate(BETA)
        ]
        await publish_events(running.bootstrap, running.settings.topic_prefix, FACTS, [(f.scope_key, f) for f in facts])

        async def all_stored() -> bool:
            return await running.providers.store.count([project_key(A), project_key(B)]) >= len(facts)

        await eventually(all_stored, what="the seeded memories in the store")
        browser = await playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield World(running, running.settings.api_url, tokens, browser)
    finally:
        if browser is not None:
            await browser.close()
        await playwright.stop()
        await running.stop()
