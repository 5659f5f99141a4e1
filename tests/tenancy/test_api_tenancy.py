"""Every API route, attacked as another tenant would: missing, wrong and revoked tokens, another
user's token, another project's id, and parameter and path tricks. Each answer is 401, 403 or 400
(or a 200 holding only the caller's own records), and no answer ever holds a foreign record.

The app is the real one (memstream.front.app over the edge store, the bundled embedder and the graph),
called in process through httpx's ASGI transport; a dummy ASGI app is mounted at /mcp, where the
MCP endpoint mounts, to show the guard covers mounted apps."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from starlette.routing import Mount

from memstream.auth import FailureLimiter, TokenStore, admin_principal, user_principal
from memstream.bootstrap import build_providers
from memstream.front.app import create_app
from memstream.identity import derived_id, memory_id, normalize_content, project_key, user_key
from memstream.ports import Providers
from memstream.schemas import Entity, ForgetScope, HistoryRecord, Memory, Turn
from memstream.serve.context import ApiContext
from memstream.serve.guard import principal_of
from tests.conftest import make_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")

A, B = "/repos/alpha", "/repos/beta"
ALICE, BOB = "alice@example.com", "bob@example.com"
#: Text only the named scope holds: finding it in another caller's answer is a leak.
MARKS = {
    project_key(A): "ALPHA-PROJECT-FACT",
    project_key(B): "BETA-PROJECT-SECRET",
    user_key(ALICE): "ALICE-PRIVATE-TASTE",
    user_key(BOB): "BOB-PRIVATE-TASTE",
}
T = datetime(2026, 11, 1, tzinfo=UTC)


async def mcp_dummy(scope: Any, receive: Any, send: Any) -> None:
    principal = principal_of(scope)
    body = json.dumps({"mcp": principal.describe() if principal else None}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


@dataclass
class World:
    client: httpx.AsyncClient
    providers: Providers
    tokens: dict[str, str]
    turns: list[Turn] = field(default_factory=list)
    forgets: list[ForgetScope] = field(default_factory=list)

    async def get(self, path: str, who: str | None, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        return await self.client.get(path, params=params, headers=headers)

    async def post(self, path: str, who: str | None, body: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        return await self.client.post(path, content=json.dumps(body), headers=headers)


def leaks(text: str, *, allowed: set[str]) -> list[str]:
    return [mark for key, mark in MARKS.items() if key not in allowed and mark in text]


async def seed(providers: Providers) -> None:
    for key, mark in MARKS.items():
        scope = "user" if key.startswith("u_") else "project"
        text = f"{mark}: prefers tabs and uses the zebra build tool"
        digest = normalize_content(text).content_hash
        memory = Memory(
            id=memory_id(key, digest),
            text=text,
            type="preference" if scope == "user" else "tech-context",
            scope=scope,  # type: ignore[arg-type]
            scope_key=key,
            created_at=T,
            updated_at=T,
            content_hash=digest,
            embedding_model=providers.embedder.model,
        )
        await providers.store.upsert(memory, (await providers.embedder.embed_documents([text]))[0])
        await providers.history.append(
            [
                HistoryRecord(
                    record_id=derived_id("record", key),
                    memory_id=memory.id,
                    scope_key=key,
                    outcome="created",
                    fact_text=text,
                    ts=T,
                )
            ]
        )
        assert providers.graph is not None
        await providers.graph.apply(memory.id, key, [Entity(source="zebra", relationship="builds", target=mark)])


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: Any) -> AsyncIterator[World]:
    data = tmp_path_factory.mktemp("tenancy-api")
    settings = make_settings(data, api_open=False, graph_enabled=True)
    providers = build_providers(settings)
    await providers.open()
    try:
        await seed(providers)
        store = TokenStore(settings.tokens_file)
        tokens = {
            "alice": store.create(user_principal(ALICE, [A]))[0],
            "bob": store.create(user_principal(BOB, [B]))[0],
            "admin": store.create(admin_principal("ops"))[0],
        }
        revoked, record = store.create(user_principal(ALICE, [A, B]))
        store.revoke(record.id)
        tokens["revoked"] = revoked
        tokens["wrong"] = tokens["alice"][:-3] + "xyz"
        world = World(httpx.AsyncClient(), providers, tokens)

        async def publish_turns(turns: Any) -> None:
            world.turns.extend(turns)

        async def publish_forget(event: ForgetScope) -> None:
            world.forgets.append(event)

        ctx = ApiContext(
            providers=providers,
            tokens=store,
            publish_turns=publish_turns,
            publish_forget=publish_forget,
            routes=[Mount("/mcp", app=mcp_dummy)],
            limiter=FailureLimiter(limit=1_000_000),  # the lock-out has its own test
        )
        transport = httpx.ASGITransport(app=create_app(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as client:
            world.client = client
            yield world
    finally:
        await providers.close()


READS = [("/search", {"q": "zebra build tool tabs", "project": A}), ("/block", {"q": "zebra", "project": A})]
#: Issue 25's reads: a timeline, several memories by id.
TRAIL_READS = [("/timeline", {"session": "s", "project": A}), ("/memories", {"ids": "a,b"})]
ADMIN_READS = [("/memories", {}), ("/history", {"scope": user_key(BOB)}), ("/metrics", {})]
EVERY_GET = [*READS, *TRAIL_READS, *ADMIN_READS, ("/mcp/", {}), ("/mcp/tools", {})]
POSTS = [
    (
        "/turns",
        [{"schema": "turn.v1", "session_id": "s", "project": A, "role": "user", "content": "x", "ts": T.isoformat()}],
    ),
    ("/admin/forget", {"user": BOB}),
]


@pytest.mark.parametrize("who", [None, "wrong", "revoked"])
async def test_no_valid_token_no_answer_anywhere(world: World, who: str | None) -> None:
    for path, params in EVERY_GET:
        response = await world.get(path, who, **params)
        assert response.status_code == 401, (path, who, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert not leaks(response.text, allowed=set())
    for path, body in POSTS:
        assert (await world.post(path, who, body)).status_code == 401, (path, who)
    assert world.turns == [] and world.forgets == []


async def test_health_is_public_and_tells_no_tenant_anything(world: World) -> None:
    response = await world.get("/health", None)
    assert response.status_code == 200 and "memories" not in response.json()


async def test_a_user_reads_its_project_and_its_own_scope_only(world: World) -> None:
    allowed = {project_key(A), user_key(ALICE)}
    search = await world.get("/search", "alice", q="zebra build tool tabs", project=A, limit=100, detail="full")
    assert search.status_code == 200
    found = {hit["scope_key"] for hit in search.json()["results"]}
    assert found == allowed and not leaks(search.text, allowed=allowed)
    block = await world.get("/block", "alice", q="zebra", project=A)
    assert block.status_code == 200 and "ALICE-PRIVATE-TASTE" in block.text
    assert not leaks(block.text, allowed=allowed)


async def test_another_users_token_cannot_read_this_project(world: World) -> None:
    for path, params in READS:
        response = await world.get(path, "bob", **params)
        assert response.status_code == 403, path
        assert not leaks(response.text, allowed=set())


async def test_another_projects_id_is_refused(world: World) -> None:
    for project in (B, project_key(B), f"{A}/../beta", f"{A}/../../repos/beta", "/repos//beta/"):
        for path, params in READS:
            response = await world.get(path, "alice", **{**params, "project": project})
            assert response.status_code == 403, (path, project, response.text)
            assert not leaks(response.text, allowed=set())


async def test_a_unicode_look_alike_is_another_project_and_refused(world: World) -> None:
    for look_alike in ("/repos/\u0430lpha", "/repos/alpha\u200b", "/repos/ＡLPHA", "/repos/alpha\u0301"):
        response = await world.get("/search", "alice", q="zebra", project=look_alike)
        assert response.status_code == 403, look_alike
        assert not leaks(response.text, allowed=set())


@pytest.mark.parametrize(
    "params",
    [
        {"user": BOB},
        {"user": "BOB@example.com "},
        {"scope": user_key(BOB)},
        {"scope_key": project_key(B)},
        {"user_key": user_key(BOB)},
        {"project": ""},
        {"project": "repos/alpha"},
        {"project": "../beta"},
        {"project": "/repos/alpha\x00/../beta"},
        {"project": "/" + "a" * 10_000},
        {"q": "x" * 10_000},
    ],
)
async def test_parameter_tricks_are_bad_requests(world: World, params: dict[str, str]) -> None:
    for path, base in READS:
        response = await world.get(path, "alice", **{**base, **params})
        assert response.status_code == 400, (path, params, response.text)
        assert not leaks(response.text, allowed=set())


async def test_naming_ones_own_user_is_allowed_and_changes_nothing(world: World) -> None:
    """Clients (hooks, MCP) send their identity; it may only be the token's own."""
    for user in (ALICE, " Alice@Example.com", ""):
        response = await world.get(
            "/search", "alice", q="zebra build tool tabs", project=A, user=user, limit=100, detail="full"
        )
        assert response.status_code == 200, user
        assert {hit["scope_key"] for hit in response.json()["results"]} == {project_key(A), user_key(ALICE)}


