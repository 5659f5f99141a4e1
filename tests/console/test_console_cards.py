"""Below 500 px the console's many-column tables and the memories list are stacks of cards (issue 38,
"pleasant"): at 390 px the documents table fitted only by breaking its words letter by letter."""

from __future__ import annotations

import uuid

import pytest

from memstream.identity import project_key
from tests.console.conftest import A, World
from tests.console.test_console_block_settings import shoot
from tests.console.test_console_hints import document

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def test_the_documents_table_is_a_stack_of_labelled_cards_on_a_phone(world: World) -> None:
    documents = world.running.providers.documents
    assert documents is not None
    failed = str(uuid.uuid5(uuid.NAMESPACE_URL, "console-cards-doc"))
    reason = "fetch failed: 404 Not Found for https://docs.example.com/a/very/long/path/to/the/runbook"
    await documents.put(document(failed, "The deployment runbook for every cluster", "failed", reason))
    page = await world.page("ops", width=390, height=844)
    try:
        await page.goto(f"{world.base}/console/documents?project={A}")
        row = page.locator("tr", has_text="The deployment runbook")
        title = row.locator('td[data-label="Title"]')
        # one card a row: the title cell spans the card, not a fifth of the screen
        assert (await title.bounding_box() or {"width": 0})["width"] > 300
        label = await title.evaluate("cell => getComputedStyle(cell, '::before').content")
        assert label == '"Title"'
        assert await page.locator("table.cards thead").evaluate("head => head.getBoundingClientRect().height") <= 1
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390
        # on a wide screen it is a table again
        await page.set_viewport_size({"width": 1440, "height": 900})
        assert await title.evaluate("cell => getComputedStyle(cell).display") == "table-cell"
        await shoot(page, "documents-cards")
    finally:
        await documents.delete(failed)
        await page.context.close()


async def test_the_memories_list_is_a_stack_of_cards_on_a_phone(world: World) -> None:
    page = await world.page("alice", width=390, height=844)
    try:
        await page.goto(f"{world.base}/console/?project={project_key(A)}")
        card = page.locator("li.memory").first
        assert await card.evaluate("li => getComputedStyle(li).borderTopStyle") == "solid"
        where = card.locator(".meta.where")
        assert await where.evaluate("p => getComputedStyle(p).display") == "block"
        text = card.locator("p.text")
        assert (await text.bounding_box() or {"width": 0})["width"] > 280
        await page.set_viewport_size({"width": 1440, "height": 900})
        assert await card.evaluate("li => getComputedStyle(li).borderTopStyle") == "none"
        await shoot(page, "memories-cards")
    finally:
        await page.context.close()
