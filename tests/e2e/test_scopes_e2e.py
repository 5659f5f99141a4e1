"""Through the running pipeline (raw mode, the embedded broker, edge store and bundled embedder):

- issue 25.5: a fact remembered again after it was forgotten becomes a memory again and is found,
  through the CLI (``memstream remember`` / ``search``), the HTTP API and MCP, whether it is stated
  word for word or nearly so;
- issue 25.4: a conversation stays in its project: a search or block of one project never shows
  another project's exchange, even one where the user stated a preference, and that preference is
  a memory of its own in the user's scope; an exchange of a turn without a user is stored too."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from mcp import Client

from memstream.identity import project_key, user_key
from memstream.intake.publish import make_turn, publish
from memstream.schemas import Memory
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parents[2]
USER = "dev@example.com"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def live(tmp_module_dir: Path) -> AsyncIterator[runner.Running]:
    running = await start_pipeline(tmp_module_dir / "data", user=USER)
    try:
        yield running
    finally:
        await running.stop()


def api(running: runner.Running) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=running.settings.api_url, timeout=30)


async def search_ids(client: httpx.AsyncClient, query: str, project: str) -> list[str]:
    reply = await client.get("/search", params={"q": query, "project": project, "limit": "10", "detail": "full"})
    reply.raise_for_status()
    return [hit["id"] for hit in reply.json()["results"]]


async def forget(client: httpx.AsyncClient, memory_id: str) -> None:
    reply = await client.post(f"/memories/{memory_id}/forget", json={"reason": "no longer true"})
    assert reply.status_code == 200 and reply.json()["status"] == "forgotten", reply.text


# --- issue 25.5: remembered again after a forget ---


async def test_remembered_again_through_the_api_after_a_forget(live: runner.Running, tmp_path: Path) -> None:
    project = str(tmp_path / "api")
    text = "The payments service retries webhooks five times"
    async with api(live) as client:
        first = (await client.post("/memories", json={"text": text, "project": project})).json()
        assert first["status"] == "stored", first
        await forget(client, first["id"])
        assert first["id"] not in await search_ids(client, "payments webhooks retries", project)

        again = (await client.post("/memories", json={"text": text, "project": project})).json()
        assert again["status"] == "stored" and again["id"] == first["id"], again
        assert first["id"] in await search_ids(client, "payments webhooks retries", project)

        async def revived() -> list[dict[str, Any]]:
            records = (await client.get("/history", params={"memory_id": first["id"]})).json()["records"]
            return [r for r in records if r["outcome"] == "created" and r["reason"].startswith("revived")]

        # The audit record may land a moment after the store shows the memory.
        [record] = await eventually(revived, what="the created record saying the memory was revived")
        assert "forgotten" in record["reason"]


async def test_a_near_duplicate_of_a_forgotten_memory_is_a_memory_of_its_own_through_mcp(
    live: runner.Running, tmp_path: Path
) -> None:
    project = str(tmp_path / "mcp")
    text = "The staging cluster scales down at midnight"

    def data(result: Any) -> Any:
        assert not result.is_error, result.content
        content = result.structured_content
        if content is None:  # the lean tools answer compact JSON as text, once
            return json.loads(result.content[0].text)
        value = content.get("result", content) if set(content) == {"result"} else content
        return json.loads(value) if isinstance(value, str) else value

    async with Client(f"{live.settings.api_url}/mcp") as client:
        added = data(await client.call_tool("add_memory", {"text": text, "project": project}))
        assert added["status"] == "stored", added
        forgotten = data(await client.call_tool("forget_memory", {"id": added["id"], "reason": "it runs all night"}))
        assert forgotten["status"] == "forgotten", forgotten

        # Before the fix: reported "deduped", and the hidden memory's text overwritten.
        near = data(await client.call_tool("add_memory", {"text": text + " on weekdays", "project": project}))
        assert near["status"] == "stored" and near["id"] != added["id"], near
        [hidden] = data(await client.call_tool("get_memories", {"ids": [added["id"]]}))["memories"]
        assert hidden["text"] == text and hidden["superseded_by"]
        found = data(
            await client.call_tool(
                "search_memories", {"query": "staging cluster midnight weekdays", "project": project, "detail": "full"}
            )
        )
        ids = [hit["id"] for hit in found["results"]]
        assert near["id"] in ids and added["id"] not in ids


async def test_remembered_again_through_the_cli_after_a_forget(live: runner.Running, tmp_path: Path) -> None:
    project = tmp_path / "cli"
    project.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")},
        "MEMSTREAM_DATA_DIR": str(live.settings.data_dir),
        "MEMSTREAM_HTTP_PORT": str(live.settings.http_port),
        "MEMSTREAM_TOPIC_PREFIX": live.settings.topic_prefix,
        "MEMSTREAM_KAFKA_BOOTSTRAP": live.bootstrap,
        "MEMSTREAM_USER": USER,
        "PYTHONPATH": str(ROOT),
    }

    async def cli(*args: str) -> str:
        # On a thread: the pipeline and the API the CLI calls run on this test's event loop.
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "memstream.cli", *args],
            env=env,
            cwd=project,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    text = "The nightly backup is written to the cold storage bucket"

    async def found() -> list[str]:
        reply = await cli("search", "nightly backup cold storage", "--json", "--full")
        return [hit["id"] for hit in json.loads(reply)["results"]]

    assert "remembered" in await cli("remember", text)
    [memory_id] = await eventually(found, what="the remembered fact, found by the CLI")
    async with api(live) as client:
        await forget(client, memory_id)
    assert memory_id not in await found()

    assert "remembered" in await cli("remember", text)
    assert memory_id in await eventually(found, what="the fact remembered again, found by the CLI")


# --- issue 25.4: a conversation stays in its project ---


async def stored(running: runner.Running, scope: str) -> list[Memory]:
    return await running.providers.store.list([scope])


async def test_a_project_never_shows_another_projects_conversation(live: runner.Running, tmp_path: Path) -> None:
    mine, other = str(tmp_path / "mine"), str(tmp_path / "other")
    turns = [
        make_turn(
            session_id="mine-1", project=mine, role="user", content="How do we ship the zebra release?", user=USER
        ),
        make_turn(
            session_id="mine-1",
            project=mine,
            role="assistant",
            content="Tag it and the zebra pipeline ships.",
            user=USER,
        ),
        # Everyday chat that the old rule took for a preference, and a standing preference.
        make_turn(
            session_id="other-1",
            project=other,
            role="user",
            content="I love it, the zebra release notes look great. I prefer squash merges for zebra work.",
            user=USER,
        ),
        make_turn(
            session_id="other-1",
            project=other,
            role="assistant",
            content="Thanks! Squash merges it is for the zebra branch.",
            user=USER,
        ),
        # A turn without a user: its exchange is the project's all the same.
        make_turn(
            session_id="other-2",
            project=other,
            role="user",
            content="My dream is a zebra dashboard; always use dark mode on it.",
        ),
        make_turn(session_id="other-2", project=other, role="assistant", content="Dashboard sketched in dark mode."),
    ]
    await publish(live.bootstrap, live.settings.topic_prefix, turns)

    async def settled() -> tuple[list[Memory], list[Memory]] | None:
        conversation = await stored(live, project_key(other))
        personal = await stored(live, user_key(USER))
        done = len(conversation) >= 2 and any("squash merges" in m.text.lower() for m in personal)
        return (conversation, personal) if done and await stored(live, project_key(mine)) else None

    conversation, personal = await eventually(settled, what="both projects' exchanges and the preference")
    assert {m.session_id for m in conversation} == {"other-1", "other-2"}
    assert all(m.type == "conversation" and m.scope == "project" for m in conversation)
    assert [m.text for m in personal if m.type == "preference"] == ["I prefer squash merges for zebra work"]

    async with api(live) as client:
        reply = await client.get(
            "/search",
            params={"q": "zebra release dashboard love dream", "project": mine, "limit": "20", "detail": "full"},
        )
        hits = reply.json()["results"]
        assert hits and all(h["type"] != "conversation" or h["session"] == "mine-1" for h in hits), hits
        block = (await client.get("/block", params={"project": mine, "q": "zebra release"})).text
        assert "Tag it" in block and "release notes look great" not in block and "dark mode" not in block
