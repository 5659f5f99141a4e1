"""Issue 41.1: a person's conversations are theirs. Three users (alice, bob and an operator, each with a
user token) and an admin token; private projects, one shared project and one whose members' conversations
an admin shares. Every user says one exchange in every project they work in (raw mode, through extract,
decide and the store as the pipeline runs them), each with its own mark. Then every read path: search,
block, timeline, get, list, MCP, the console and /events. Nobody reads another's exchange unless the
project shares them; the project's facts stay shared. The real API app (MCP and console mounted) served
by uvicorn on loopback, the edge store and the bundled embedder."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from memstream.agents.decide import Decider
from memstream.agents.extract import _fact, fact_scope
from memstream.agents.store import apply
from memstream.auth import FailureLimiter, ProjectSharing, TokenStore, admin_principal, user_principal
from memstream.bootstrap import build_providers
from memstream.front.app import create_app
from memstream.identity import derived_id, normalize_content, project_key, user_key
from memstream.ports import Providers
from memstream.rules.extraction import raw_facts
from memstream.schemas import EmbeddedFact, Memory, MemoryUpdated, Snapshot
from memstream.serve.context import ApiContext
from memstream.serve.events import EventHub
from tests.conftest import make_settings
from tests.unit.test_events import FakeSource

pytestmark = pytest.mark.asyncio(loop_scope="module")

ALICE, BOB, OPERATOR = "alice@example.com", "bob@example.com", "operator@example.com"
USERS = {"alice": ALICE, "bob": BOB, "operator": OPERATOR}
TEAM, OPEN = "/repos/team", "/repos/open"
OWN = {"alice": "/repos/alice-own", "bob": "/repos/bob-own", "operator": "/repos/operator-own"}
#: The projects each user works in: their own, the team's, and the one an admin makes share.
WORKS_IN = {who: [OWN[who], TEAM, OPEN] for who in USERS}
T = datetime(2026, 11, 2, 9, tzinfo=UTC)
#: A project fact every member of the team project reads (no speaker).
FACT = "The zebra deployment of the team project runs from the TEAMFACT-Q4 pipeline"


def mark(who: str, project: str) -> str:
    """The word only ``who`` said, in ``project``: it names both, so a leak says whose and where."""
    place = "OWN" if project == OWN[who] else project.rsplit("/", 1)[1].upper()
    return f"{who.upper()}-{place}-Z9"


MARKS = {mark(who, p): (who, p) for who in USERS for p in WORKS_IN[who]}


def exchange(who: str, project: str) -> str:
    word = mark(who, project)
    return f"[user] the zebra deployment word for me here is {word}, keep it\n[assistant] Noted: {word}."


def session_of(who: str, project: str) -> str:
    return f"{who}-{project_key(project)}"


async def say(providers: Providers, who: str, project: str, n: int) -> None:
    """One raw exchange of ``who`` in ``project``, through extract, decide and the store."""
    text = exchange(who, project)
    snapshot = Snapshot(
        snapshot_id=f"{who}-{project}-1",
        session_id=session_of(who, project),
        project=project,
        project_key=project_key(project),
        user_key=user_key(USERS[who]),
        mode="raw",
        text=text,
        exchange=text,
        turn_index=1,
        exchange_id=derived_id("exchange", who, project),
        ts=T + timedelta(minutes=n),
    )
    decider = Decider(providers)
    for i, extracted in enumerate(raw_facts(snapshot.exchange)):
        scope = fact_scope(snapshot, extracted)
        assert scope is not None
        fact = _fact(snapshot, extracted, scope, i, [], raw=True)
        [vector] = await providers.embedder.embed_documents([fact.text])
        outcome = await decider.decide(EmbeddedFact(fact=fact, vector=vector, embedding_model="m"), [])
        for op in outcome.ops:
            await apply(providers.store, op)


async def add_fact(providers: Providers) -> None:
    from memstream.identity import memory_id

    digest = normalize_content(FACT).content_hash
    fact = Memory(
        id=memory_id(project_key(TEAM), digest),
        text=FACT,
        type="project-config",
        scope="project",
        scope_key=project_key(TEAM),
        created_at=T,
        updated_at=T,
        content_hash=digest,
        embedding_model=providers.embedder.model,
    )
    await providers.store.upsert(fact, (await providers.embedder.embed_documents([FACT]))[0])


@dataclass
class World:
    url: str
    tokens: dict[str, str]
    providers: Providers
    source: FakeSource
    hub: EventHub
    #: Every exchange's memory id, by its mark.
    ids: dict[str, str]
    settings: Any = None

    def headers(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _until(check: Callable[[], bool], timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: Any) -> AsyncIterator[World]:
    data = tmp_path_factory.mktemp("exchange-privacy")
    settings = make_settings(data, api_open=False)
    providers = build_providers(settings)
    await providers.open()
    server: uvicorn.Server | None = None
    serving: asyncio.Task[None] | None = None
    try:
        n = 0
        for who in USERS:
            for project in WORKS_IN[who]:
                n += 1
                await say(providers, who, project, n)
        await add_fact(providers)
        stored = await providers.store.list(None, limit=1000)
        ids = {word: m.id for m in stored for word in MARKS if word in m.text and m.type == "conversation"}
        assert set(ids) == set(MARKS), "every exchange is stored"
        tokens_file = TokenStore(settings.tokens_file)
        tokens = {who: tokens_file.create(user_principal(USERS[who], WORKS_IN[who]))[0] for who in USERS}
        tokens["admin"] = tokens_file.create(admin_principal("ops"))[0]
        source = FakeSource()
        hub = EventHub(source)
        ctx = ApiContext(
            providers=providers,
            tokens=tokens_file,
            sharing=ProjectSharing(settings.sharing_file),
            events=hub,
            limiter=FailureLimiter(limit=1_000_000),
        )
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(create_app(ctx), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        )
        serving = asyncio.create_task(server.serve())
        await _until(lambda: server is not None and server.started)
        yield World(f"http://127.0.0.1:{port}", tokens, providers, source, hub, ids, settings)
    finally:
        if server is not None and serving is not None:
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        await providers.close()


def allowed(who: str, shared: set[str]) -> set[str]:
    """The marks ``who`` may read: their own, and every mark said in a project that shares."""
    return {word for word, (speaker, project) in MARKS.items() if speaker == who or project in shared}


def leaked(text: str, who: str, shared: set[str]) -> set[str]:
    return {word for word in MARKS if word in text} - allowed(who, shared)


QUERY = "zebra deployment word keep it"


async def http_reads(world: World, who: str) -> dict[str, str]:
    """What ``who`` reads through every HTTP read path of the API and the console, by path."""
    out: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=world.url, headers=world.headers(who), timeout=60) as client:

        async def read(name: str, path: str, **params: str) -> None:
            reply = await client.get(path, params=params)
            assert reply.status_code in (200, 404), (name, reply.status_code, reply.text)
            out[name] = reply.text

        for project in WORKS_IN[who]:
            await read(f"search {project}", "/search", q=QUERY, project=project, detail="full", limit="50")
            await read(f"block {project}", "/block", q=QUERY, project=project)
            await read(f"list {project}", "/memories", project=project, limit="200")
            for other in USERS:
                session = session_of(other, project)
                await read(f"timeline {project} {other}", "/timeline", session=session, project=project)
                await read(f"console session {project} {other}", f"/console/sessions/{session}", project=project)
            for word, memory_id in world.ids.items():
                if MARKS[word][1] == project:
                    await read(f"timeline around {word}", "/timeline", id=memory_id, project=project)
            await read(f"console memories {project}", "/console/", project=project)
            await read(f"console block {project}", "/console/block", project=project, q=QUERY)
            await read(f"console sessions {project}", "/console/sessions", project=project)
        await read("get many", "/memories", ids=",".join(world.ids.values()))
        for word, memory_id in world.ids.items():
            await read(f"get {word}", f"/memories/{memory_id}")
            await read(f"console memory {word}", f"/console/memories/{memory_id}")
        await read("console all memories", "/console/")
        await read("console stats", "/console/stats")
        await read("console live", "/console/live")
        await read("console export", "/console/export")
    return out


async def mcp_reads(world: World, who: str) -> dict[str, str]:
    out: dict[str, str] = {}
    http = create_mcp_http_client(headers=world.headers(who))
    async with Client(streamable_http_client(f"{world.url}/mcp", http_client=http)) as client:

        async def call(name: str, tool: str, args: dict[str, Any]) -> None:
            result = await client.call_tool(tool, args)
            if result.structured_content is not None:
                out[name] = json.dumps(result.structured_content)
            else:
                out[name] = "".join(getattr(part, "text", "") for part in result.content)

        for project in WORKS_IN[who]:
            await call(f"mcp search {project}", "search_memories", {"query": QUERY, "project": project, "limit": 50})
            await call(f"mcp block {project}", "get_memory_block", {"project": project, "query": QUERY})
            await call(f"mcp list {project}", "list_memories", {"project": project, "limit": 200})
            for other in USERS:
                session = session_of(other, project)
                await call(f"mcp timeline {project} {other}", "timeline", {"session": session, "project": project})
        await call("mcp get", "get_memories", {"ids": list(world.ids.values())})
    return out


async def test_nobody_reads_anothers_exchange_on_any_read_path(world: World) -> None:
    for who in USERS:
        reads = {**await http_reads(world, who), **await mcp_reads(world, who)}
        for name, text in reads.items():
            assert not leaked(text, who, set()), (who, name, leaked(text, who, set()))
        # The reads are meaningful: each reads their own exchanges and the project's shared fact.
        for project in WORKS_IN[who]:
            assert mark(who, project) in reads[f"search {project}"], (who, project)
            assert mark(who, project) in reads[f"mcp search {project}"], (who, project)
            assert mark(who, project) in reads[f"console memories {project}"], (who, project)
        assert "TEAMFACT-Q4" in reads[f"search {TEAM}"] and "TEAMFACT-Q4" in reads[f"block {TEAM}"]


async def test_events_carry_only_the_readers_own_exchanges(world: World) -> None:
    stored = {m.id: m for m in await world.providers.store.list(None, limit=1000)}
    # The hub's subscriptions are opened through the route, one per user, then every exchange is announced.
    async with contextlib.AsyncExitStack() as stack:
        lines: dict[str, Any] = {}
        for who in USERS:
            client = await stack.enter_async_context(
                httpx.AsyncClient(base_url=world.url, headers=world.headers(who), timeout=60)
            )
            response = await stack.enter_async_context(client.stream("GET", "/events"))
            assert response.status_code == 200
            lines[who] = response.aiter_lines()
        await _until(lambda: world.hub.clients >= len(USERS))
        for n, memory_id in enumerate(world.ids.values()):
            event = MemoryUpdated(change="created", memory=stored[memory_id], op_id=f"op{n}", ts=T)
            world.source.push(n % 2, event)
        for who in USERS:
            seen: list[str] = []
            expected = len(allowed(who, set()))
            while len(seen) < expected:
                line = await asyncio.wait_for(anext(lines[who]), 10)
                if line.startswith("data:"):
                    seen.append(line)
            text = "\n".join(seen)
            assert not leaked(text, who, set()), (who, leaked(text, who, set()))
            assert {w for w in MARKS if w in text} == allowed(who, set())


async def test_an_admin_shares_a_projects_conversations_and_the_change_is_recorded(world: World) -> None:
    async with httpx.AsyncClient(base_url=world.url, timeout=60) as client:
        refused = await client.post(
            "/admin/sharing", json={"project": OPEN, "shared": True}, headers=world.headers("alice")
        )
        assert refused.status_code == 403
        changed = await client.post(
            "/admin/sharing", json={"project": OPEN, "shared": True}, headers=world.headers("admin")
        )
        assert changed.status_code == 200, changed.text
        assert changed.json()["change"]["by"] == "ops" and changed.json()["shared"] == [project_key(OPEN)]
        try:
            for who in USERS:
                reads = await http_reads(world, who)
                for name, text in reads.items():
                    assert not leaked(text, who, {OPEN}), (who, name, leaked(text, who, {OPEN}))
                others = {mark(o, OPEN) for o in USERS}
                found = {w for w in others if w in reads[f"search {OPEN}"]}
                assert found == others, (who, found)
                assert others <= {w for w in others if w in reads[f"console memories {OPEN}"]}
                # The team project did not opt in: still only their own.
                assert {w for w in MARKS if w in reads[f"search {TEAM}"]} == {mark(who, TEAM)}
        finally:
            back = await client.post(
                "/admin/sharing", json={"project": OPEN, "shared": False}, headers=world.headers("admin")
            )
            assert back.status_code == 200
        audit = (await client.get("/admin/sharing", headers=world.headers("admin"))).json()
        assert audit["shared"] == []
        assert [(c["shared"], c["by"]) for c in audit["changes"]] == [(True, "ops"), (False, "ops")]
        assert (await client.get("/admin/sharing", headers=world.headers("bob"))).status_code == 403


async def test_an_admin_reads_every_exchange(world: World) -> None:
    async with httpx.AsyncClient(base_url=world.url, headers=world.headers("admin"), timeout=60) as client:
        found = (await client.get("/search", params={"q": QUERY, "project": TEAM, "limit": "50"})).text
    assert {w for w in MARKS if w in found} == {mark(who, TEAM) for who in USERS}


async def test_the_share_verb_changes_the_setting_as_an_admin_and_lists_the_changes(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse
    import dataclasses

    from memstream.commands.access import cmd_share

    port = int(world.url.rsplit(":", 1)[1])
    admin = dataclasses.replace(world.settings, token=world.tokens["admin"], http_port=port)
    assert await asyncio.to_thread(cmd_share, argparse.Namespace(project=TEAM, off=False), admin) == 0
    assert "now share their conversations (changed by ops" in capsys.readouterr().out
    async with httpx.AsyncClient(base_url=world.url, headers=world.headers("bob"), timeout=60) as client:
        found = (await client.get("/search", params={"q": QUERY, "project": TEAM, "limit": "50"})).text
    assert {w for w in MARKS if w in found} == {mark(who, TEAM) for who in USERS}
    assert await asyncio.to_thread(cmd_share, argparse.Namespace(project=TEAM, off=True), admin) == 0
    assert await asyncio.to_thread(cmd_share, argparse.Namespace(project="", off=False), admin) == 0
    listed = capsys.readouterr().out
    assert "projects sharing their members' conversations: none" in listed
    assert listed.count(project_key(TEAM)) == 2 and "private  by ops" in listed
    user = dataclasses.replace(admin, token=world.tokens["alice"])
    with pytest.raises(Exception, match="403"):
        await asyncio.to_thread(cmd_share, argparse.Namespace(project=TEAM, off=False), user)
