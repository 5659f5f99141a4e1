"""The extraction spec step 2: tolerant parsing of extraction replies, raw facts and prompts."""

from __future__ import annotations

import json

import pytest

from memstream.rules.extraction import (
    CONVERSATION_MAX_CHARS,
    CUT_MARK,
    DEFAULT_CONFIDENCE,
    FALLBACK_TYPE,
    INIT_SYSTEM,
    NORMAL_SYSTEM,
    SUMMARY_SYSTEM,
    ExtractedFact,
    parse_facts,
    raw_facts,
    system_prompt,
)
from memstream.schemas import MEMORY_TYPES

SEED_REPLY = json.dumps(
    [
        {"memory": "Auth uses JWT stored in httpOnly cookies, not localStorage", "type": "architecture"},
        {"memory": "User prefers bun over npm for all installs", "type": "preference"},
    ]
)
SEED_FACTS = [
    ExtractedFact("Auth uses JWT stored in httpOnly cookies, not localStorage", "architecture", "project"),
    ExtractedFact("User prefers bun over npm for all installs", "preference", "user"),
]


def test_plain_json_array_of_objects() -> None:
    result = parse_facts(SEED_REPLY)
    assert result.facts == SEED_FACTS
    assert result.warnings == []
    assert [f.confidence for f in result.facts] == [DEFAULT_CONFIDENCE, DEFAULT_CONFIDENCE]
    assert result.entities == []


@pytest.mark.parametrize("opener", ["```json", "```", "```JSON", "``` json"])
def test_markdown_fences_are_stripped(opener: str) -> None:
    result = parse_facts(f"{opener}\n{SEED_REPLY}\n```")
    assert result.facts == SEED_FACTS
    assert result.warnings == []


def test_fence_inside_prose() -> None:
    reply = f"Here is what I found:\n```json\n{SEED_REPLY}\n```\nLet me know if you need more."
    assert parse_facts(reply).facts == SEED_FACTS


def test_think_blocks_are_stripped() -> None:
    reply = f"<think>The user said [something]; {{maybe}} a preference?</think>\n{SEED_REPLY}"
    result = parse_facts(reply)
    assert result.facts == SEED_FACTS
    assert result.warnings == []


def test_think_block_with_json_inside_is_ignored() -> None:
    result = parse_facts('<THINK>\n["draft fact, not the answer"]\n</THINK>["final fact from the answer"]')
    assert result.facts == [ExtractedFact("final fact from the answer", FALLBACK_TYPE, "project")]


def test_think_then_fence() -> None:
    reply = f"<think>hmm</think>\n```json\n{SEED_REPLY}\n```"
    assert parse_facts(reply).facts == SEED_FACTS


def test_prose_around_the_json() -> None:
    reply = f"Sure! Here are the facts:\n{SEED_REPLY}\nThese are all the durable facts."
    result = parse_facts(reply)
    assert result.facts == SEED_FACTS
    assert result.warnings == []


def test_prose_with_brackets_around_the_json() -> None:
    reply = (
        "Here are the facts [2 found]:\n"
        '[{"memory": "first progress note", "type": "progress"}, '
        '{"memory": "second progress note", "type": "progress"}]'
    )
    assert [f.text for f in parse_facts(reply).facts] == ["first progress note", "second progress note"]


def test_plain_string_array_becomes_learned_patterns() -> None:
    result = parse_facts('["Always run tests before committing", "API rate limit is 100 req/min"]')
    assert result.facts == [
        ExtractedFact("Always run tests before committing", "learned-pattern", "project"),
        ExtractedFact("API rate limit is 100 req/min", "learned-pattern", "project"),
    ]
    assert result.warnings == []


@pytest.mark.parametrize("key", ["memories", "facts", "items", "results"])
def test_wrapped_arrays_are_unwrapped(key: str) -> None:
    result = parse_facts(json.dumps({key: json.loads(SEED_REPLY)}))
    assert result.facts == SEED_FACTS
    assert result.warnings == []


