"""Pipeline v2's extraction validation: caps, per-fact confidence, entity triples and the prompts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memstream.rules.extraction import (
    DEFAULT_CONFIDENCE,
    MAX_ENTITIES,
    MAX_FACT_CHARS,
    MAX_FACTS,
    MIN_FACT_CHARS,
    ExtractedFact,
    parse_facts,
)
from memstream.rules.prompts import (
    INIT_SYSTEM,
    MAX_INPUT_CHARS,
    NORMAL_SYSTEM,
    SUMMARY_SYSTEM,
    extraction_prompt,
    system_prompt,
)
from memstream.schemas import MEMORY_TYPES, Entity


def _reply(memories: list[Any], entities: Any = None) -> str:
    body: dict[str, Any] = {"memories": memories}
    if entities is not None:
        body["entities"] = entities
    return json.dumps(body)


def test_cap_values_are_the_seed_values() -> None:
    assert (MAX_FACTS, MIN_FACT_CHARS, MAX_FACT_CHARS, MAX_ENTITIES) == (20, 10, 2_000, 50)
    assert DEFAULT_CONFIDENCE == 0.8
    assert MAX_INPUT_CHARS == 12_000


# --- fact count cap ---


def test_exactly_twenty_of_twenty_five_facts_are_kept_with_a_warning() -> None:
    memories = [{"memory": f"Fact number {i:02d} about the project", "type": "progress"} for i in range(25)]
    result = parse_facts(_reply(memories))
    assert len(result.facts) == MAX_FACTS
    # The first twenty, in order.
    assert [f.text for f in result.facts] == [f"Fact number {i:02d} about the project" for i in range(20)]
    assert len(result.warnings) == 1
    assert "25" in result.warnings[0] and "20" in result.warnings[0]


def test_twenty_facts_is_no_warning() -> None:
    memories = [f"Fact number {i:02d} about the project" for i in range(MAX_FACTS)]
    result = parse_facts(json.dumps(memories))
    assert len(result.facts) == MAX_FACTS
    assert result.warnings == []


def test_fact_count_cap_also_applies_to_plain_arrays() -> None:
    result = parse_facts(json.dumps([f"Plain string fact {i:02d}" for i in range(25)]))
    assert len(result.facts) == MAX_FACTS
    assert len(result.warnings) == 1


# --- fact length bounds ---


def test_nine_character_fact_is_rejected_with_a_warning() -> None:
    result = parse_facts(json.dumps(["x" * 9]))
    assert result.facts == []
    assert len(result.warnings) == 1
    assert "item 0" in result.warnings[0] and "short" in result.warnings[0]


def test_ten_character_fact_is_kept() -> None:
    result = parse_facts(json.dumps(["x" * 10]))
    assert result.facts == [ExtractedFact("x" * 10, "learned-pattern", "project")]
    assert result.warnings == []


def test_length_is_measured_after_trimming() -> None:
    result = parse_facts(json.dumps(["   " + "x" * 9 + "   "]))
    assert result.facts == []
    assert len(result.warnings) == 1


def test_short_fact_among_good_ones_only_drops_itself() -> None:
    result = parse_facts(_reply([{"memory": "Uses uv for installs", "type": "tech-context"}, {"memory": "tiny"}]))
    assert [f.text for f in result.facts] == ["Uses uv for installs"]
    assert result.warnings == ["item 1: 4 characters is too short for a fact, skipped"]


def test_2001_character_fact_is_truncated_to_2000_with_a_warning() -> None:
    text = "a" * 1_999 + "bc"
    result = parse_facts(json.dumps([{"memory": text, "type": "architecture"}]))
    assert len(result.facts) == 1
    fact = result.facts[0]
    assert len(fact.text) == MAX_FACT_CHARS
    assert fact.text == text[:MAX_FACT_CHARS]
    assert fact.type == "architecture"
    assert len(result.warnings) == 1
    assert "2001" in result.warnings[0] and "2000" in result.warnings[0]


def test_2000_character_fact_is_kept_whole() -> None:
    text = "a" * MAX_FACT_CHARS
    result = parse_facts(json.dumps([text]))
    assert [f.text for f in result.facts] == [text]
    assert result.warnings == []


# --- confidence ---


@pytest.mark.parametrize(
    ("given", "expected"),
    [(0.95, 0.95), (1.7, 1.0), (-1, 0.0), (0, 0.0), (1, 1.0), (0.5, 0.5)],
)
def test_numeric_confidence_is_kept_and_clamped(given: float, expected: float) -> None:
    result = parse_facts(_reply([{"memory": "Deploys go through ArgoCD", "type": "architecture", "confidence": given}]))
    assert [f.confidence for f in result.facts] == [expected]
    assert isinstance(result.facts[0].confidence, float)
    assert result.warnings == []


def test_missing_confidence_is_the_default() -> None:
    result = parse_facts(_reply([{"memory": "Deploys go through ArgoCD"}]))
    assert [f.confidence for f in result.facts] == [DEFAULT_CONFIDENCE] == [0.8]
    assert result.warnings == []


def test_null_confidence_is_the_default_without_warning() -> None:
    result = parse_facts(_reply([{"memory": "Deploys go through ArgoCD", "confidence": None}]))
    assert [f.confidence for f in result.facts] == [DEFAULT_CONFIDENCE]
    assert result.warnings == []


def test_plain_string_facts_get_the_default_confidence() -> None:
    result = parse_facts(json.dumps(["Deploys go through ArgoCD"]))
    assert [f.confidence for f in result.facts] == [DEFAULT_CONFIDENCE]


@pytest.mark.parametrize("given", ["high", True, False, [0.9], {"v": 1}, "0.9"])
def test_non_number_confidence_is_the_default_with_a_warning(given: Any) -> None:
    result = parse_facts(_reply([{"memory": "Deploys go through ArgoCD", "confidence": given}]))
    assert [f.confidence for f in result.facts] == [DEFAULT_CONFIDENCE]
    assert len(result.warnings) == 1
    assert "confidence" in result.warnings[0] and "item 0" in result.warnings[0]


def test_confidences_are_per_fact() -> None:
    result = parse_facts(
        _reply(
            [
                {"memory": "Auth uses JWT in httpOnly cookies", "type": "architecture", "confidence": 0.95},
                {"memory": "User prefers bun over npm", "type": "preference", "confidence": 0.6},
                {"memory": "Tests run with `bun test`", "type": "project-config"},
            ]
        )
    )
    assert [(f.text, f.scope, f.confidence) for f in result.facts] == [
        ("Auth uses JWT in httpOnly cookies", "project", 0.95),
        ("User prefers bun over npm", "user", 0.6),
        ("Tests run with `bun test`", "project", DEFAULT_CONFIDENCE),
    ]


# --- entities ---


def test_valid_entity_triple_is_parsed() -> None:
    result = parse_facts(
        _reply(
            [{"memory": "Auth uses JWT in httpOnly cookies", "type": "architecture"}],
            [{"source": "auth", "relationship": "uses", "target": "JWT", "confidence": 0.95}],
        )
    )
    assert result.entities == [Entity(source="auth", relationship="uses", target="JWT", confidence=0.95)]
    assert result.warnings == []


def test_entity_fields_are_trimmed_and_confidence_defaults_and_clamps() -> None:
    result = parse_facts(
        _reply(
            [],
            [
                {"source": " auth ", "relationship": " uses ", "target": " JWT "},
                {"source": "api", "relationship": "runs on", "target": "FastAPI", "confidence": 3},
            ],
        )
    )
    assert result.entities == [
        Entity(source="auth", relationship="uses", target="JWT", confidence=DEFAULT_CONFIDENCE),
        Entity(source="api", relationship="runs on", target="FastAPI", confidence=1.0),
    ]
    assert result.warnings == []


@pytest.mark.parametrize(
    "bad",
    [
        {"source": "auth", "relationship": "uses"},
        {"source": "auth", "relationship": "uses", "target": ""},
        {"source": "auth", "relationship": "uses", "target": "   "},
        {"source": "auth", "relationship": "uses", "target": 7},
        {"relationship": "uses", "target": "JWT"},
        {"source": "auth", "target": "JWT"},
        "auth uses JWT",
        None,
    ],
)
def test_invalid_entity_is_skipped_with_a_warning(bad: Any) -> None:
    good = {"source": "api", "relationship": "runs on", "target": "FastAPI"}
    result = parse_facts(_reply([], [bad, good]))
    assert [(e.source, e.relationship, e.target) for e in result.entities] == [("api", "runs on", "FastAPI")]
    assert len(result.warnings) == 1
    assert "entity 0" in result.warnings[0]


def test_non_number_entity_confidence_is_the_default_with_a_warning() -> None:
    result = parse_facts(_reply([], [{"source": "a", "relationship": "uses", "target": "b", "confidence": "high"}]))
    assert [e.confidence for e in result.entities] == [DEFAULT_CONFIDENCE]
    assert len(result.warnings) == 1


def test_sixty_entities_are_capped_at_fifty_with_a_warning() -> None:
    entities = [{"source": f"s{i}", "relationship": "uses", "target": f"t{i}"} for i in range(60)]
    result = parse_facts(_reply([], entities))
    assert len(result.entities) == MAX_ENTITIES
    assert [e.source for e in result.entities] == [f"s{i}" for i in range(50)]
    assert len(result.warnings) == 1
    assert "60" in result.warnings[0] and "50" in result.warnings[0]


@pytest.mark.parametrize("entities", ["auth uses JWT", {"source": "a"}, 5])
def test_non_list_entities_are_ignored_with_a_warning(entities: Any) -> None:
    result = parse_facts(_reply([{"memory": "Auth uses JWT in httpOnly cookies"}], entities))
    assert [f.text for f in result.facts] == ["Auth uses JWT in httpOnly cookies"]
    assert result.entities == []
    assert len(result.warnings) == 1
    assert "entities" in result.warnings[0]


def test_missing_entities_key_is_no_entities_and_no_warning() -> None:
    result = parse_facts(_reply([{"memory": "Auth uses JWT in httpOnly cookies"}]))
    assert result.entities == []
    assert result.warnings == []


def test_plain_array_reply_has_no_entities() -> None:
    result = parse_facts(json.dumps(["Auth uses JWT in httpOnly cookies"]))
    assert result.entities == []
    assert result.warnings == []


# --- the spec's answer shape ---


def test_memories_and_entities_object_shape() -> None:
    reply = {
        "memories": [
            {"memory": "Auth uses JWT in first-party httpOnly cookies", "type": "architecture", "confidence": 0.95},
            {"memory": "Tests run with `bun test`", "type": "project-config", "confidence": 0.9},
            {
                "memory": "User prefers bun over npm for all installs",
                "type": "preference",
                "scope": "user",
                "confidence": 0.6,
            },
        ],
        "entities": [
            {"source": "auth", "relationship": "uses", "target": "JWT", "confidence": 0.95},
            {"source": "tests", "relationship": "run with", "target": "bun"},
        ],
    }
    result = parse_facts(f"<think>let me see</think>\n```json\n{json.dumps(reply)}\n```")
    assert result.facts == [
        ExtractedFact("Auth uses JWT in first-party httpOnly cookies", "architecture", "project", 0.95),
        ExtractedFact("Tests run with `bun test`", "project-config", "project", 0.9),
        ExtractedFact("User prefers bun over npm for all installs", "preference", "user", 0.6),
    ]
    assert result.entities == [
        Entity(source="auth", relationship="uses", target="JWT", confidence=0.95),
        Entity(source="tests", relationship="run with", target="bun", confidence=DEFAULT_CONFIDENCE),
    ]
    assert result.warnings == []


def test_empty_memories_and_entities_is_nothing_and_no_warning() -> None:
    result = parse_facts('{"memories": [], "entities": []}')
    assert (result.facts, result.entities, result.warnings) == ([], [], [])


def test_entities_survive_bad_facts() -> None:
    result = parse_facts(_reply(["short", 7], [{"source": "auth", "relationship": "uses", "target": "JWT"}]))
    assert result.facts == []
    assert len(result.entities) == 1
    assert len(result.warnings) == 2


# --- prompts ---


@pytest.mark.parametrize("prompt", [NORMAL_SYSTEM, SUMMARY_SYSTEM, INIT_SYSTEM], ids=["normal", "summary", "init"])
def test_each_system_prompt_names_the_json_shape(prompt: str) -> None:
    for key in ('"memories"', '"entities"', '"memory"', '"type"', '"confidence"'):
        assert key in prompt
    for key in ('"source"', '"relationship"', '"target"'):
        assert key in prompt
    assert "JSON" in prompt


def test_normal_system_names_all_eleven_types() -> None:
    assert len(MEMORY_TYPES) == 11
    assert [t for t in MEMORY_TYPES if t not in NORMAL_SYSTEM] == []


def test_normal_system_mentions_explicit_requests() -> None:
    lowered = NORMAL_SYSTEM.lower()
    assert "explicitly" in lowered
    assert "remember that" in lowered
    assert "note that" in lowered
    assert "save this" in lowered


def test_system_prompt_raw_raises() -> None:
    with pytest.raises(ValueError):
        system_prompt("raw")


def test_extraction_prompt_short_input_is_whole() -> None:
    prompt = extraction_prompt("[user] hello there", "normal")
    assert "[user] hello there" in prompt
    assert prompt.startswith("Conversation:")


def test_extraction_prompt_labels_project_files_for_init() -> None:
    assert extraction_prompt("=== README.md ===\ndemo", "init").startswith("Project files:")
    assert extraction_prompt("[user] hi", "summary").startswith("Conversation:")


def test_extraction_prompt_truncation_keeps_the_end() -> None:
    text = "#" * 1_000 + "".join(chr(ord("a") + i % 26) for i in range(11_999)) + "Z"
    assert len(text) == 13_000
    prompt = extraction_prompt(text, "normal")
    framing = len(extraction_prompt("", "normal"))
    assert len(prompt) <= MAX_INPUT_CHARS + framing
    assert text[-MAX_INPUT_CHARS:] in prompt
    assert "#" not in prompt  # the oldest 1,000 characters are dropped


def test_extraction_prompt_at_the_limit_is_not_truncated() -> None:
    text = "s" + "m" * (MAX_INPUT_CHARS - 2) + "e"
    assert text in extraction_prompt(text, "init")
