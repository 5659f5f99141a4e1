"""The injected context, tunable per project (issue 38, build 4): an owner changes what SessionStart
injects on the block page (CSRF-checked, audited), the page previews each host's exact hook output,
a memory page says when the settings leave it out, and the hook itself follows them."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from memstream.identity import project_key
from memstream.recall import injected
from memstream.recall.session_start import hook_output
from memstream.schemas.injected import defaults
from tests.console.conftest import ALICE, A, World

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def shoot(page: Any, name: str, prefix: str = "console3") -> None:
    """At 1440 and 390 px: never wider than a 390 px phone; saved when MEMSTREAM_CONSOLE_SCREENSHOTS names a folder."""
    folder = os.environ.get("MEMSTREAM_CONSOLE_SCREENSHOTS")
    for width in (1440, 390):
        await page.set_viewport_size({"width": width, "height": 900})
        if width == 390:
            assert await page.evaluate("document.documentElement.scrollWidth") <= 390, name
        if folder:
            await page.screenshot(path=str(Path(folder) / f"{prefix}-{name}-{width}.png"), full_page=True)
    await page.set_viewport_size({"width": 1440, "height": 900})


async def session_start(world: World, who: str, user: str) -> str:
    """What alice's Claude Code hook prints when a session starts in alpha (a real HTTP call to /block)."""
    settings = dataclasses.replace(world.running.settings, token=world.tokens[who], user=user)
    return await asyncio.to_thread(hook_output, "claude-code", {"cwd": A, "source": "startup"}, settings)


async def test_an_owner_tunes_the_injected_context_and_the_next_session_gets_exactly_the_preview(
    world: World,
) -> None:
    key = project_key(A)
    before = json.loads(await session_start(world, "alice", ALICE))["hookSpecificOutput"]["additionalContext"]
    assert "## Architecture" in before and "## Progress & Status" in before
    page = await world.page("alice")
    try:
        await page.goto(f"{world.base}/console/block?project={key}")
        hosts = page.locator("details.host")
        assert await hosts.count() == 4
        claude = page.locator('details.host[data-host="claude-code"]')
        await claude.locator("summary").click()
        assert json.loads(await claude.locator("pre.hook").inner_text()) == json.loads(
            await session_start(world, "alice", ALICE)
        )
        assert "no SessionStart hook" in await page.locator('details.host[data-host="kimi"] summary').inner_text()
        await shoot(page, "block-settings")

        # leave out a section and a type, with a budget: saved, audited, followed by the hook
        await page.locator('input[name="section"][value="Architecture"]').uncheck()
        await page.locator('input[name="type"][value="progress"]').uncheck()
        await page.locator("#max-tokens").fill("400")
        await page.locator("#settings-reason").fill("too long for a small model")
        await page.locator("form.settings button.save").click()
        await page.wait_for_url("**/console/block?project=*")
        assert "injected context saved" in await page.locator(".notice").inner_text()
        shown = await page.locator("pre.block").inner_text()
        assert "## Architecture" not in shown and "## Progress & Status" not in shown and "## Tech Context" in shown
        assert "budget of 400" in await page.locator("main").inner_text()
        after = json.loads(await session_start(world, "alice", ALICE))["hookSpecificOutput"]["additionalContext"]
        assert after == shown
        change = await page.locator("ul.changes li").first.inner_text()
        assert "alice@example.com" in change and "sections left out: Architecture" in change
        assert "too long for a small model" in change
        [record] = await world.running.providers.history.for_memory(injected.trail_id(key))
        assert record.outcome == "configured" and record.requested_by == ALICE and record.scope_key == key

        # the memory page says why the settings leave a memory out
        [kafka] = [m for m in await world.running.providers.store.list([key]) if "Kafka" in m.text]
        await page.goto(f"{world.base}/console/memories/{kafka.id}")
        assert "section “Architecture” is left out" in await page.locator(".in-block").inner_text()

        # off: every host prints nothing, and so does the hook
        await page.goto(f"{world.base}/console/block?project={key}")
        await page.locator('input[name="enabled"]').uncheck()
        await page.locator("form.settings button.save").click()
        await page.wait_for_url("**/console/block?project=*")
        summary = await page.locator('details.host[data-host="codex"] summary').inner_text()
        assert "injected context is off" in summary
        assert await session_start(world, "alice", ALICE) == ""
        await shoot(page, "block-settings-off")
    finally:
        # back to the defaults for the other tests of the module
        injected.settings_file(world.running.settings.data_dir).save(defaults(key))
        await page.context.close()
    assert "## Architecture" in await session_start(world, "alice", ALICE)


