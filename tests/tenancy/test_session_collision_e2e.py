"""Two tenants who pick the same session id never share a window (issue 27, point 2).

Alice and Bob, each with their own token and project, publish interleaved turns under one
session id through each way in -- ``POST /turns`` with their tokens, the publish path of the
CLI (memstream.intake.publish), and capture (what ``memstream ingest`` and the hooks run) --
on a real raw-mode pipeline. Each exchange must be stored in its own tenant's project with its
own words only: before the session key named the tenant, the snapshot window of ``s-42`` held
both tenants' turns, and Alice's question was stored inside an exchange in Bob's project.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from aiokafka import AIOKafkaProducer

from memstream.agents.snapshot import ORIGIN_HEADER
from memstream.auth import TokenStore, user_principal
from memstream.capture.run import ingest
from memstream.identity import project_key, turn_session_key
from memstream.intake.publish import make_turn, publish
from memstream.schemas import encode
from memstream.topics import TURNS, topic_name
from memstream.worker import runner
from tests.e2e.conftest import eventually, start_pipeline
from tests.unit.capture_fakes import FakeFormats, header, message

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ALICE, BOB = "alice@example.com", "bob@example.com"
SESSION = "s-42"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def live(tmp_module_dir: Path) -> AsyncIterator[tuple[runner.Running, dict[str, str], dict[str, str]]]:
    data = tmp_module_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    projects = {ALICE: str(tmp_module_dir / "alice-repo"), BOB: str(tmp_module_dir / "bob-repo")}
    running = await start_pipeline(data, api_open=False)
    store = TokenStore(running.settings.tokens_file)
    tokens = {
        who: store.create(user_principal(who, [project_key(projects[who])], label=who.split("@")[0]))[0]
        for who in (ALICE, BOB)
    }
    try:
        yield running, tokens, projects
    finally:
        await running.stop()


def exchanges(tag: str, who: str) -> list[tuple[str, str]]:
    name = who.split("@")[0].upper()
    return [
        (f"{name}-{tag}-Q{i} what about the {name} thing?", f"{name}-{tag}-A{i} the {name} answer.") for i in range(3)
    ]


async def stored_texts(running: runner.Running, project: str) -> list[str]:
    return [m.text for m in await running.providers.store.list([project_key(project)])]


async def check_separate(running: runner.Running, projects: dict[str, str], tag: str) -> None:
    """Every exchange of each tenant stored in its project, none holding the other's words."""
    for who, other in ((ALICE, BOB), (BOB, ALICE)):
        own, foreign = who.split("@")[0].upper(), other.split("@")[0].upper()
        want = [f"{own}-{tag}-A{i}" for i in range(3)]

        async def present(project: str = projects[who], want: list[str] = want) -> list[str] | None:
            texts = await stored_texts(running, project)
            return texts if all(any(w in t for t in texts) for w in want) else None

        texts = await eventually(present, timeout=90, what=f"{own}'s {tag} exchanges")
        mine = [t for t in texts if f"-{tag}-" in t]
        assert not [t for t in mine if foreign in t], f"{foreign}'s words in {own}'s project: {mine}"
        for i in range(3):
            # Each exchange pairs its own question with its answer, never the other tenant's.
            exchange = next(t for t in mine if f"{own}-{tag}-A{i}" in t)
            assert f"{own}-{tag}-Q{i}" in exchange, exchange


async def test_post_turns_of_two_tenants_under_one_session_id(
    live: tuple[runner.Running, dict[str, str], dict[str, str]],
) -> None:
    running, tokens, projects = live
    async with httpx.AsyncClient(base_url=running.settings.api_url, timeout=30) as client:
        for (aq, aa), (bq, ba) in zip(exchanges("api", ALICE), exchanges("api", BOB), strict=True):
            # Interleaved: Alice's question, Bob's question, then both answers.
            for who, role, content in (
                (ALICE, "user", aq),
                (BOB, "user", bq),
                (ALICE, "assistant", aa),
                (BOB, "assistant", ba),
            ):
                body = [
                    {
                        "schema": "turn.v2",
                        "session_id": SESSION,
                        "project": projects[who],
                        "role": role,
                        "content": content,
                        "ts": "2026-11-25T10:00:00Z",
                    }
                ]
                response = await client.post("/turns", json=body, headers={"Authorization": f"Bearer {tokens[who]}"})
                assert response.status_code == 202, response.text
    await check_separate(running, projects, "api")


