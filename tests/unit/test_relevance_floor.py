"""Search's relevance floor (issue 25): absolute, on the legs' own scores, never on the fused one."""

from __future__ import annotations

from memstream.embed.bundled import BundledEmbedder
from memstream.recall.search import over_floor
from memstream.schemas.memory import HybridHit
from memstream.settings import Settings
from tests.unit.factories import memory


def hit(id: str, fused: float, vector: float | None, bm25: float | None) -> HybridHit:
    return HybridHit(memory(id), fused, vector, bm25)


def test_the_fused_score_alone_never_keeps_a_hit() -> None:
    # The lone candidate of an unrelated query: best of its candidates, so fused 0.5 (or 1.0), yet unrelated.
    unrelated = hit("pref", 0.5, 0.79, None)
    assert over_floor([unrelated], 0.82, 0.9) == []


def test_one_relevant_hit_keeps_every_hit_in_its_rank() -> None:
    # A paraphrase can find its answer with a low cosine: the floor decides whether to answer, not what.
    hits = [hit("weak", 0.9, 0.80, 0.6), hit("meaning", 0.8, 0.84, 0.1), hit("other", 0.4, 0.79, None)]
    assert over_floor(hits, 0.82, 0.9) == hits
    by_keyword = [hit("weak", 0.9, 0.80, 0.6), hit("keyword", 0.6, 0.70, 0.93)]
    assert over_floor(by_keyword, 0.82, 0.9) == by_keyword
    assert over_floor([hit("weak", 0.9, 0.80, 0.6), hit("other", 0.4, 0.79, None)], 0.82, 0.9) == []


def test_a_floor_of_zero_keeps_everything() -> None:
    hits = [hit("a", 0.1, 0.1, None), hit("b", 0.0, None, None)]
    assert over_floor(hits, 0.0, 0.9) == hits


def test_the_floor_is_the_embedders_unless_the_setting_says_otherwise() -> None:
    assert Settings.from_env({}).recall_floor == -1.0  # the model's own
    assert BundledEmbedder.profile.recall_floor == 0.80
    assert Settings.from_env({"MEMSTREAM_RECALL_FLOOR": "0"}).recall_floor == 0.0