async def test_several_ids_and_a_timeline_show_only_what_the_token_may_read(world: World) -> None:
    allowed = {project_key(A), user_key(ALICE)}
    text = "{}: prefers tabs and uses the zebra build tool"
    every = {key: memory_id(key, normalize_content(text.format(mark)).content_hash) for key, mark in MARKS.items()}
    got = await world.get("/memories", "alice", ids=",".join(every.values()))
    assert got.status_code == 200 and not leaks(got.text, allowed=allowed)
    assert {m["scope_key"] for m in got.json()["memories"]} == allowed and len(got.json()["missing"]) == 2
    for foreign in [one for key, one in every.items() if key not in allowed]:
        around = await world.get("/timeline", "alice", id=foreign, project=A)
        assert around.status_code == 404 and not leaks(around.text, allowed=set())
    assert (await world.get("/timeline", "bob", session="s", project=A)).status_code == 403
    mine = await world.get("/timeline", "alice", id=every[project_key(A)], project=A, before=10, after=10)
    assert mine.status_code == 200 and not leaks(mine.text, allowed=allowed)


async def test_a_limit_that_is_not_a_number_is_a_bad_request(world: World) -> None:
    for limit in ("lots", "1e9", "", "10; DROP"):
        response = await world.get("/search", "alice", q="zebra", project=A, limit=limit)
        assert response.status_code == 400, limit
    assert (await world.get("/memories", "admin", limit="lots")).status_code == 400