async def test_published_turns_of_two_tenants_under_one_session_id(
    live: tuple[runner.Running, dict[str, str], dict[str, str]],
) -> None:
    running, _, projects = live
    turns = []
    for (aq, aa), (bq, ba) in zip(exchanges("pub", ALICE), exchanges("pub", BOB), strict=True):
        for who, role, content in (
            (ALICE, "user", aq),
            (BOB, "user", bq),
            (ALICE, "assistant", aa),
            (BOB, "assistant", ba),
        ):
            turns.append(make_turn(session_id=SESSION, project=projects[who], role=role, content=content, user=who))
    await publish(running.bootstrap, running.settings.topic_prefix, turns)
    await check_separate(running, projects, "pub")


async def test_captured_sessions_of_two_tenants_under_one_session_id(
    live: tuple[runner.Running, dict[str, str], dict[str, str]], tmp_path: Path
) -> None:
    """Each session file grows a message at a time and is ingested after each, alternating
    between the tenants, as the hooks of two agents running side by side would."""
    running, _, projects = live
    files = {}
    for who in (ALICE, BOB):
        folder = tmp_path / who.split("@")[0]
        folder.mkdir()
        files[who] = folder / "s.jsonl"
        files[who].write_text(header(SESSION, projects[who]))
    script = {who: exchanges("cap", who) for who in (ALICE, BOB)}
    for i in range(3):
        for n, role in ((2 * i, "user"), (2 * i + 1, "assistant")):
            for who in (ALICE, BOB):
                question, answer = script[who][i]
                with files[who].open("a") as f:
                    f.write(message(n, role, question if role == "user" else answer))
                status = await asyncio.to_thread(
                    ingest,
                    running.settings,
                    [files[who].parent],
                    formats=FakeFormats(),
                    bootstrap=running.bootstrap,
                    user=who,
                    out=io.StringIO(),
                    err=io.StringIO(),
                )
                assert status == 0
    await check_separate(running, projects, "cap")


async def test_a_turn_published_under_its_bare_session_id_is_applied_once_when_copied_again(
    live: tuple[runner.Running, dict[str, str], dict[str, str]],
) -> None:
    """A host's own producer may key turns by their session id alone; the snapshot stage copies
    each under its session key. A worker killed after a copy, before its commit, copies the turn
    again: the session must apply it once, not store the answer a second time as an exchange of
    its own."""
    running, _, projects = live
    prefix, session = running.settings.topic_prefix, "bare-7"
    topic = topic_name(prefix, TURNS)
    question, answer = "BARE-Q0 where do the fixtures live?", "BARE-A0 under tests/fixtures."
    later_q, later_a = "BARE-Q1 and the snapshots?", "BARE-A1 beside them."

    def turn(role: str, content: str) -> bytes:
        return encode(make_turn(session_id=session, project=projects[ALICE], role=role, content=content, user=ALICE))

    producer = AIOKafkaProducer(bootstrap_servers=running.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, turn("user", question), key=session.encode())
        sent = await producer.send_and_wait(topic, turn("assistant", answer), key=session.encode())

        async def stored() -> list[str] | None:
            texts = [t for t in await stored_texts(running, projects[ALICE]) if "BARE-" in t]
            return texts or None

        assert await eventually(stored, timeout=90, what="the bare-keyed exchange") == [
            f"[user] {question} [assistant] {answer}"
        ]
        # The copy a restarted worker makes of the answer it had copied already.
        skey = turn_session_key(session, projects[ALICE], ALICE).encode()
        origin = f"{sent.partition}:{sent.offset}".encode()
        await producer.send_and_wait(topic, turn("assistant", answer), key=skey, headers=[(ORIGIN_HEADER, origin)])
        await producer.send_and_wait(topic, turn("user", later_q), key=session.encode())
        await producer.send_and_wait(topic, turn("assistant", later_a), key=session.encode())
    finally:
        await producer.stop()

    async def both() -> list[str] | None:
        texts = await stored()
        return texts if texts and any("BARE-A1" in t for t in texts) else None

    texts = sorted(await eventually(both, timeout=90, what="the exchange after the copy"))
    assert texts == [f"[user] {question} [assistant] {answer}", f"[user] {later_q} [assistant] {later_a}"]
