"""The console's flows, in Debian's chromium (issue 26, point 7): sign in by link; search and filter;
a memory and its history; forget with a reason and see it leave search; correct and see the supersede
chain; a turn published while the live view is open appears; alice reaches none of bob's memories or
sessions by any URL; hostile memory text renders inert; a forged POST without the CSRF token is refused.
Every view is also checked for horizontal overflow at 390 px, and with MEMSTREAM_CONSOLE_SCREENSHOTS=DIR
its screenshots at 1440 and 390 px are written there (the docs' images: docs/img/)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from memstream.identity import project_key, user_key
from memstream.intake.publish import make_turn, publish_events
from memstream.schemas import encode
from memstream.topics import FACTS
from tests.console.conftest import ALPHA, BETA, STEP_MS, A, B, World, fact
from tests.e2e.conftest import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


async def memory_link(page: Any, text: str) -> str:
    """The href of the result whose text contains ``text``."""
    link = page.locator("ol.memories a", has_text=text)
    await link.first.wait_for()
    return str(await link.first.get_attribute("href"))


async def search(page: Any, query: str, **filters: str) -> None:
    if "/console/?" not in page.url and not page.url.endswith("/console/"):
        await page.goto(page.url.split("/console/")[0] + "/console/")
    await page.fill("#q", query)
    for name, value in filters.items():
        await page.select_option(f"#{name}", value)
    await page.click("form.filters button[type=submit]")
    await page.wait_for_load_state()


async def console_command_link(world: World, who: str) -> str:
    """The link `memstream console --print` prints, run as a user runs it (a process of its own)."""
    env = {
        **os.environ,
        "MEMSTREAM_DATA_DIR": str(world.running.settings.data_dir),
        "MEMSTREAM_HTTP_PORT": str(world.running.settings.http_port),
        "MEMSTREAM_TOKEN": world.tokens[who],
    }
    # Not subprocess.run: the server answering it runs on this test's event loop.
    command = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "memstream"), "console", "--print", env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(command.communicate(), STEP_MS / 1000)
    assert command.returncode == 0
    return out.decode().strip()


async def test_sign_in_by_link_then_search_filter_and_open_a_memory_with_its_history(world: World) -> None:
    context = await world.browser.new_context(viewport={"width": 1440, "height": 900})
    page = await context.new_page()
    link = await console_command_link(world, "alice")
    assert link.startswith(f"{world.base}/console/signin?code=") and world.tokens["alice"] not in link
    await page.goto(link)
    await page.wait_for_url(f"{world.base}/console/")
    # The code left the address bar with the redirect; the session cookie is out of script's reach.
    assert page.url == f"{world.base}/console/"
    [cookie] = [c for c in await page.context.cookies() if c["name"] == "memstream_console"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert await page.evaluate("document.cookie") == ""
    # A used link does not sign anyone in again.
    link = await world.sign_in_link("alice")
    other = await world.browser.new_page()
    await other.goto(link)
    await other.goto(link)
    assert "/console/signin" in other.url and await other.locator(".error").count() == 1
    await other.close()

    await search(page, "which message broker carries the events")
    assert await page.locator("ol.memories li").first.locator("a").inner_text() == ALPHA[0][0]
    # Filters: a type the Kafka memory is not drops it; the right one keeps it.
    await search(page, "kafka", type="tech-context")
    assert ALPHA[0][0] not in await page.locator("main").inner_text()
    await search(page, "kafka", type="architecture")
    href = await memory_link(page, "Kafka")
    await page.fill("#session", "sess-a2")
    await page.click("form.filters button[type=submit]")
    await page.wait_for_load_state()
    assert await page.locator("ol.memories li").count() == 0

    await page.goto(world.base + href)
    main = page.locator("main")
    assert ALPHA[0][0] in await main.locator("pre.text").inner_text()
    timeline = await main.locator("ol.timeline").inner_text()
    assert "created" in timeline
    assert "/home/dev/sess-a1.jsonl:3" in await main.inner_text()
    # Its graph neighbours: the entities its triple names ("memstream uses kafka"), and the other
    # memories naming "memstream" too.
    assert {"memstream", "kafka"} <= set((await main.locator(".entities").inner_text()).split(", "))
    assert "make test" in await main.locator(".graph-memories").inner_text()
    await page.context.close()


async def test_forget_with_a_reason_leaves_search_and_a_correction_shows_the_supersede_chain(world: World) -> None:
    page = await world.page("alice")
    await search(page, "release notes")
    href = await memory_link(page, "Release notes")
    await page.goto(world.base + href)
    await page.fill("#forget-reason", "outdated: we generate them now")
    await page.click("form[action$='/forget'] button")
    await page.wait_for_url(re.compile(r".*/console/\?notice=forgotten"))
    await search(page, "release notes")
    assert "Release notes are written by hand" not in await page.locator("main").inner_text()
    # Kept for audit: shown with superseded and forgotten ones, its history naming who and why.
    await page.goto(world.base + href)
    timeline = await page.locator("ol.timeline").inner_text()
    assert "deleted" in timeline and "alice@example.com" in timeline and "outdated: we generate them now" in timeline

    await search(page, "helm deploy")
    old = await memory_link(page, "Helm")
    await page.goto(world.base + old)
    await page.fill("#correct-text", "The deploy uses Helm with one values file per environment")
    await page.fill("#correct-reason", "per environment, not per cluster")
    await page.click("form[action$='/correct'] button")
    await page.wait_for_url(re.compile(r".*/console/memories/.*notice=corrected"))
    assert "one values file per environment" in await page.locator("pre.text").inner_text()
    back = page.locator("a[rel=prev]")
    assert await back.get_attribute("href") == old
    await back.click()
    await page.wait_for_load_state()
    forward = page.locator("a[rel=next]")
    assert "one values file per environment" in await forward.inner_text()
    timeline = await page.locator("ol.timeline").inner_text()
    assert "updated" in timeline and "per environment, not per cluster" in timeline
    await search(page, "helm values file")
    shown = await page.locator("ol.memories").inner_text()
    assert "per environment" in shown and "per cluster" not in shown
    await page.context.close()


async def test_a_turn_published_while_the_live_view_is_open_appears(world: World) -> None:
    page = await world.page("alice")
    await page.goto(f"{world.base}/console/live")
    await page.locator("#live-state", has_text="following").wait_for()
    turns = [
        make_turn(session_id="sess-live", project=A, role="user", content="Which port does the API use?"),
        make_turn(session_id="sess-live", project=A, role="assistant", content="It listens on 8765 by default."),
    ]
    body = b"[" + b",".join(encode(turn) for turn in turns) + b"]"
    async with httpx.AsyncClient(base_url=world.base) as client:
        reply = await client.post("/turns", content=body, headers={"Authorization": f"Bearer {world.tokens['alice']}"})
        assert reply.status_code == 202
    # Raw mode stores the exchange as one conversation memory; the stream shows it as it is made.
    await page.locator("#live li", has_text="8765").wait_for(timeout=STEP_MS * 2)
    await page.context.close()


async def test_alice_reaches_none_of_bobs_memories_or_sessions_by_any_url(world: World) -> None:
    store = world.running.providers.store
    [bobs] = await store.list([project_key(B)])
    page = await world.page("alice")
    for path in (
        f"/console/memories/{bobs.id}",
        f"/console/sessions/{BETA[0][2]}?project={project_key(B)}",
        f"/console/sessions?project={B}",
        f"/console/?project={project_key(B)}",
        f"/console/block?project={B}",
        "/console/pipeline",
        "/console/documents",
    ):
        response = await page.goto(world.base + path)
        assert response is not None and response.status in (403, 404), path
        assert "BOB-SECRET" not in await page.content(), path
    # Nor through a search of everything she may read, or the export.
    await page.goto(f"{world.base}/console/?q=staging+database+password&all=1")
    assert "BOB-SECRET" not in await page.content()
    exported = await page.request.get(f"{world.base}/console/export")
    lines = [json.loads(line) for line in (await exported.text()).splitlines()]
    assert lines and all(item["scope_key"] == project_key(A) for item in lines)
    # An action on bob's memory, with a valid CSRF token of her own, is refused as "not found".
    csrf = await page.locator("input[name=csrf]").first.get_attribute("value")
    refused = await page.request.post(
        f"{world.base}/console/memories/{bobs.id}/forget", form={"reason": "mine now", "csrf": str(csrf)}
    )
    assert refused.status == 404
    assert (await store.get(bobs.id)) == bobs
    await page.context.close()


async def test_hostile_memory_text_renders_inert(world: World) -> None:
    page = await world.page("alice")
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))
    await page.goto(f"{world.base}/console/?project={project_key(A)}&type=conversation")
    for row in ALPHA[4:]:
        href = await memory_link(page, row[0][:20])
        await page.goto(world.base + href)
        assert row[0] in await page.locator("pre.text").inner_text()  # shown as the text it is
        await page.go_back()
    main = page.locator("main")
    assert await main.locator("script").count() == 0
    assert await main.locator("img").count() == 0
    assert await page.locator("a[href^='javascript:']").count() == 0
    assert await page.evaluate("window.__pwned === undefined")
    assert dialogs == []
    await page.context.close()


async def test_a_forged_post_without_the_csrf_token_is_refused(world: World) -> None:
    page = await world.page("alice")
    await search(page, "make test")
    href = await memory_link(page, "make test")
    memory_id = href.rsplit("/", 1)[1]
    # The browser sends the session cookie (same site), but not the token only the console's pages hold.
    for form in ({"reason": "forged"}, {"reason": "forged", "csrf": "0" * 64}):
        refused = await page.request.post(f"{world.base}/console/memories/{memory_id}/forget", form=form)
        assert refused.status == 403
    signout = await page.request.post(f"{world.base}/console/signout", form={})
    assert signout.status == 403
    current = await world.running.providers.store.get(memory_id)
    assert current is not None and current.active
    await page.context.close()


async def test_an_admin_forgets_a_user_after_seeing_what_goes_per_scope(world: World) -> None:
    dan = "dan@example.com"
    said = fact("DANWORDS: the zebra word of this work is quagga", "conversation", "sess-d1", 1, "zebra", A, i=900)
    said = msgspec.structs.replace(said, speaker=user_key(dan), exchange_id="dan-exchange-1")
    await publish_events(world.running.bootstrap, world.running.settings.topic_prefix, FACTS, [(said.scope_key, said)])

    async def held() -> list[str]:
        every = await world.running.providers.store.list([project_key(A)], limit=500)
        return [m.id for m in every if "DANWORDS" in m.text]

    [memory_id] = await eventually(held, what="Dan's exchange stored")
    page = await world.page("ops")
    await page.click("nav a[href$='/forget-user']")
    await page.fill("#forget-user", dan)
    await page.click("form[action$='/forget-user'] button")
    # The confirmation: per scope what goes, and nothing gone yet.
    table = await page.locator("table").inner_text()
    assert project_key(A) in table and A in table and user_key(dan) in table
    assert await world.running.providers.store.get(memory_id) is not None
    await page.click(f"form[action$='/forget-user'] button:has-text('Forget {dan}')")
    await page.wait_for_selector("p.forget-report")
    report = await page.locator("main").inner_text()
    assert "Removed, per scope" in report and project_key(A) in report

    async def gone() -> bool:
        return await world.running.providers.store.get(memory_id) is None

    await eventually(gone, what="Dan's exchange removed")
    await search(page, "zebra word quagga")
    assert "DANWORDS" not in await page.locator("main").inner_text()
    await page.context.close()


async def screenshot(page: Any, path: Path) -> None:
    """The view as the docs show it, reduced to a 64-colour palette (flat UI colours: a fraction of the bytes)."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(path))
    with Image.open(path) as shot:
        shot.convert("RGB").quantize(colors=64).save(path, optimize=True)


