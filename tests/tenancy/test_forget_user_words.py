"""Issue 41.2: ``forget --user`` removes every memory holding the user's words, in every scope.

A raw-mode pipeline on the embedded broker, the durable turn log on. Alice talks in her own project and
in the team project (once saying a standing preference, which goes to her user scope); Bob and Carol talk
in the team project too. An admin forgets Alice through ``POST /admin/forget``, then Bob through
``memstream forget --user`` (the CLI, over HTTP to the served API). Each time: the reply says per scope
what was removed; no read path returns their words; their exchanges' audit records, their turns in the
durable log and their sessions' windows are gone; the others keep theirs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from memstream.auth import FailureLimiter, ProjectSharing, TokenStore, admin_principal, user_principal
from memstream.commands.access import cmd_forget
from memstream.front.app import create_app
from memstream.identity import project_key, turn_session_key, user_key
from memstream.intake.publish import make_turn, publish, publish_events
from memstream.intake.turnlog import TurnLog, path_of
from memstream.schemas import ForgetScope, Turn, decode
from memstream.serve.context import ApiContext
from memstream.topics import FORGOTTEN
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ALICE, BOB, CAROL = "alice@example.com", "bob@example.com", "carol@example.com"
#: Forgotten through MCP's forget_user and through the console's form.
DAVE, ERIN = "dave@example.com", "erin@example.com"
NAMES = {ALICE: "ALICE", BOB: "BOB", CAROL: "CAROL", DAVE: "DAVE", ERIN: "ERIN"}


@dataclass
class World:
    running: runner.Running
    url: str
    tokens: dict[str, str]
    team: str
    own: str
    #: Each user's exchange memories (Memory.speaker), read before their forget.
    exchange_ids: dict[str, list[str]] = field(default_factory=dict)


def word(user: str, project: str, team: str) -> str:
    return f"{NAMES[user]}{'TEAM' if project == team else 'OWN'}QX"


def sessions(world: World) -> list[tuple[str, str, str]]:
    """(user, project, session id) of every conversation said."""
    return [
        (ALICE, world.own, "alice-own"),
        (ALICE, world.team, "alice-team"),
        (BOB, world.team, "bob-team"),
        (CAROL, world.team, "carol-team"),
        (DAVE, world.team, "dave-team"),
        (ERIN, world.team, "erin-team"),
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_module_dir: Path) -> AsyncIterator[World]:
    running = await start_pipeline(tmp_module_dir / "data", turn_log="on", phase1_scan_interval=0.2)
    server: uvicorn.Server | None = None
    serving: asyncio.Task[None] | None = None
    try:
        team, own = str(tmp_module_dir / "team"), str(tmp_module_dir / "alice-own")
        settings = running.settings
        store = TokenStore(settings.tokens_file)
        tokens = {
            ALICE: store.create(user_principal(ALICE, [team, own]))[0],
            BOB: store.create(user_principal(BOB, [team]))[0],
            CAROL: store.create(user_principal(CAROL, [team]))[0],
            DAVE: store.create(user_principal(DAVE, [team]))[0],
            ERIN: store.create(user_principal(ERIN, [team]))[0],
            "admin": store.create(admin_principal("ops"))[0],
        }

        async def send_forget(event: ForgetScope) -> None:
            await publish_events(running.bootstrap, settings.topic_prefix, FORGOTTEN, [(event.scope_key, event)])

        ctx = ApiContext(
            providers=running.providers,
            tokens=store,
            sharing=ProjectSharing(settings.sharing_file),
            publish_forget=send_forget,
            limiter=FailureLimiter(limit=1_000_000),
        )
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(create_app(ctx), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        )
        serving = asyncio.create_task(server.serve())
        world = World(running, f"http://127.0.0.1:{port}", tokens, team, own)
        turns = []
        for user, project, session in sessions(world):
            said = word(user, project, team)
            question = f"the zebra word for this work is {said}"
            if user == ALICE and project == team:
                question += ". I prefer the QUOKKAALICE colour theme"
            turns += [
                make_turn(session_id=session, project=project, role="user", content=question, user=user),
                make_turn(session_id=session, project=project, role="assistant", content=f"Noted: {said}.", user=user),
            ]
        with TurnLog(path_of(settings)) as log:
            await publish(running.bootstrap, settings.topic_prefix, turns, log=log)

        async def stored() -> bool:
            texts = " ".join(m.text for m in await running.providers.store.list(None, limit=1000))
            return all(word(u, p, team) in texts for u, p, _ in sessions(world)) and "QUOKKAALICE" in texts

        await eventually(stored, what="every exchange and Alice's preference stored")
        started = server

        async def listening() -> bool:
            return bool(started.started)

        await eventually(listening, what="the API to listen")
        yield world
    finally:
        if server is not None and serving is not None:
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        await running.stop()


async def everything_read_by(world: World, user: str) -> str:
    """What ``user`` (or the admin) reads through search, block, list, timeline and get, in every project."""
    out = []
    async with httpx.AsyncClient(base_url=world.url, headers={"Authorization": f"Bearer {world.tokens[user]}"}) as c:
        for project in (world.team, world.own):
            for path, params in (
                ("/search", {"q": "zebra word work colour theme", "limit": "50", "detail": "full"}),
                ("/block", {"q": "zebra word"}),
                ("/memories", {"limit": "500"}),
            ):
                reply = await c.get(path, params={**params, "project": project})
                if reply.status_code == 200:
                    out.append(reply.text)
            for _, _, session in sessions(world):
                reply = await c.get("/timeline", params={"session": session, "project": project})
                if reply.status_code == 200:
                    out.append(reply.text)
    return "\n".join(out)


async def words_left(world: World, user: str) -> list[str]:
    """Where ``user``'s words still are: memories, their audit records, the turn log, session windows."""
    running = world.running
    marks = {word(user, p, world.team) for u, p, _ in sessions(world) if u == user}
    marks |= {"QUOKKAALICE"} if user == ALICE else set()
    found = []
    every = await running.providers.store.list(None, include_superseded=True, limit=10_000)
    found += [f"memory {m.scope_key}" for m in every if any(w in m.text or w in m.source_chunk for w in marks)]
    for memory_id in world.exchange_ids.get(user, []):
        if await running.providers.history.for_memory(memory_id):
            found.append(f"history of {memory_id}")
    with TurnLog(path_of(running.settings)) as log:
        logged = [decode(t.event) for t in log.all()]
    found += [f"turn log {t.session_id}" for t in logged if isinstance(t, Turn) and t.user == user]
    windows: Any = running.pipeline.app.tables["snapshot-sessions"]
    for who, project, session in sessions(world):
        if who != user:
            continue
        window = windows.get(turn_session_key(session, project, user))
        if window is not None and window.applied:
            found.append(f"session window {session}")
    return found


