"""Issue 38 in Debian's chromium: the list pages through every memory with a total; every row and memory
page names its project by path and its source CLI as stored; nothing is wider than a 390 px phone with real,
long origin paths; the project dropdown names paths and counts active memories; the Source filter offers the
stored values, a From after To is explained, a session is found by the start of its id; the favicon needs no
token; a memory URL that is no id is "not found"; Live starts with the newest memories; the doctor's report
is a page, not a JSON dump; search rows are in the order of the score shown."""

from __future__ import annotations

import hashlib
import re
import uuid
from datetime import timedelta
from typing import Any

import pytest
import pytest_asyncio

from memstream.identity import project_key
from memstream.schemas import Memory, Provenance
from tests.console.conftest import SAID, A, World

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

#: A real origin: a Claude Code session file under a deep project directory.
LONG = (
    "/home/developer/.claude/projects/_home_developer_src_github.com_exampleorganisation_arather_long_"
    "repository_name/0b7e1f2a9c4d4e5f8a6b7c8d9e0f1a2b.jsonl"
)
#: More memories than one page: 60 with a long origin, as `claude-code`, `cli` and `publish` store them.
EXTRA = 60
SOURCES = ("claude-code", "cli", "publish")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def seeded(world: World) -> World:
    """60 memories written to the store as the store agent writes them (the decide stage would merge
    look-alike facts): the list's paging does not depend on what the pipeline makes of them."""
    providers = world.running.providers
    key = project_key(A)
    texts = [f"Module {i} keeps its own settings file" for i in range(EXTRA)]
    vectors = await providers.embedder.embed_documents(texts)
    for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
        at = SAID + timedelta(minutes=i)
        session = f"0b7e1f2a-{i:04d}"
        await providers.store.upsert(
            Memory(
                id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"console-extra-{i}")),
                text=text,
                type="tech-context",
                scope="project",
                scope_key=key,
                source_chunk=f"[user] where are module {i}'s settings? [assistant] {text}",
                created_at=at,
                updated_at=at,
                content_hash=hashlib.sha256(text.encode()).hexdigest(),
                embedding_model=providers.embedder.model,
                session_id=session,
                project=A,
                sources=[Provenance(source_type=SOURCES[i % 3], session_id=session, file=LONG, line=i + 1)],
            ),
            vector,
        )
    return world


async def ids_on(page: Any) -> list[str]:
    return [str(await box.get_attribute("value")) for box in await page.locator("ol.memories input[name=id]").all()]


async def test_the_list_pages_through_every_memory_with_a_total_naming_project_and_source(seeded: World) -> None:
    store = seeded.running.providers.store
    every = {m.id for m in await store.list([project_key(A)])}
    page = await seeded.page("alice")
    await page.goto(f"{seeded.base}/console/?project={project_key(A)}")
    assert f"of {len(every)} memories" in await page.locator("p.count").inner_text()
    seen = await ids_on(page)
    assert len(seen) == 50
    while await page.locator("a[rel=next]").count():
        await page.click("a[rel=next]")
        await page.wait_for_load_state()
        seen += await ids_on(page)
    assert sorted(seen) == sorted(every)  # each once, none only through a filter
    # Every row names its project by path and its source CLI as stored.
    await page.goto(f"{seeded.base}/console/?project={project_key(A)}")
    projects = await page.locator("ol.memories .project").all_inner_texts()
    assert projects and set(projects) == {A}
    sources = set(await page.locator("ol.memories .source").all_inner_texts())
    assert set(SOURCES) <= sources
    href = await page.locator("ol.memories p.text a").first.get_attribute("href")
    await page.goto(seeded.base + str(href))
    assert await page.locator("dd.project").inner_text() == A
    assert await page.locator("dd.source").inner_text() in {*SOURCES, "claude"}
    await page.context.close()


