"""What the console rendered but no browser ever checked (issue 38, point 3): the graph-off hint on a
memory page, the confirmation before a document is removed, and a failed document's reason."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstream.identity import project_key
from memstream.schemas import Document
from tests.console.conftest import A, World

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def a_memory_of_alpha(world: World) -> Any:
    listed = await world.running.providers.store.list([project_key(A)])
    assert listed, "the world seeds alpha's memories"
    return listed[0]


async def test_a_memory_page_says_the_graph_is_off_when_the_server_runs_without_it(world: World) -> None:
    memory = await a_memory_of_alpha(world)
    providers = world.running.providers
    graph = providers.graph
    page = await world.page("alice")
    try:
        await page.goto(f"{world.base}/console/memories/{memory.id}")
        assert await page.locator("p.hint").count() == 0
        providers.graph = None  # the same server, as it runs with MEMSTREAM_GRAPH_ENABLED off
        await page.goto(f"{world.base}/console/memories/{memory.id}")
        hint = await page.locator("p.hint").inner_text()
        assert "knowledge graph is off on this server" in hint
        await shoot(page, "memory-graph-off")
    finally:
        providers.graph = graph
        await page.context.close()


async def shoot(page: Any, name: str) -> None:
    """At 1280 and 390 px: never wider than a 390 px phone; saved when MEMSTREAM_CONSOLE_SCREENSHOTS names a folder."""
    folder = os.environ.get("MEMSTREAM_CONSOLE_SCREENSHOTS")
    for width in (1280, 390):
        await page.set_viewport_size({"width": width, "height": 900})
        if width == 390:
            assert await page.evaluate("document.documentElement.scrollWidth") <= 390, name
        if folder:
            await page.screenshot(path=str(Path(folder) / f"console2-{name}-{width}.png"), full_page=True)
    await page.set_viewport_size({"width": 1440, "height": 900})


def document(document_id: str, title: str, status: Any, error: str = "") -> Document:
    now = datetime.now(UTC)
    return Document(
        id=document_id,
        source_type="url",
        source=f"https://docs.example.com/{document_id}",
        title=title,
        project=A,
        scope_key=project_key(A),
        status=status,
        error=error,
        attempts=1,
        created_at=now,
        updated_at=now,
    )


async def test_a_failed_documents_reason_is_shown_and_removal_asks_first(world: World) -> None:
    documents = world.running.providers.documents
    assert documents is not None
    reason = "fetch failed: 404 Not Found for https://docs.example.com/gone"
    gone, kept = (str(uuid.uuid5(uuid.NAMESPACE_URL, f"console-doc-{n}")) for n in ("gone", "kept"))
    await documents.put(document(gone, "The gone runbook", "failed", reason))
    await documents.put(document(kept, "The kept runbook", "done"))
    page = await world.page("ops")
    try:
        await page.goto(f"{world.base}/console/documents?project={A}")
        row = page.locator("tr", has_text="The gone runbook")
        assert await row.locator("p.reason").inner_text() == f"why: {reason}"
        assert await page.locator("tr", has_text="The kept runbook").locator("p.reason").count() == 0
        await shoot(page, "documents-failed")

        # Dismissing the confirmation keeps the document: nothing is posted.
        asked: list[str] = []

        async def dismiss(dialog: Any) -> None:
            asked.append(dialog.message)
            await dialog.dismiss()

        page.once("dialog", dismiss)
        await row.locator("button.danger").click()
        await page.wait_for_function("document.readyState === 'complete'")
        assert asked == ["Remove The gone runbook and its chunks?"]
        assert "notice=" not in page.url
        assert await documents.get(gone) is not None

        # Accepting it removes the document.
        async def accept(dialog: Any) -> None:
            asked.append(dialog.message)
            await dialog.accept()

        page.once("dialog", accept)
        await row.locator("button.danger").click()
        await page.wait_for_url(lambda url: "notice=document+removed" in url)
        assert asked[-1] == "Remove The gone runbook and its chunks?"
    finally:
        await page.context.close()