async def test_a_huge_limit_is_capped_not_obeyed(world: World) -> None:
    response = await world.get("/search", "alice", q="zebra", project=A, limit=10**12)
    assert response.status_code == 200 and len(response.json()["hits"]) <= 100
    assert (await world.get("/search", "alice", q="zebra", project=A, limit=-5)).status_code == 200


async def test_admin_routes_refuse_users(world: World) -> None:
    for who in ("alice", "bob"):
        for path, params in ADMIN_READS:
            response = await world.get(path, who, **params)
            assert response.status_code == 403, (path, who)
            assert not leaks(response.text, allowed=set())
        assert (await world.post("/admin/forget", who, {"user": BOB})).status_code == 403
    assert world.forgets == []


async def test_an_admin_reads_the_admin_routes(world: World) -> None:
    everything = await world.get("/memories", "admin")
    assert everything.status_code == 200 and len(everything.json()["memories"]) == len(MARKS)
    history = await world.get("/history", "admin", scope=user_key(BOB))
    assert [r["scope_key"] for r in history.json()["records"]] == [user_key(BOB)]
    assert (await world.get("/metrics", "admin")).status_code == 200


async def test_an_admin_without_a_user_reads_a_project_but_no_user_scope(world: World) -> None:
    response = await world.get("/search", "admin", q="zebra", project=B, limit=100, detail="full")
    assert {hit["scope_key"] for hit in response.json()["results"]} == {project_key(B)}