async def exchange_ids(world: World) -> dict[str, list[str]]:
    every = await world.running.providers.store.list(None, include_superseded=True, limit=10_000)
    said = {u: [word(u, p, world.team) for who, p, _ in sessions(world) if who == u] for u in NAMES}
    return {u: [m.id for m in every if m.type == "conversation" and any(w in m.text for w in said[u])] for u in NAMES}


async def test_an_http_forget_of_a_user_removes_their_words_in_every_scope(world: World) -> None:
    world.exchange_ids = await exchange_ids(world)
    assert len(world.exchange_ids[ALICE]) == 2
    for memory_id in world.exchange_ids[ALICE]:
        assert await world.running.providers.history.for_memory(memory_id)
    assert await words_left(world, ALICE)  # the test can see them before
    async with httpx.AsyncClient(base_url=world.url, timeout=60) as client:
        reply = await client.post(
            "/admin/forget", json={"user": ALICE}, headers={"Authorization": f"Bearer {world.tokens['admin']}"}
        )
    assert reply.status_code == 202, reply.text
    data = reply.json()
    alice, team, own = user_key(ALICE), project_key(world.team), project_key(world.own)
    assert data["memories"] == {alice: 1, team: 1, own: 1}
    if data["done"]:
        assert data["removed"] == data["memories"]

    async def gone() -> bool:
        return not await words_left(world, ALICE)

    await eventually(gone, what="every word of Alice to go")
    for reader in ("admin", BOB, CAROL):
        assert "ALICE" not in await everything_read_by(world, reader)
    # The others keep theirs.
    bob_reads = await everything_read_by(world, BOB)
    assert word(BOB, world.team, world.team) in bob_reads
    assert word(CAROL, world.team, world.team) in await everything_read_by(world, CAROL)
    assert not {"BOBTEAMQX", "CAROLTEAMQX"} - set(await _texts(world))


async def _texts(world: World) -> list[str]:
    every = await world.running.providers.store.list(None, limit=10_000)
    return [w for w in ("BOBTEAMQX", "CAROLTEAMQX") if any(w in m.text for m in every)]