def test_single_object() -> None:
    result = parse_facts('{"memory": "Build with make release", "type": "project-config"}')
    assert result.facts == [ExtractedFact("Build with make release", "project-config", "project")]
    assert result.warnings == []


def test_content_and_fact_keys_are_accepted() -> None:
    result = parse_facts('[{"content": "uses poetry", "type": "tech-context"}, {"fact": "ci on gh actions"}]')
    assert result.facts == [
        ExtractedFact("uses poetry", "tech-context", "project"),
        ExtractedFact("ci on gh actions", "learned-pattern", "project"),
    ]


def test_unknown_type_is_coerced_to_learned_pattern_with_a_warning() -> None:
    result = parse_facts('[{"memory": "Deploys go through ArgoCD", "type": "deployment"}]')
    assert result.facts == [ExtractedFact("Deploys go through ArgoCD", "learned-pattern", "project")]
    assert len(result.warnings) == 1
    assert "'deployment'" in result.warnings[0]
    assert "learned-pattern" in result.warnings[0]


def test_missing_type_is_learned_pattern_without_warning() -> None:
    result = parse_facts('[{"memory": "Prefer small PRs"}, {"memory": "Second fact without a type", "type": ""}]')
    assert result.facts == [
        ExtractedFact("Prefer small PRs", "learned-pattern", "project"),
        ExtractedFact("Second fact without a type", "learned-pattern", "project"),
    ]
    assert result.warnings == []


@pytest.mark.parametrize("kind", MEMORY_TYPES)
def test_default_scope_is_user_for_preference_only(kind: str) -> None:
    result = parse_facts(json.dumps([{"memory": "A memory of this type", "type": kind}]))
    assert result.facts == [ExtractedFact("A memory of this type", kind, "user" if kind == "preference" else "project")]


def test_explicit_scope_is_honoured_except_a_preference_which_is_always_its_speakers() -> None:
    # Issue 27.5: a preference in a shared project's scope would show one member's taste to all.
    result = parse_facts(
        json.dumps(
            [
                {"memory": "tabs in this repo", "type": "preference", "scope": "project"},
                {"memory": "always answer tersely", "type": "learned-pattern", "scope": "user"},
                {"memory": "odd scope value", "type": "preference", "scope": "global"},
            ]
        )
    )
    assert [(f.text, f.scope) for f in result.facts] == [
        ("tabs in this repo", "user"),
        ("always answer tersely", "user"),
        ("odd scope value", "user"),
    ]


def test_memory_text_is_trimmed() -> None:
    assert parse_facts('["  padded memory text \\n "]').facts == [
        ExtractedFact("padded memory text", "learned-pattern", "project")
    ]


def test_empty_and_blank_items_are_skipped_with_warnings() -> None:
    result = parse_facts(
        '["", "   ", {"memory": ""}, {"memory": null, "type": "progress"}, {"type": "progress"}, "kept memory"]'
    )
    assert result.facts == [ExtractedFact("kept memory", "learned-pattern", "project")]
    assert result.warnings == [f"item {i}: empty memory, skipped" for i in range(5)]


def test_non_string_non_object_items_are_skipped_with_warnings() -> None:
    result = parse_facts('[1, null, true, ["nested"], "kept memory"]')
    assert result.facts == [ExtractedFact("kept memory", "learned-pattern", "project")]
    assert result.warnings == [f"item {i}: not a string or object, skipped" for i in range(4)]


