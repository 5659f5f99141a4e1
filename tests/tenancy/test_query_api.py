"""`memstream api`: the query-only process. It imports no pipeline, joins no consumer group,
and publishes what a reader causes through a plain producer, behind the same tokens."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memstream.auth import TokenStore, admin_principal, user_principal
from memstream.cli import main
from memstream.front.query_api import Publisher, QueryApiError, build, check_settings, query_providers
from memstream.identity import turn_session_key, user_key
from memstream.schemas import decode
from tests.conftest import make_settings

ASYNC = pytest.mark.asyncio(loop_scope="module")


class RecordingProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes]] = []

    async def send_and_wait(self, topic: str, value: bytes, key: bytes) -> None:
        self.sent.append((topic, key, value))


def test_the_query_api_imports_no_pipeline() -> None:
    heavy = ("faust", "mode", "aiokafka", "memstream.agents", "memstream.worker.app", "memstream.worker.runner")
    code = f"import sys, memstream.front.query_api\nprint(' '.join(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", "a query-only process must not load the pipeline (nor join its group)"


def test_it_needs_the_workers_store_and_broker(tmp_path: Path) -> None:
    with pytest.raises(QueryApiError, match="MEMSTREAM_QDRANT_URL"):
        check_settings(make_settings(tmp_path, kafka_bootstrap="kafka:9092"))
    with pytest.raises(QueryApiError, match="MEMSTREAM_KAFKA_BOOTSTRAP"):
        check_settings(make_settings(tmp_path, qdrant_url="http://qdrant:6333"))
    check_settings(make_settings(tmp_path, qdrant_url="http://qdrant:6333", kafka_bootstrap="kafka:9092"))


def test_the_command_says_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.delenv("MEMSTREAM_QDRANT_URL", raising=False)
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path))
    assert main(["api"]) == 2
    assert "MEMSTREAM_QDRANT_URL" in capsys.readouterr().err


def test_open_mode_off_loopback_refuses_to_start(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.setenv("MEMSTREAM_API_OPEN", "true")
    monkeypatch.setenv("MEMSTREAM_HTTP_HOST", "0.0.0.0")
    assert main(["api"]) == 2
    assert "loopback" in capsys.readouterr().err


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def served(tmp_path_factory: Any) -> AsyncIterator[tuple[httpx.AsyncClient, RecordingProducer, dict[str, str]]]:
    settings = make_settings(tmp_path_factory.mktemp("query-api"), api_open=False)
    providers = query_providers(settings)
    assert providers.llm is None
    await providers.open()
    store = TokenStore(settings.tokens_file)
    tokens = {
        "alice": store.create(user_principal("alice@example.com", ["/repos/a"]))[0],
        "admin": store.create(admin_principal())[0],
    }
    producer = RecordingProducer()
    app = build(settings, providers, Publisher(producer, settings.topic_prefix))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
            yield client, producer, tokens
    finally:
        await providers.close()


@ASYNC
async def test_it_serves_the_same_guarded_api(served: Any) -> None:
    client, _, tokens = served
    assert (await client.get("/search", params={"q": "x", "project": "/repos/a"})).status_code == 401
    ok = await client.get(
        "/search", params={"q": "x", "project": "/repos/a"}, headers={"Authorization": f"Bearer {tokens['alice']}"}
    )
    assert ok.status_code == 200 and ok.json()["hits"] == []  # the compact index, the default answer
    assert (await client.get("/memories", headers={"Authorization": f"Bearer {tokens['alice']}"})).status_code == 403


@ASYNC
async def test_it_publishes_forgets_and_turns_with_its_producer(served: Any) -> None:
    client, producer, tokens = served
    forget = await client.post(
        "/admin/forget",
        content=json.dumps({"user": "bob@example.com"}),
        headers={"Authorization": f"Bearer {tokens['admin']}"},
    )
    assert forget.status_code == 202
    turn = {
        "schema": "turn.v1",
        "session_id": "s9",
        "project": "/repos/a",
        "role": "user",
        "content": "hi",
        "ts": datetime.now(UTC).isoformat(),
    }
    published = await client.post(
        "/turns", content=json.dumps([turn]), headers={"Authorization": f"Bearer {tokens['alice']}"}
    )
    assert published.status_code == 202
    topics = [(topic.rsplit(".", 1)[1], key) for topic, key, _ in producer.sent]
    # The turn is keyed by its session within the caller's project and user (issue 27).
    session = turn_session_key("s9", "/repos/a", "alice@example.com").encode()
    assert topics == [("forgotten", user_key("bob@example.com").encode()), ("turns", session)]
    sent_turn = decode(producer.sent[1][2])
    assert getattr(sent_turn, "user", None) == "alice@example.com"


@ASYNC
async def test_serve_answers_over_http_and_publishes_a_forget_to_kafka(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real `memstream api` server (uvicorn, a Kafka producer on the embedded broker); only its
    store is swapped for the edge one, as no Qdrant server runs here."""
    import asyncio
    import contextlib
    import dataclasses

    from memstream.bootstrap import build_providers
    from memstream.front import query_api
    from memstream.kafka.broker import EmbeddedBroker, free_port
    from memstream.topics.admin import ensure_topics
    from memstream.topics.catalog import FORGOTTEN, topic_name
    from tests.e2e.conftest import eventually, read_topic

    with EmbeddedBroker() as broker:
        settings = make_settings(
            tmp_path,
            api_open=False,
            kafka_bootstrap=broker.bootstrap,
            qdrant_url="http://unused:6333",
            http_port=free_port(),
        )
        await ensure_topics(broker.bootstrap, settings.topic_prefix, partitions=2)
        monkeypatch.setattr(
            query_api, "query_providers", lambda s: build_providers(dataclasses.replace(s, qdrant_url=""))
        )
        admin = TokenStore(settings.tokens_file).create(admin_principal())[0]
        serving = asyncio.create_task(query_api.serve(settings))
        try:
            async with httpx.AsyncClient(base_url=settings.api_url) as client:

                async def up() -> bool:
                    try:
                        return (await client.get("/health")).status_code == 200
                    except httpx.TransportError:
                        return False

                await eventually(up, what="memstream api to listen")
                assert (await client.get("/memories")).status_code == 401
                forget = await client.post(
                    "/admin/forget", json={"user": "bob@example.com"}, headers={"Authorization": f"Bearer {admin}"}
                )
                assert forget.status_code == 202
            records = await read_topic(
                broker.bootstrap, topic_name(settings.topic_prefix, FORGOTTEN), until=lambda r: len(r) >= 1
            )
            assert decode(records[0].value).scope_key == user_key("bob@example.com")  # type: ignore[union-attr]
        finally:
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