async def test_only_an_owner_or_admin_changes_the_injected_context_and_only_with_the_csrf_token(
    world: World,
) -> None:
    key = project_key(A)
    stored = injected.settings_file(world.running.settings.data_dir)
    bob = await world.page("bob")
    alice = await world.page("alice")
    try:
        csrf = await bob.locator('input[name="csrf"]').first.get_attribute("value")
        refused = await bob.request.post(
            f"{world.base}/console/block/settings", form={"csrf": str(csrf), "project": key, "max_tokens": "0"}
        )
        assert refused.status == 403
        assert stored.of(key).enabled
        forged = await alice.request.post(
            f"{world.base}/console/block/settings", form={"project": key, "max_tokens": "0"}
        )
        assert forged.status in (400, 403)
        assert stored.of(key).enabled
        await bob.goto(f"{world.base}/console/block?project={key}")
        assert await bob.locator("form.settings button").count() == 0
    finally:
        await bob.context.close()
        await alice.context.close()


async def test_an_owner_previews_unsaved_choices_and_nothing_is_saved_until_save(world: World) -> None:
    """The settings form previews the block its unsaved choices would give, as they change (console.js,
    a CSRF-checked POST answered as JSON), or with its Preview button without the script: no settings
    change and no audit record until Save, and after Save the hook prints exactly the preview."""
    key = project_key(A)
    stored = injected.settings_file(world.running.settings.data_dir)
    trail = injected.trail_id(key)
    saved_before, records_before = stored.of(key), await world.running.providers.history.for_memory(trail)
    page = await world.page("alice")
    try:
        await page.goto(f"{world.base}/console/block?project={key}")
        preview = page.locator("#settings-preview")
        assert await preview.is_hidden()
        await page.locator('input[name="section"][value="Architecture"]').uncheck()
        await page.locator('input[name="type"][value="progress"]').uncheck()
        await page.locator("#max-tokens").fill("400")
        await preview.locator(".preview-tokens", has_text="budget of 400").wait_for()
        shown = await preview.locator("pre.preview-block").inner_text()
        assert "## Tech Context" in shown
        assert "## Architecture" not in shown and "## Progress & Status" not in shown
        # the saved block above the form is unchanged, and so is everything stored
        assert "## Architecture" in await page.locator("pre.block").first.inner_text()
        assert stored.of(key) == saved_before
        assert await world.running.providers.history.for_memory(trail) == records_before
        assert "## Architecture" in await session_start(world, "alice", ALICE)
        claude = preview.locator('details.host[data-host="claude-code"]')
        await claude.locator("summary").click()
        previewed = json.loads(await claude.locator("pre.hook").inner_text())
        await shoot(page, "block-preview", "console4")

        # off: the preview says nothing would be injected, for every host
        await page.locator('input[name="enabled"]').uncheck()
        await preview.locator("pre.preview-block", has_text="nothing would be injected").wait_for()
        assert (
            "injected context is off" in await preview.locator('details.host[data-host="codex"] summary').inner_text()
        )
        assert stored.of(key).enabled
        await page.locator('input[name="enabled"]').check()
        await preview.locator("pre.preview-block", has_text="## Tech Context").wait_for()

        # Save: the next session gets exactly what was previewed
        await page.locator("form.settings button.save").click()
        await page.wait_for_url("**/console/block?project=*")
        assert json.loads(await session_start(world, "alice", ALICE)) == previewed
        assert len(await world.running.providers.history.for_memory(trail)) == len(records_before) + 1
    finally:
        injected.settings_file(world.running.settings.data_dir).save(defaults(key))
        await page.context.close()


async def test_the_preview_without_the_script_is_a_page_and_is_refused_like_saving(world: World) -> None:
    key = project_key(A)
    stored = injected.settings_file(world.running.settings.data_dir)
    saved_before = stored.of(key)
    alice = await world.page("alice")
    bob = await world.page("bob")
    try:
        await alice.goto(f"{world.base}/console/block?project={key}")
        await alice.locator('input[name="type"][value="architecture"]').uncheck()
        await alice.locator("form.settings button.secondary").click()  # the Preview button: a POST, a page
        await alice.wait_for_url("**/console/block/preview")
        shown = await alice.locator("#settings-preview pre.preview-block").inner_text()
        assert "Kafka" not in shown and "## Tech Context" in shown
        # the form keeps the unsaved choice, to save or change further
        assert not await alice.locator('input[name="type"][value="architecture"]').is_checked()
        assert stored.of(key) == saved_before

        csrf = await bob.locator('input[name="csrf"]').first.get_attribute("value")
        refused = await bob.request.post(
            f"{world.base}/console/block/preview",
            form={"csrf": str(csrf), "project": key, "max_tokens": "0", "enabled": "on"},
            headers={"Accept": "application/json"},
        )
        assert refused.status == 403 and "Kafka" not in await refused.text()
        forged = await alice.request.post(
            f"{world.base}/console/block/preview",
            form={"project": key, "max_tokens": "0", "enabled": "on"},
            headers={"Accept": "application/json"},
        )
        assert forged.status in (400, 403) and "Kafka" not in await forged.text()
        assert stored.of(key) == saved_before
    finally:
        await alice.context.close()
        await bob.context.close()
