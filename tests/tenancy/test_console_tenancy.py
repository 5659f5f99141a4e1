"""The console behind the API's guard, in process (no browser): the session cookie opens only the
console and /events, never an API route; bearer tokens still work; open mode still needs a session;
every console response carries the security headers; and each action becomes the memory operation
the store agent applies, with who asked and why, and the audit outcome it names."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memstream.agents.store import apply
from memstream.auth import Principal, TokenStore, user_principal
from memstream.bootstrap import build_providers
from memstream.front.app import create_app
from memstream.identity import memory_id, normalize_content, project_key
from memstream.ports import Providers
from memstream.rules.audit import store_outcome, store_record
from memstream.schemas import Memory, MemoryOp
from memstream.serve.context import ApiContext
from tests.conftest import make_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")

A = "/repos/alpha"
T = datetime(2026, 11, 1, tzinfo=UTC)
TEXTS = ["Deploys go through Helm charts", "The queue is Kafka with two partitions", "Prefers pytest over unittest"]


@dataclass
class World:
    providers: Providers
    app: Any
    token: str
    ops: list[tuple[MemoryOp, str | None]] = field(default_factory=list)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://console.test")

    async def signed_in(self) -> httpx.AsyncClient:
        client = self.client()
        code = await client.post("/console/codes", headers={"Authorization": f"Bearer {self.token}"})
        assert (await client.get(code.json()["path"])).status_code == 303
        return client


async def csrf_of(client: httpx.AsyncClient, path: str = "/console/") -> str:
    page = await client.get(path)
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page.text)
    assert found is not None
    return found.group(1)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: Any) -> AsyncIterator[World]:
    settings = make_settings(tmp_path_factory.mktemp("console-tenancy"), api_open=False)
    providers = build_providers(settings)
    await providers.open()
    key = project_key(A)
    for text in TEXTS:
        digest = normalize_content(text).content_hash
        memory = Memory(
            id=memory_id(key, digest),
            text=text,
            type="tech-context",
            scope="project",
            scope_key=key,
            created_at=T,
            updated_at=T,
            content_hash=digest,
            embedding_model=providers.embedder.model,
        )
        await providers.store.upsert(memory, (await providers.embedder.embed_documents([text]))[0])
    tokens = TokenStore(settings.tokens_file)
    token = tokens.create(user_principal("alice@example.com", [A]))[0]
    world = World(providers, None, token)

    async def send(op: MemoryOp) -> None:
        # The store agent's own decision: what it changes, and the audit record it writes.
        applied = await apply(providers.store, op)  # type: ignore[arg-type]
        outcome = store_outcome(applied[0], op.cause) if applied else None
        world.ops.append((op, outcome))
        if applied and outcome:
            record = store_record(
                outcome, applied[1], op_id=op.op_id, cause=op.cause, ts=datetime.now(UTC), requested_by=op.requested_by
            )
            await providers.history.append([record])

    world.app = create_app(ApiContext(providers=providers, tokens=tokens, mcp=False, send_memory_op=send))
    try:
        yield world
    finally:
        await providers.close()


async def test_the_session_cookie_opens_the_console_only(world: World) -> None:
    client = await world.signed_in()
    some = (await world.providers.store.list([project_key(A)]))[0]
    assert (await client.get("/console/")).status_code == 200
    # An API route wants its bearer token: the cookie is no credential there, GET or POST.
    assert (await client.get(f"/memories/{some.id}")).status_code == 401
    assert (await client.post(f"/memories/{some.id}/forget", json={"reason": "x"})).status_code == 401
    assert (await client.get("/search", params={"q": "helm", "project": A})).status_code == 401
    # A bearer token still opens console pages (no cookie, so no CSRF either: it is not ambient).
    plain = world.client()
    bearer = {"Authorization": f"Bearer {world.token}"}
    assert (await plain.get("/console/", headers=bearer)).status_code == 200
    assert (await plain.get("/console/")).headers["location"] == "/console/signin"
    assert (await plain.post("/console/forget", data={"id": some.id, "reason": "x"})).status_code == 401


async def test_every_console_response_carries_the_security_headers(world: World) -> None:
    client = await world.signed_in()
    for path in ("/console/", "/console/signin", "/console/static/console.js", "/console/memories/nope"):
        headers = (await client.get(path)).headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
    assert (await client.get("/console/")).headers["cache-control"] == "no-store"


async def test_open_mode_still_signs_the_browser_in(tmp_path: Any) -> None:
    settings = make_settings(tmp_path)
    me = Principal(user="me@example.com", all_projects=True, admin=True)
    providers = build_providers(settings)
    await providers.open()
    app = create_app(ApiContext(providers=providers, open_principal=me, mcp=False))
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console.test") as client,
        contextlib.AsyncExitStack() as stack,
    ):
        stack.push_async_callback(providers.close)
        # Open mode lets API calls in as the one principal, but a page of another site must not act
        # through the console: without a session it sends the browser to sign in.
        assert (await client.get("/console/")).headers["location"] == "/console/signin"
        link = (await client.post("/console/codes")).json()["path"]
        assert (await client.get(link)).status_code == 303
        assert (await client.get("/console/")).status_code == 200


async def test_each_action_is_an_operation_with_who_and_why(world: World) -> None:
    client = await world.signed_in()
    [helm, kafka, pytest_] = [
        next(m for m in await world.providers.store.list([project_key(A)]) if m.text == t) for t in TEXTS
    ]
    csrf = await csrf_of(client)
    pinned = await client.post(f"/console/memories/{helm.id}/pin", data={"csrf": csrf})
    assert pinned.status_code == 303
    await client.post(f"/console/memories/{helm.id}/unpin", data={"csrf": csrf})
    await client.post(f"/console/memories/{kafka.id}/wrong", data={"csrf": csrf, "reason": "it is Redpanda"})
    corrected = await client.post(
        f"/console/memories/{pytest_.id}/correct",
        data={"csrf": csrf, "text": "Prefers pytest with plain asserts", "reason": "more precise"},
    )
    new_id = corrected.headers["location"].split("/console/memories/")[1].split("?")[0]
    made = [(type(op).__name__, op.cause, op.requested_by, outcome) for op, outcome in world.ops]
    assert made == [
        ("SetImportance", "pin", "alice@example.com", "pinned"),
        ("SetImportance", "unpin", "alice@example.com", "unpinned"),
        ("SupersedeMemory", "marked wrong: it is Redpanda", "alice@example.com", "deleted"),
        ("CreateMemory", "correct: more precise", "alice@example.com", "created"),
        ("SupersedeMemory", "correct: more precise", "alice@example.com", "updated"),
    ]
    # The page the action returns to shows the record already: who, and why.
    shown = (await client.get(f"/console/memories/{kafka.id}")).text
    assert "<strong>alice@example.com</strong>" in shown and "marked wrong: it is Redpanda" in shown
    old = await world.providers.store.get(pytest_.id)
    assert old is not None and old.superseded_by == new_id
    new = await world.providers.store.get(new_id)
    assert new is not None and new.text == "Prefers pytest with plain asserts" and new.active
    # Already superseded: nothing more is sent for it.
    before = len(world.ops)
    await client.post(f"/console/memories/{kafka.id}/forget", data={"csrf": csrf, "reason": "again"})
    assert len(world.ops) == before
    # A forget without a reason is refused; many at once need one reason.
    await client.post("/console/forget", data={"csrf": csrf, "id": [new_id, helm.id], "reason": ""})
    assert len(world.ops) == before
    done = await client.post("/console/forget", data={"csrf": csrf, "id": [new_id, helm.id], "reason": "tidy up"})
    assert "forgot+2+memories" in done.headers["location"]
    assert [(op.cause, outcome) for op, outcome in world.ops[before:]] == [("forget: tidy up", "deleted")] * 2


async def test_the_export_is_the_viewers_memories_as_json_lines(world: World) -> None:
    client = await world.signed_in()
    exported = await client.get("/console/export")
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    assert "attachment" in exported.headers["content-disposition"]
    lines = exported.text.splitlines()
    assert len(lines) == await world.providers.store.count([project_key(A)])


async def test_documents_are_added_and_removed_by_an_admin_only(tmp_path: Any) -> None:
    settings = make_settings(tmp_path, api_open=False)
    providers = build_providers(settings)
    await providers.open()
    tokens = TokenStore(settings.tokens_file)
    admin = tokens.create(user_principal("ops@example.com", all_projects=True, admin=True))[0]
    alice = tokens.create(user_principal("alice@example.com", [A]))[0]
    sent: list[Any] = []

    async def send_document(request: Any) -> None:
        sent.append(request)

    app = create_app(ApiContext(providers=providers, tokens=tokens, mcp=False, send_document=send_document))
    try:
        for who, token in (("alice", alice), ("admin", admin)):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://c.test") as client:
                code = await client.post("/console/codes", headers={"Authorization": f"Bearer {token}"})
                await client.get(code.json()["path"])
                csrf = await csrf_of(client)
                body = {"csrf": csrf, "project": A, "title": "Runbook", "content": "Restart the worker with make up."}
                added = await client.post("/console/documents", data=body)
                if who == "alice":
                    assert added.status_code == 403 and sent == []
                    assert (await client.get(f"/console/documents?project={A}")).status_code == 403
                    continue
                assert added.status_code == 303 and "queued" in added.headers["location"]
                [request] = sent
                assert request.title == "Runbook" and request.project == A
                # Removing one the store does not hold is a clear refusal, nothing sent.
                gone = await client.post("/console/documents/remove", data={"csrf": csrf, "id": "nope", "project": A})
                assert gone.status_code == 404 and len(sent) == 1
    finally:
        await providers.close()


@pytest.mark.asyncio(loop_scope="module")
async def test_the_token_form_lets_a_valid_token_in_after_others_failed_from_the_same_address(
    world: World, tmp_path: Path
) -> None:
    """Issue 27.3 at the console's door: failures from one address (another local process, a revoked
    token retrying) never refuse a token that verifies; they only slow the guessing."""
    tokens = TokenStore(tmp_path / "tokens.json")
    valid = tokens.create(user_principal("alice@example.com", [A]))[0]
    app = create_app(ApiContext(providers=world.providers, tokens=tokens, mcp=False))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://console.test") as client:

        async def sign_in(token: str) -> int:
            csrf = await csrf_of(client, "/console/signin")
            reply = await client.post("/console/signin", data={"csrf": csrf, "token": token})
            return reply.status_code

        statuses = [await sign_in(f"mst_{n:012x}_not-a-real-secret") for n in range(12)]
        assert statuses[0] == 401 and statuses[-1] == 429  # the guessing is slowed…
        assert await sign_in(valid) == 303  # …but the valid token gets in all the same