async def test_no_view_is_wider_than_a_390_px_phone_with_long_origin_paths(seeded: World) -> None:
    [long] = [m for m in await seeded.running.providers.store.list([project_key(A)]) if m.text.startswith("Module 7 ")]
    page = await seeded.page("ops", width=390, height=844)
    for path in (
        f"/console/?project={project_key(A)}",
        "/console/?q=settings+file",
        f"/console/memories/{long.id}",
        f"/console/sessions/{long.session_id}?project={project_key(A)}",
        f"/console/sessions?project={project_key(A)}",
        "/console/sessions",
        f"/console/block?project={project_key(A)}",
        "/console/live",
        "/console/pipeline",
    ):
        response = await page.goto(seeded.base + path)
        assert response is not None and response.status == 200, path
        overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} is {overflow}px wider than 390px"
    await page.context.close()


async def test_the_project_dropdown_names_paths_and_counts_active_memories(seeded: World) -> None:
    store = seeded.running.providers.store
    active = await store.count([project_key(A)], include_superseded=False)
    page = await seeded.page("alice")
    labels = await page.locator("#project option").all_inner_texts()
    assert f"{A} ({active})" in labels
    assert not [label for label in labels if re.search(r"\bp_[0-9a-f]", label)]
    await page.context.close()


async def test_filters_offer_stored_sources_explain_an_empty_range_and_find_a_session_by_prefix(
    seeded: World,
) -> None:
    page = await seeded.page("alice")
    offered = await page.locator("#source option").evaluate_all("options => options.map(o => o.value)")
    assert set(SOURCES) <= set(offered) and "claude" in offered
    await page.goto(f"{seeded.base}/console/?project={project_key(A)}&source=claude-code")
    shown = await page.locator("ol.memories .source").all_inner_texts()
    assert len(shown) == EXTRA // 3 and set(shown) == {"claude-code"}
    await page.goto(f"{seeded.base}/console/?since=2026-12-01&until=2026-11-01")
    alert = await page.locator("main .error").first.inner_text()
    assert "From" in alert and "after" in alert
    await page.goto(f"{seeded.base}/console/?session=0b7e1f2a-001")
    texts = await page.locator("ol.memories p.text").all_inner_texts()
    assert sorted(texts) == sorted(f"Module {i} keeps its own settings file" for i in range(10, 20))
    await page.context.close()


async def test_favicon_needs_no_token_and_a_memory_url_that_is_no_id_is_not_found(seeded: World) -> None:
    page = await seeded.page("alice")
    refused: list[str] = []
    page.on("response", lambda r: refused.append(r.url) if r.status == 401 else None)
    await page.goto(f"{seeded.base}/console/")
    await page.goto(f"{seeded.base}/console/live")
    assert refused == []
    icon = await page.request.get(f"{seeded.base}/favicon.ico")
    assert icon.status == 200
    response = await page.goto(f"{seeded.base}/console/memories/not-a-uuid")
    assert response is not None and response.status == 404
    assert "badly formed" not in await page.content()
    await page.context.close()


async def test_live_starts_with_the_newest_memories_with_readable_times_and_projects(seeded: World) -> None:
    newest = (await seeded.running.providers.store.list([project_key(A)], limit=1))[0]
    page = await seeded.page("alice")
    await page.goto(f"{seeded.base}/console/live")
    first = page.locator("#live li").first
    assert newest.text[:40] in await first.inner_text()
    meta = await first.locator(".meta").inner_text()
    assert A in meta and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", meta) and "T" not in meta.split(A)[0]
    await page.context.close()


async def test_the_doctors_report_is_a_page_not_a_json_dump(seeded: World) -> None:
    page = await seeded.page("ops")
    await page.goto(f"{seeded.base}/console/pipeline")
    main = await page.locator("main").inner_text()
    assert '{\n  "' not in main and '"mode":' not in main
    await page.context.close()


async def test_search_rows_are_in_the_order_of_the_score_shown(seeded: World) -> None:
    page = await seeded.page("alice")
    await page.goto(f"{seeded.base}/console/?q=settings+file+module&project={project_key(A)}")
    scores = [float(s.split()[-1]) for s in await page.locator("ol.memories .score").all_inner_texts()]
    assert len(scores) > 3
    assert scores == sorted(scores, reverse=True), scores
    whys = await page.locator("ol.memories .why").all_inner_texts()
    assert len(whys) == len(scores) and all(w.startswith("matched by ") for w in whys)
    await page.context.close()