async def test_the_cli_forget_of_a_user_reports_each_scope_and_removes_their_exchanges(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.exchange_ids = await exchange_ids(world)
    port = int(world.url.rsplit(":", 1)[1])
    settings = dataclasses.replace(world.running.settings, token=world.tokens["admin"], http_port=port)
    args = argparse.Namespace(memory_id="", user=BOB, project=None, yes=True, reason="")
    assert await asyncio.to_thread(cmd_forget, args, settings) == 0
    printed = capsys.readouterr().out
    assert f"{project_key(world.team)}: " in printed and "of 1 memories removed" in printed
    assert f"{user_key(BOB)}: " in printed

    async def gone() -> bool:
        return not await words_left(world, BOB)

    await eventually(gone, what="every word of Bob to go")
    assert "BOBTEAMQX" not in await everything_read_by(world, "admin")
    assert "CAROLTEAMQX" in await everything_read_by(world, CAROL)


async def mcp_reads(world: World, who: str) -> str:
    """What ``who`` reads through MCP (search, block, list, timeline, get) in the team project."""
    out = []
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {world.tokens[who]}"})
    async with Client(streamable_http_client(f"{world.url}/mcp", http_client=http)) as client:
        calls: list[tuple[str, dict[str, Any]]] = [
            ("search_memories", {"query": "zebra word work", "project": world.team, "limit": 50, "detail": "full"}),
            ("get_memory_block", {"project": world.team, "query": "zebra word"}),
            ("list_memories", {"project": world.team, "limit": 500}),
            *[("timeline", {"session": s, "project": world.team}) for _, _, s in sessions(world)],
            ("get_memories", {"ids": [i for ids in world.exchange_ids.values() for i in ids] or ["none"]}),
        ]
        for tool, args in calls:
            result = await client.call_tool(tool, args)
            out.append("".join(getattr(part, "text", "") for part in result.content))
    return "\n".join(out)


async def test_an_mcp_forget_user_is_for_admins_and_removes_their_words_from_every_read_path(world: World) -> None:
    world.exchange_ids = await exchange_ids(world)
    assert "DAVETEAMQX" in await mcp_reads(world, "admin")  # the test can see them before
    for who, args in ((CAROL, {"user": DAVE, "confirm": True}), ("admin", {"user": DAVE})):
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {world.tokens[who]}"})
        async with Client(streamable_http_client(f"{world.url}/mcp", http_client=http)) as client:
            refused = await client.call_tool("forget_user", args)
        assert refused.is_error, (who, refused.content)
    assert "DAVETEAMQX" in " ".join(m.text for m in await world.running.providers.store.list(None, limit=1000))

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {world.tokens['admin']}"})
    async with Client(streamable_http_client(f"{world.url}/mcp", http_client=http)) as client:
        result = await client.call_tool("forget_user", {"user": DAVE, "confirm": True})
    assert not result.is_error, result.content
    report = json.loads(getattr(result.content[0], "text", ""))
    assert report["scope_key"] == user_key(DAVE)
    assert report["memories"] == {user_key(DAVE): 0, project_key(world.team): 1}

    async def gone() -> bool:
        return not await words_left(world, DAVE)

    await eventually(gone, what="every word of Dave to go")
    for reader in ("admin", CAROL):
        assert "DAVE" not in await mcp_reads(world, reader)
        assert "DAVE" not in await everything_read_by(world, reader)
    assert "CAROLTEAMQX" in await mcp_reads(world, CAROL)


async def test_the_console_forget_form_confirms_per_scope_then_forgets_and_reports(world: World) -> None:
    world.exchange_ids = await exchange_ids(world)
    team = project_key(world.team)

    def as_(who: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=world.url, headers={"Authorization": f"Bearer {world.tokens[who]}"}, timeout=60
        )

    async with as_(CAROL) as carol:
        assert (await carol.get("/console/forget-user")).status_code == 403
        refused = await carol.post("/console/forget-user", data={"user": ERIN, "confirm": "yes"})
        assert refused.status_code == 403
    # A signed-in browser's form must carry the CSRF token its pages hold.
    async with as_("admin") as admin:
        path = (await admin.post("/console/codes")).json()["path"]
    async with httpx.AsyncClient(base_url=world.url, timeout=60, follow_redirects=True) as browser:
        assert (await browser.get(path)).status_code == 200
        forged = await browser.post("/console/forget-user", data={"user": ERIN, "confirm": "yes"})
        assert forged.status_code == 403
    assert "ERINTEAMQX" in " ".join(m.text for m in await world.running.providers.store.list(None, limit=1000))

    async with as_("admin") as admin:
        asked = await admin.post("/console/forget-user", data={"user": ERIN})
        assert asked.status_code == 200, asked.text
        # The confirmation: what will go, per scope, and nothing gone yet.
        assert "Will be removed, per scope" in asked.text and team in asked.text and world.team in asked.text
        assert 'name="confirm" value="yes"' in asked.text
        assert "ERINTEAMQX" in " ".join(m.text for m in await world.running.providers.store.list(None, limit=1000))
        done = await admin.post("/console/forget-user", data={"user": ERIN, "confirm": "yes"})
        assert done.status_code == 200, done.text
        assert "Removed, per scope" in done.text and user_key(ERIN) in done.text and team in done.text

        async def gone() -> bool:
            return not await words_left(world, ERIN)

        await eventually(gone, what="every word of Erin to go")
        for page in ("/console/", f"/console/?q=zebra+word&project={team}", f"/console/sessions?project={team}"):
            assert "ERIN" not in (await admin.get(page)).text, page
    for reader in ("admin", CAROL):
        assert "ERIN" not in await everything_read_by(world, reader)
        assert "ERIN" not in await mcp_reads(world, reader)
    assert "CAROLTEAMQX" in await everything_read_by(world, CAROL)
