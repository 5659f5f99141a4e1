"""The console's "Stale code" view in Debian's chromium (issue 39): alice's memories citing a work tree on
this host, refactored since, are listed gone, changed and moved, the staler first, inside the bulk forget
form; one citing a work tree that is not here is ``unknown``; forgetting two from the view takes them out
(through the real pipeline's store agent). At 1440 and 390 px nothing is wider than the screen; with
MEMSTREAM_CONSOLE_SCREENSHOTS=DIR the view's screenshots are written there (``cites4-stale-{width}.png``).

The pipeline and the browser are the console suite's (tests/console/conftest.py: one pipeline per module)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from memstream.identity import project_key
from memstream.intake.publish import publish_events
from memstream.schemas import Citation, Fact, Provenance
from memstream.topics import FACTS
from tests.console.conftest import SAID, A, World
from tests.console.test_console_browser import screenshot
from tests.e2e.conftest import eventually
from tests.unit.test_citations_capture import commit_all, make_repo
from tests.unit.test_staleness import cite

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

LOGIN = "The login endpoint lives in api/auth.py and returns a JWT"
RETRY = "HTTP retries are set in config/http.yaml (three retries)"
CLOCK = "The clock helper lives in util/clock.py next to the timers"
STYLE = "String helpers live in util/strings.py with the slug function"
FAR = "Deploys run from scripts/deploy.sh on the release laptop"
#: Worst first: gone, changed, moved, then what cannot be checked on this host.
ORDER = [(LOGIN, "gone"), (RETRY, "changed"), (CLOCK, "moved"), (FAR, "unknown")]


def refactored(root: Path) -> dict[str, list[Citation]]:
    """A work tree cited at its first commit, then refactored: api/auth.py deleted, the cited line of
    config/http.yaml edited, util/clock.py moved to lib/clock.py, util/strings.py left as it was."""
    for path, text in {
        "api/auth.py": "def login():\n    return jwt()\n",
        "config/http.yaml": "timeout: 10\nretries: 3\n",
        "util/clock.py": "def now():\n    return 0\n",
        "util/strings.py": "def slug(text):\n    return text.lower()\n",
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    make_repo(root)
    first = commit_all(root, "first")
    cited = {
        LOGIN: [cite(root, "api/auth.py", first)],
        RETRY: [cite(root, "config/http.yaml", first, 2, 2)],
        CLOCK: [cite(root, "util/clock.py", first)],
        STYLE: [cite(root, "util/strings.py", first)],
        FAR: [Citation(path="scripts/deploy.sh", repo="/nowhere/on/this/host", commit=first)],
    }
    (root / "api" / "auth.py").unlink()
    (root / "config" / "http.yaml").write_text("timeout: 10\nretries: 5\n")
    (root / "lib").mkdir()
    subprocess.run(["git", "-C", str(root), "mv", "util/clock.py", "lib/clock.py"], check=True)
    commit_all(root, "refactor")
    return cited


def cited_fact(text: str, citations: list[Citation], i: int) -> Fact:
    key = project_key(A)
    return Fact(
        fact_id=f"stale-{key}-{i}",
        text=text,
        type="architecture",
        scope="project",
        scope_key=key,
        project=A,
        session_id="sess-code",
        source_chunk=f"[user] where is it? [assistant] {text}",
        origin="snapshot-sess-code",
        sources=[Provenance(source_type="claude", session_id="sess-code", citations=citations)],
        ts=SAID,
    )


@pytest.fixture(scope="module")
def work_tree(tmp_path_factory: Any) -> dict[str, list[Citation]]:
    return refactored(tmp_path_factory.mktemp("work") / "shop")


async def seeded(world: World, cited: dict[str, list[Citation]]) -> None:
    store = world.running.providers.store
    if any("api/auth.py" in m.text for m in await store.list([project_key(A)])):
        return
    facts = [cited_fact(text, citations, i) for i, (text, citations) in enumerate(cited.items())]
    await publish_events(world.running.bootstrap, world.running.settings.topic_prefix, FACTS, [
        (f.scope_key, f) for f in facts
    ])  # fmt: skip

    async def all_stored() -> bool:
        texts = {m.text for m in await store.list([project_key(A)])}
        return all(text in texts for text in cited)

    await eventually(all_stored, what="the memories that cite code")


async def shown(page: Any) -> list[tuple[str, str]]:
    """(text, status) of each listed memory, in the order shown."""
    rows = page.locator("form.bulk ol.memories > li")
    out = []
    for i in range(await rows.count()):
        row = rows.nth(i)
        status = re.sub(r"^.*\bcode-(\w+).*$", r"\1", str(await row.get_attribute("class")))
        out.append((await row.locator("p.text a").inner_text(), status))
    return out


async def test_the_stale_view_lists_worst_first_reads_at_both_widths_and_forgets_in_bulk(
    world: World, work_tree: dict[str, list[Citation]]
) -> None:
    await seeded(world, work_tree)
    out = os.environ.get("MEMSTREAM_CONSOLE_SCREENSHOTS", "")
    view = f"{world.base}/console/stale?project={project_key(A)}"  # as the picker sends it
    for width, height in ((1440, 900), (390, 844)):
        page = await world.page("alice", width=width, height=height)
        response = await page.goto(view)
        assert response is not None and response.status == 200
        assert await shown(page) == ORDER
        main = await page.locator("main").inner_text()
        assert "3 stale, 1 unknown" in main
        assert "moved to lib/clock.py" in main and "changed (+1 −1 lines)" in main and "gone (deleted in" in main
        assert "cite a work tree that is not on this host" in main
        assert STYLE not in main  # current: not stale
        # Readable on a phone: no element wider than the screen, the page included.
        wider = await page.evaluate(
            "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > "
            "window.innerWidth + 1).map(e => e.tagName + '.' + e.className)"
        )
        overflow = await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0 and not wider, f"wider than {width}px: {overflow}px, {wider}"
        if out:
            await screenshot(page, Path(out) / f"cites4-stale-{width}.png")
        await page.context.close()

    page = await world.page("alice")
    await page.goto(view)
    for text in (LOGIN, RETRY):
        await page.locator("form.bulk ol.memories > li", has_text=text).locator("input[name=id]").check()
    await page.fill("#bulk-reason", "the code moved on")
    await page.click("form.bulk button[type=submit]")
    await page.wait_for_url(re.compile(r".*/console/\?notice=forgot\+2\+memories"))

    async def forgotten() -> bool:
        await page.goto(view)
        return await shown(page) == [(CLOCK, "moved"), (FAR, "unknown")]

    await eventually(forgotten, what="the two forgotten memories to leave the stale view")
    store = world.running.providers.store
    active = {m.text for m in await store.list([project_key(A)])}
    assert LOGIN not in active and RETRY not in active and CLOCK in active
    await page.context.close()