async def test_path_tricks_do_not_reach_a_route_unauthenticated(world: World) -> None:
    transport = world.client._transport
    for raw in (
        "/health/../memories",
        "/health/%2e%2e/memories",
        "/%2Fmemories",
        "/memories/",
        "/MEMORIES",
        "/health/",
    ):
        request = httpx.Request("GET", f"http://memstream{raw}")
        response = await transport.handle_async_request(request)
        await response.aread()
        assert response.status_code in (401, 404), raw
        assert not leaks(response.content.decode(), allowed=set())


async def test_publishing_is_scoped_to_the_callers_user_and_projects(world: World) -> None:
    def turn(project: str, user: str = "") -> dict[str, Any]:
        return {
            "schema": "turn.v1",
            "session_id": "s",
            "project": project,
            "role": "user",
            "content": "hi",
            "ts": T.isoformat(),
            "user": user,
        }

    assert (await world.post("/turns", "alice", [turn(A, BOB)])).status_code == 403
    assert (await world.post("/turns", "alice", [turn(B)])).status_code == 403
    assert (await world.post("/turns", "alice", [turn(A), turn(B)])).status_code == 403, "all or nothing"
    assert (await world.post("/turns", "alice", [turn("alpha")])).status_code == 400
    assert (await world.post("/turns", "alice", {"not": "a list"})).status_code == 400
    assert (await world.post("/turns", "admin", [turn(A)])).status_code == 403, "an admin has no user to publish as"
    assert world.turns == []
    accepted = await world.post("/turns", "alice", [turn(A), turn(A, ALICE)])
    assert accepted.status_code == 202
    assert [(t.project, t.user) for t in world.turns] == [(A, ALICE), (A, ALICE)]


async def test_the_admin_forget_route_names_one_scope(world: World) -> None:
    assert (await world.post("/admin/forget", "admin", {"user": BOB, "project": B})).status_code == 400
    assert (await world.post("/admin/forget", "admin", {})).status_code == 400
    assert (await world.post("/admin/forget", "admin", {"project": "relative/dir"})).status_code == 400
    assert (await world.post("/admin/forget", "admin", {"everyone": "yes"})).status_code == 400
    response = await world.post("/admin/forget", "admin", {"user": BOB})
    assert response.status_code == 202 and response.json()["scope_key"] == user_key(BOB)
    assert [(f.scope, f.scope_key, f.requested_by) for f in world.forgets] == [("user", user_key(BOB), "admin")]


async def test_the_admin_forget_says_which_topics_still_hold_the_words(world: World) -> None:
    response = await world.post("/admin/forget", "admin", {"user": BOB})
    held = response.json()["words_held_until"]
    assert held["turns"] is None, "the turns topic keeps them forever"
    assert held["history"] and held["history"] > response.json()["forgotten_at"]
    assert world.forgets[-1].words_held_until["history"] is not None, "the ledger's audit record says so too"


async def test_the_mounted_app_sees_the_callers_principal(world: World) -> None:
    response = await world.get("/mcp/", "alice")
    assert response.status_code == 200 and response.json() == {"mcp": f"user {ALICE} on 1 project(s)"}


async def test_failed_attempts_are_rate_limited(world: World) -> None:
    ctx = ApiContext(
        providers=world.providers, tokens=TokenStore(Path("/nonexistent/tokens.json")), limiter=FailureLimiter(limit=5)
    )
    transport = httpx.ASGITransport(app=create_app(ctx))
    async with httpx.AsyncClient(transport=transport, base_url="http://memstream") as client:
        codes = [
            (
                await client.get(
                    "/search",
                    params={"q": "x", "project": A},
                    headers={"Authorization": f"Bearer mst_0123456789ab_guess{i}"},
                )
            ).status_code
            for i in range(8)
        ]
    assert codes == [401] * 5 + [429] * 3