def test_empty_array_is_no_facts_and_no_warning() -> None:
    assert parse_facts("[]").facts == []
    assert parse_facts("[]").warnings == []


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   \n\t",
        "None",
        "null",
        "undefined",
        "42",
        "-3.5e9",
        "true",
        '"just a string"',
        "[",
        "]",
        "{",
        "[{]",
        "I could not find any facts worth keeping.",
        "<think>only thinking, no answer</think>",
        "<think>unclosed think [1, 2",
        "```json\n```",
        "```\nnot json\n```",
        "[[[[[[]]]]]",
        "\x00\x01\x02",
        "NaN",
        "{'memory': 'python repr, not json'}",
    ],
)
def test_garbage_gives_zero_facts_and_a_warning_never_an_exception(raw: str) -> None:
    result = parse_facts(raw)
    assert result.facts == []
    assert len(result.warnings) >= 1


def test_nested_junk_items_give_zero_facts_and_warnings() -> None:
    result = parse_facts('[[1, [2, [3]]], {"a": {"b": []}}, 7]')
    assert result.facts == []
    assert result.warnings == [
        "item 0: not a string or object, skipped",
        "item 1: empty memory, skipped",
        "item 2: not a string or object, skipped",
    ]


@pytest.mark.parametrize("raw", ['{"foo": 1}', '{"memories": "not a list"}', '{"error": "rate limited"}'])
def test_unrecognised_object_gives_a_warning(raw: str) -> None:
    result = parse_facts(raw)
    assert result.facts == []
    assert len(result.warnings) >= 1


@pytest.mark.parametrize("raw", ['[{"memory": ["a"]}]', '[{"memory": {"x": 1}}]'])
def test_non_text_memory_values_are_skipped(raw: str) -> None:
    result = parse_facts(raw)
    assert result.facts == []
    assert len(result.warnings) == 1


# --- raw mode ---


def test_raw_fact_is_one_conversation_memory() -> None:
    # Raw mode stores what was said, not an inference: full confidence.
    assert raw_facts("  [user] hi\n[assistant] hello  ") == [
        ExtractedFact("[user] hi\n[assistant] hello", "conversation", "project", 1.0)
    ]


def test_raw_fact_of_a_short_exchange_is_kept() -> None:
    # The 10-character minimum is for extracted facts, not raw conversation memories.
    [fact] = raw_facts("hi")
    assert fact.text == "hi" and fact.confidence == 1.0


def test_raw_fact_at_the_limit_is_kept_whole() -> None:
    text = "a" * CONVERSATION_MAX_CHARS
    [fact] = raw_facts(text)
    assert fact.text == text


def test_raw_fact_is_cut_in_its_middle_to_the_limit() -> None:
    [fact] = raw_facts("a" * 1000 + "b" * 500 + "c" * 1000)
    assert CONVERSATION_MAX_CHARS == 2_000
    assert len(fact.text) == CONVERSATION_MAX_CHARS
    head, tail = fact.text.split(CUT_MARK)
    assert head.startswith("a" * 990) and tail.endswith("c" * 990)


@pytest.mark.parametrize("exchange", ["", "   ", "\n\t "])
def test_raw_fact_of_nothing_is_none(exchange: str) -> None:
    assert raw_facts(exchange) == []


# --- prompts ---


def test_system_prompt_per_mode() -> None:
    assert system_prompt("normal") == NORMAL_SYSTEM
    assert system_prompt("summary") == SUMMARY_SYSTEM
    assert system_prompt("init") == INIT_SYSTEM
    assert len({NORMAL_SYSTEM, SUMMARY_SYSTEM, INIT_SYSTEM}) == 3
    assert '"type": "session-summary"' in SUMMARY_SYSTEM


@pytest.mark.parametrize("mode", ["raw", "", "NORMAL", "condense"])
def test_system_prompt_of_a_mode_without_one_raises(mode: str) -> None:
    with pytest.raises(ValueError, match="no extraction prompt"):
        system_prompt(mode)


def test_normal_prompt_names_all_eleven_types() -> None:
    assert len(MEMORY_TYPES) == 11
    missing = [t for t in MEMORY_TYPES if f"- {t}:" not in NORMAL_SYSTEM]
    assert missing == []
