"""Optional reranking (Pipeline v2): top N reranked, a timeout after which the order stands, no second
attempt; Voyage through its SDK against a fake speaking its wire format; the LLM chain as a listwise
reranker."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from memstream.embed.base import DistanceProfile
from memstream.llm.base import Completion, JsonSchema
from memstream.ports import Providers
from memstream.recall import search as recall
from memstream.recall.rerank import LLMReranker, VoyageReranker, apply_order, build_reranker, rerank_top
from memstream.schemas.memory import HybridHit
from tests.conftest import make_settings
from tests.fakes.voyage_server import FakeVoyage
from tests.unit.factories import memory

HITS = [HybridHit(memory(f"m{i}", text=f"memory number {i}"), 1.0 - i / 100, 1.0 - i / 100, None) for i in range(25)]


def ids(hits: Sequence[HybridHit]) -> list[str]:
    return [h.memory.id for h in hits]


class Reversing:
    """Puts the candidates it sees in reverse; counts its calls; can fail, hang or answer nonsense."""

    name = "fake/reverse"

    def __init__(self, *, fail: bool = False, hang: bool = False, answer: list[Any] | None = None):
        self.fail, self.hang, self.answer = fail, hang, answer
        self.calls: list[list[str]] = []

    async def rerank(self, query: str, documents: Sequence[str]) -> list[int]:
        self.calls.append(list(documents))
        if self.fail:
            raise ConnectionError("reranker unreachable")
        if self.hang:
            await asyncio.sleep(3600)
        return self.answer if self.answer is not None else list(reversed(range(len(documents))))

    async def close(self) -> None:
        return None


async def test_only_the_top_n_are_reranked_and_the_tail_keeps_its_place() -> None:
    reranker = Reversing()
    out = await rerank_top("q", HITS, reranker, top_n=20)
    assert ids(out) == [f"m{i}" for i in reversed(range(20))] + [f"m{i}" for i in range(20, 25)]
    assert len(reranker.calls) == 1 and len(reranker.calls[0]) == 20
    # Scores are not rewritten: only the order changes.
    assert {h.memory.id: h.score for h in out} == {h.memory.id: h.score for h in HITS}


@pytest.mark.parametrize("broken", [Reversing(fail=True), Reversing(hang=True)], ids=["fails", "hangs"])
async def test_a_failing_or_late_reranker_leaves_the_order_and_is_asked_once(broken: Reversing) -> None:
    out = await rerank_top("q", HITS, broken, top_n=20, timeout_s=0.1)
    assert ids(out) == ids(HITS)
    assert len(broken.calls) == 1  # no second attempt


def test_a_nonsense_answer_becomes_a_permutation() -> None:
    assert apply_order(5, [3, 3, 9, -1, "x", True, 0]) == [3, 0, 1, 2, 4]
    assert apply_order(3, []) == [0, 1, 2]


def test_off_by_default_and_each_provider_needs_what_it_calls(tmp_path: Path) -> None:
    assert build_reranker(make_settings(tmp_path), llm=None) is None
    assert build_reranker(make_settings(tmp_path, reranker="llm"), llm=None) is None  # raw mode: no LLM
    assert build_reranker(make_settings(tmp_path, reranker="voyage"), llm=None) is None  # no key
    voyage = build_reranker(make_settings(tmp_path, reranker="voyage", voyage_api_key="pa-x"), llm=None)
    assert isinstance(voyage, VoyageReranker)


async def test_voyage_reranks_through_its_sdk() -> None:
    with FakeVoyage(api_key="pa-test") as fake:
        reranker = VoyageReranker("pa-test", "rerank-2.5-lite", base_url=fake.base_url)
        try:
            docs = ["the cat sat", "deploy the api to staging", "staging api deploy runbook"]
            order = await reranker.rerank("staging api deploy", docs)
            assert order == [1, 2, 0]
            fake.relevance_scores["the cat sat"] = 5.0
            assert (await reranker.rerank("staging api deploy", docs))[0] == 0
        finally:
            await reranker.close()
        request = fake.requests[0]
        assert request.api_key == "pa-test" and request.model == "rerank-2.5-lite"
        assert request.body["query"] == "staging api deploy" and request.body["documents"] == docs


async def test_voyage_failing_once_is_not_retried_and_the_order_stands() -> None:
    with FakeVoyage(api_key="pa-test") as fake:
        reranker = VoyageReranker("pa-test", "rerank-2.5-lite", base_url=fake.base_url)
        try:
            fake.fail_next(1, 500)
            out = await rerank_top("number 3", HITS, reranker, top_n=5, timeout_s=2.0)
        finally:
            await reranker.close()
        assert ids(out) == ids(HITS)
        assert len(fake.requests) == 1


async def test_voyage_slower_than_the_timeout_leaves_the_order() -> None:
    with FakeVoyage(api_key="pa-test") as fake:
        reranker = VoyageReranker("pa-test", "rerank-2.5-lite", base_url=fake.base_url, timeout_s=5.0)
        try:
            fake.delay_next(1, 2.0)
            out = await rerank_top("number 3", HITS, reranker, top_n=5, timeout_s=0.2)
        finally:
            await reranker.close()
        assert ids(out) == ids(HITS)


class ListwiseLLM:
    provider, model = "fake", "listwise"

    def __init__(self, text: str):
        self.text = text
        self.prompts: list[str] = []

    async def complete(
        self, system: str, prompt: str, *, max_tokens: int = 1024, schema: JsonSchema | None = None
    ) -> Completion:
        self.prompts.append(prompt)
        return Completion(text=self.text, provider=self.provider, model=self.model)

    async def close(self) -> None:
        return None


async def test_the_llm_chain_reranks_listwise() -> None:
    llm = ListwiseLLM("Here you go: [2, 0, 1]")
    reranker = LLMReranker(cast(Any, llm))
    out = await rerank_top("q", HITS[:3], reranker, top_n=20)
    assert ids(out) == ["m2", "m0", "m1"]
    assert "[0] memory number 0" in llm.prompts[0] and "Query: q" in llm.prompts[0]


async def test_an_llm_answer_without_a_list_leaves_the_order() -> None:
    reranker = LLMReranker(cast(Any, ListwiseLLM("I cannot rank these.")))
    assert ids(await rerank_top("q", HITS[:3], reranker)) == ["m0", "m1", "m2"]


class FakeEmbedder:
    #: An embedder not calibrated for a relevance floor (recall_floor 0): search keeps every candidate.
    profile = DistanceProfile(dedup_general=0.05, dedup_structural=0.05, contradiction=0.125)

    async def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0]


class FakeStore:
    def __init__(self) -> None:
        self.limits: list[int] = []

    async def hybrid_search(
        self, text: str, vector: Sequence[float], keys: Sequence[str], **kw: Any
    ) -> list[HybridHit]:
        self.limits.append(kw["limit"])
        return HITS[: kw["limit"]]


async def test_search_fetches_top_n_candidates_for_the_reranker_and_returns_the_limit(tmp_path: Path) -> None:
    store = FakeStore()
    providers = Providers(
        settings=make_settings(tmp_path, reranker_top_n=20),
        embedder=cast(Any, FakeEmbedder()),
        store=cast(Any, store),
        llm=None,
        history=cast(Any, None),
        reranker=Reversing(),
    )
    hits = await recall.search(providers, "q", "p_test", limit=5)
    assert store.limits == [20]
    assert ids(hits) == ["m19", "m18", "m17", "m16", "m15"]