async def test_sessions_are_timelines_titled_by_their_first_prompt_across_projects(seeded: World) -> None:
    page = await seeded.page("alice")
    await page.goto(f"{seeded.base}/console/sessions")  # no project chosen: the recent ones of every project
    titles = await page.locator("li.session p.text").all_inner_texts()
    assert "where are module 59's settings?" in titles
    await page.click("li.session a >> text=where are module 59's settings?")
    await page.wait_for_load_state()
    assert await page.locator(".session-title").inner_text() == "where are module 59's settings?"
    [exchange] = await page.locator("li.exchange").all()
    roles = await exchange.locator(".role").all_inner_texts()
    assert [r.lower() for r in roles] == ["user", "assistant"]
    assert "Module 59 keeps its own settings file" in await exchange.locator("ul.made").inner_text()
    await page.context.close()


async def test_a_memory_says_whether_it_is_in_the_next_block_and_why(seeded: World) -> None:
    store = seeded.running.providers.store
    listed = await store.list([project_key(A)])
    newest = next(m for m in listed if m.text == "Module 59 keeps its own settings file")
    oldest = next(m for m in listed if m.text == "Module 0 keeps its own settings file")
    page = await seeded.page("alice")
    await page.goto(f"{seeded.base}/console/memories/{newest.id}")
    assert await page.locator(".in-block").inner_text() == "in the next block: section “Tech Context”"
    await page.goto(f"{seeded.base}/console/memories/{oldest.id}")
    assert (
        "not in the next block: section “Tech Context” shows its newest 10"
        in await page.locator(".in-block").inner_text()
    )
    await page.context.close()


async def test_stats_count_memories_by_project_type_day_and_cli_and_show_storage(seeded: World) -> None:
    store = seeded.running.providers.store
    active = await store.count([project_key(A)], include_superseded=False)
    page = await seeded.page("alice")
    await page.goto(f"{seeded.base}/console/stats")
    main = await page.locator("main").inner_text()
    assert f"{A} ({active})" in main
    assert "tech-context" in main and "claude-code" in main and "publish" in main
    assert re.search(r"holds [\d.]+ MB", main)
    assert "BOB-SECRET" not in main and "/repos/beta" not in main
    await page.context.close()


async def test_a_forgotten_memory_is_restored_and_the_restore_is_in_its_history(seeded: World) -> None:
    store = seeded.running.providers.store
    [target] = [m for m in await store.list([project_key(A)]) if m.text == "Module 3 keeps its own settings file"]
    page = await seeded.page("alice")
    await page.goto(f"{seeded.base}/console/memories/{target.id}")
    await page.fill("#forget-reason", "by mistake")
    await page.click("form[action$='/forget'] button")
    await page.wait_for_url(re.compile(r".*/console/\?notice=forgotten"))
    await page.goto(f"{seeded.base}/console/memories/{target.id}")
    await page.fill("#restore-reason", "it was right after all")
    await page.click("form[action$='/restore'] button")
    await page.wait_for_url(re.compile(r".*notice=restored"))
    restored = await store.get(target.id)
    assert restored is not None and restored.active
    timeline = await page.locator("ol.timeline").inner_text()
    assert "deleted" in timeline and "by mistake" in timeline
    assert "restore: it was right after all" in timeline and "alice@example.com" in timeline
    await page.context.close()


async def test_the_theme_follows_the_system_and_the_keyboard_reaches_the_rows(seeded: World) -> None:
    import os
    from pathlib import Path

    context = await seeded.browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme="dark")
    page = await context.new_page()
    await page.goto(await seeded.sign_in_link("alice"))
    await page.wait_for_url(f"{seeded.base}/console/")
    background = await page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(13, 17, 23)"
    if os.environ.get("MEMSTREAM_CONSOLE_SCREENSHOTS"):
        await page.screenshot(path=str(Path(os.environ["MEMSTREAM_CONSOLE_SCREENSHOTS"]) / "console-dark-1440.png"))
    # "/" goes to the search box; "j" to the first row, then the next.
    await page.keyboard.press("/")
    assert await page.evaluate("document.activeElement.id") == "q"
    await page.locator("main h1").click()
    await page.keyboard.press("j")
    await page.keyboard.press("j")
    texts = await page.locator("ol.memories p.text a").all_inner_texts()
    assert await page.evaluate("document.activeElement.textContent") == texts[1]
    await context.close()