VIEWS = {
    "memories": "/console/?q=how+do+we+deploy",
    "list": f"/console/?project={project_key(A)}",
    "memory": None,  # the Kafka memory, found below
    "sessions": f"/console/sessions?project={project_key(A)}",
    "sessions-all": "/console/sessions",
    "session": f"/console/sessions/sess-a1?project={project_key(A)}",
    "block": f"/console/block?project={project_key(A)}",
    "live": "/console/live",
    "stats": "/console/stats",
    "pipeline": "/console/pipeline",
    "documents": f"/console/documents?project={A}",
}


async def test_every_view_reads_at_390_and_1440_px(world: World) -> None:
    out = os.environ.get("MEMSTREAM_CONSOLE_SCREENSHOTS", "")
    [kafka] = [m for m in await world.running.providers.store.list([project_key(A)]) if "Kafka" in m.text]
    for width, height in ((1440, 900), (390, 844)):
        page = await world.page("ops", width=width, height=height)
        for name, path in VIEWS.items():
            response = await page.goto(world.base + (path or f"/console/memories/{kafka.id}"))
            assert response is not None and response.status == 200, name
            if name == "live":
                await page.locator("#live-state", has_text="following").wait_for()
            # Readable on a phone: nothing wider than the screen (tables scroll inside their own box).
            overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{name} is {overflow}px wider than {width}px"
            if out:
                await screenshot(page, Path(out) / f"console-{name}-{width}.png")
        await page.context.close()
