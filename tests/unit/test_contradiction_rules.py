"""The extraction spec step 7: memstream.rules.contradiction."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memstream.rules.contradiction import (
    MAX_CANDIDATES,
    checks_contradictions,
    eligible_candidates,
    parse_superseded,
    prompt,
)
from memstream.schemas import MEMORY_TYPES
from tests.unit.factories import T0, memory


@pytest.mark.parametrize("kind", MEMORY_TYPES)
def test_session_summary_and_conversation_skip_contradiction_checks(kind: str) -> None:
    assert checks_contradictions(memory("m", kind)) is (kind not in {"session-summary", "conversation"})


# --- eligible_candidates ---


def test_eligible_candidates_exclude_self_superseded_and_exempt_types() -> None:
    new = memory("new")
    nearby = [
        memory("new"),  # itself
        memory("ok1"),
        memory("gone", superseded_by="someone"),
        memory("summary", "session-summary"),
        memory("conv", "conversation"),
        memory("ok2", "progress"),
    ]
    assert [m.id for m in eligible_candidates(new, nearby)] == ["ok1", "ok2"]


def test_a_memory_stated_later_is_no_candidate_of_an_earlier_one() -> None:
    new = memory("new", updated_at=T0 + timedelta(minutes=1))
    nearby = [
        memory("before"),
        memory("same-time", updated_at=new.updated_at),
        memory("after", updated_at=T0 + timedelta(minutes=2)),
    ]
    assert [m.id for m in eligible_candidates(new, nearby)] == ["before", "same-time"]


def test_eligible_candidates_keep_at_most_five_in_order() -> None:
    nearby = [memory(f"m{i}") for i in range(8)]
    assert MAX_CANDIDATES == 5
    assert [m.id for m in eligible_candidates(memory("new"), nearby)] == ["m0", "m1", "m2", "m3", "m4"]


def test_the_cap_applies_after_filtering() -> None:
    nearby = [memory("new"), memory("x", superseded_by="y"), *[memory(f"m{i}") for i in range(6)]]
    assert [m.id for m in eligible_candidates(memory("new"), nearby)] == ["m0", "m1", "m2", "m3", "m4"]


# --- prompt ---


def test_prompt_names_the_new_fact_candidates_and_the_seed_question() -> None:
    new = memory("new", "tech-context", "We switched from npm to bun")
    candidates = [memory("c-1", "tech-context", "We use npm for installs"), memory("c-2", "progress", "CI is green")]
    text = prompt(new, candidates)
    assert '"We switched from npm to bun"' in text
    assert "type=tech-context" in text
    assert 'id=c-1 type=tech-context: "We use npm for installs"' in text
    assert 'id=c-2 type=progress: "CI is green"' in text
    assert text.endswith("Does this new fact supersede any of these existing facts?")


# --- parse_superseded ---

CANDIDATES = [memory("a"), memory("b"), memory("c")]


def test_parse_superseded_keeps_candidate_ids() -> None:
    assert parse_superseded('{"superseded": ["b", "a"]}', CANDIDATES) == (["b", "a"], [])


def test_empty_answer_is_nothing_superseded() -> None:
    assert parse_superseded('{"superseded": []}', CANDIDATES) == ([], [])


def test_hallucinated_ids_are_dropped_with_a_warning() -> None:
    ids, warnings = parse_superseded('{"superseded": ["a", "zzz", "new"]}', CANDIDATES)
    assert ids == ["a"]
    assert len(warnings) == 2
    assert "'zzz'" in warnings[0]
    assert "'new'" in warnings[1]


def test_repeated_ids_are_kept_once() -> None:
    ids, _ = parse_superseded('{"superseded": ["a", "a", "b"]}', CANDIDATES)
    assert ids == ["a", "b"]


@pytest.mark.parametrize(
    "raw",
    [
        '```json\n{"superseded": ["c"]}\n```',
        '```\n{"superseded": ["c"]}\n```',
        '<think>maybe "a"? no.</think>{"superseded": ["c"]}',
        'The answer is:\n{"superseded": ["c"]}\nbecause c changed.',
        '["c"]',
        '[{"id": "c"}]',
        '{"superseded": [{"id": "c", "reason": "replaced"}]}',
    ],
)
def test_tolerated_reply_shapes(raw: str) -> None:
    assert parse_superseded(raw, CANDIDATES) == (["c"], [])


@pytest.mark.parametrize(
    "raw",
    ["", "no idea", "None", "null", "42", '"a"', '{"superseded": "a"}', '{"superseded": null}', "{[}"],
)
def test_garbage_is_nothing_superseded_with_a_warning(raw: str) -> None:
    ids, warnings = parse_superseded(raw, CANDIDATES)
    assert ids == []
    assert len(warnings) == 1


def test_object_without_superseded_key_gives_a_warning() -> None:
    ids, warnings = parse_superseded('{"answer": "a"}', CANDIDATES)
    assert ids == []
    assert len(warnings) == 1


def test_no_candidates_means_every_id_is_ignored() -> None:
    ids, warnings = parse_superseded('{"superseded": ["a"]}', [])
    assert ids == []
    assert len(warnings) == 1
