"""Issue 27.5: a personal preference stated in a shared project's conversation. The model's reply
puts the preference in the project's scope; extract and decide, as the pipeline runs them, store it
in the speaker's user scope, so the other member of the project never reads it in search or the
block, while the project's facts of the same reply are read by both. The real API app over the edge
store and the bundled embedder, in process."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memstream.agents.decide import Decider
from memstream.agents.extract import _fact, fact_scope
from memstream.agents.store import apply
from memstream.auth import FailureLimiter, TokenStore, user_principal
from memstream.bootstrap import build_providers
from memstream.front.app import create_app
from memstream.identity import project_key, user_key
from memstream.ports import Providers
from memstream.rules.extraction import parse_facts
from memstream.schemas import EmbeddedFact, Snapshot
from memstream.serve.context import ApiContext
from tests.conftest import make_settings

pytestmark = pytest.mark.asyncio(loop_scope="module")

SHARED = "/repos/shared"
ALICE, BOB = "alice@example.com", "bob@example.com"
T = datetime(2026, 11, 1, tzinfo=UTC)
#: What a model answered for Alice's turn: her taste, in the project's scope, and a project fact.
REPLY = json.dumps(
    [
        {"memory": "Prefers the ZEBRA-STRIPES colour theme in every editor", "type": "preference", "scope": "project"},
        {"memory": "The zebra service builds with cargo in release mode", "type": "project-config"},
    ]
)


async def extract_and_store(providers: Providers) -> None:
    snapshot = Snapshot(
        snapshot_id="alice-s1-1",
        session_id="alice-s1",
        project=SHARED,
        project_key=project_key(SHARED),
        user_key=user_key(ALICE),
        mode="normal",
        text="[user] I like the zebra theme everywhere; build zebra with cargo --release\n[assistant] Noted.",
        turn_index=1,
        ts=T,
    )
    decider = Decider(providers)
    for i, extracted in enumerate(parse_facts(REPLY).facts):
        scope = fact_scope(snapshot, extracted)
        assert scope is not None
        fact = _fact(snapshot, extracted, scope, i, [])
        [vector] = await providers.embedder.embed_documents([fact.text])
        outcome = await decider.decide(EmbeddedFact(fact=fact, vector=vector, embedding_model="m"), [])
        for op in outcome.ops:
            await apply(providers.store, op)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def reader(tmp_path_factory: Any) -> AsyncIterator[Any]:
    settings = make_settings(tmp_path_factory.mktemp("shared"), api_open=False)
    providers = build_providers(settings)
    await providers.open()
    try:
        await extract_and_store(providers)
        tokens = TokenStore(settings.tokens_file)
        bearer = {
            "alice": tokens.create(user_principal(ALICE, [SHARED]))[0],
            "bob": tokens.create(user_principal(BOB, [SHARED]))[0],
        }
        app = create_app(ApiContext(providers=providers, tokens=tokens, limiter=FailureLimiter(limit=1_000_000)))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memstream") as client:

            async def read(who: str, path: str, **params: str) -> str:
                reply = await client.get(path, params=params, headers={"Authorization": f"Bearer {bearer[who]}"})
                assert reply.status_code == 200, reply.text
                return reply.text

            yield read
    finally:
        await providers.close()


async def test_the_preference_is_stored_in_its_speakers_scope(tmp_path: Path, reader: Any) -> None:
    search = json.loads(await reader("alice", "/search", q="zebra colour theme editor", project=SHARED, detail="full"))
    [preference] = [h for h in search["results"] if h["type"] == "preference"]
    assert preference["scope"] == "user"


@pytest.mark.parametrize("path", ["/search", "/block"])
async def test_the_other_member_reads_the_project_fact_but_not_the_preference(reader: Any, path: str) -> None:
    params = {"q": "zebra colour theme editor cargo", "project": SHARED}
    alice, bob = await reader("alice", path, **params), await reader("bob", path, **params)
    assert "ZEBRA-STRIPES" in alice and "cargo in release mode" in alice
    assert "cargo in release mode" in bob and "ZEBRA-STRIPES" not in bob
