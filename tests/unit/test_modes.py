"""Pipeline v2's pipeline modes and write gates: memstream.rules.modes."""

from __future__ import annotations

import itertools

import pytest

from memstream.identity import normalize_content
from memstream.rules.modes import (
    MIN_FACT_CONFIDENCE,
    REASON_EMPTY_CONTENT,
    REASON_EXACT_DUPLICATE,
    REASON_FROZEN,
    REASON_LOW_CONFIDENCE,
    REASON_SHADOW,
    REASON_UPDATE_DELETE_NOT_ALLOWED,
    Gate,
    PipelineFlags,
    exact_duplicate,
    gate,
)
from memstream.schemas.history import OUTCOMES

CONTROLLED = PipelineFlags()
FULL = PipelineFlags(allow_update_delete=True)
SHADOW = PipelineFlags(shadow_mode=True)
FROZEN = PipelineFlags(mutations_frozen=True)
CONTENT = normalize_content("We deploy with Helm charts.").normalized


def decide(action: str, flags: PipelineFlags, confidence: float = 0.9, content: str = CONTENT) -> Gate:
    return gate(action, flags, fact_confidence=confidence, normalized_content=content)


# --- flags and modes ---


def test_defaults_are_the_seeds() -> None:
    flags = PipelineFlags()
    assert (flags.shadow_mode, flags.allow_update_delete, flags.mutations_frozen, flags.graph_enabled) == (
        False,
        False,
        False,
        False,
    )
    assert flags.mode == "controlled"
    assert MIN_FACT_CONFIDENCE == 0.7


def expected_mode(shadow: bool, allow: bool, frozen: bool) -> str:
    if shadow or frozen:
        return "shadow"
    return "full" if allow else "controlled"


@pytest.mark.parametrize(("shadow", "allow", "frozen", "graph"), list(itertools.product([False, True], repeat=4)))
def test_mode_matrix(shadow: bool, allow: bool, frozen: bool, graph: bool) -> None:
    flags = PipelineFlags(shadow_mode=shadow, allow_update_delete=allow, mutations_frozen=frozen, graph_enabled=graph)
    assert flags.mode == expected_mode(shadow, allow, frozen)


@pytest.mark.parametrize(
    ("flags", "mode"),
    [
        (PipelineFlags(), "controlled"),
        (PipelineFlags(allow_update_delete=True), "full"),
        (PipelineFlags(shadow_mode=True), "shadow"),
        (PipelineFlags(shadow_mode=True, allow_update_delete=True), "shadow"),
        (PipelineFlags(mutations_frozen=True), "shadow"),
        (PipelineFlags(mutations_frozen=True, allow_update_delete=True, graph_enabled=True), "shadow"),
        (PipelineFlags(graph_enabled=True), "controlled"),
    ],
)
def test_named_modes(flags: PipelineFlags, mode: str) -> None:
    assert flags.mode == mode


def test_shadow_reason_names_the_brake_first() -> None:
    assert CONTROLLED.shadow_reason == FULL.shadow_reason == ""
    assert SHADOW.shadow_reason == REASON_SHADOW == "shadow_mode"
    assert FROZEN.shadow_reason == REASON_FROZEN == "mutations_frozen"
    assert PipelineFlags(shadow_mode=True, mutations_frozen=True).shadow_reason == "mutations_frozen"


def test_flags_are_frozen() -> None:
    with pytest.raises(AttributeError):
        CONTROLLED.allow_update_delete = True  # type: ignore[misc]


# --- gate: shadow and frozen write nothing ---


@pytest.mark.parametrize("action", ["ADD", "UPDATE", "DELETE", "NONE"])
@pytest.mark.parametrize("allow", [False, True])
def test_shadow_proposes_every_action(action: str, allow: bool) -> None:
    flags = PipelineFlags(shadow_mode=True, allow_update_delete=allow)
    assert decide(action, flags) == Gate("proposed", "shadow_mode")


@pytest.mark.parametrize("action", ["ADD", "UPDATE", "DELETE", "NONE"])
@pytest.mark.parametrize(("shadow", "allow", "graph"), list(itertools.product([False, True], repeat=3)))
def test_frozen_overrides_every_other_flag(action: str, shadow: bool, allow: bool, graph: bool) -> None:
    flags = PipelineFlags(mutations_frozen=True, shadow_mode=shadow, allow_update_delete=allow, graph_enabled=graph)
    assert decide(action, flags) == Gate("proposed", "mutations_frozen")


def test_shadow_comes_before_the_write_gates() -> None:
    # Shadow audits the proposal as made; it does not pretend to run gates it never applies.
    assert decide("ADD", SHADOW, confidence=0.1, content="") == Gate("proposed", "shadow_mode")


# --- gate: ADD ---


def test_add_that_clears_its_gates_is_created() -> None:
    assert decide("ADD", CONTROLLED) == Gate("created", "")
    assert decide("ADD", FULL) == Gate("created", "")


def test_add_below_the_confidence_threshold_is_skipped() -> None:
    assert decide("ADD", CONTROLLED, confidence=0.69) == Gate("skipped", REASON_LOW_CONFIDENCE)
    assert REASON_LOW_CONFIDENCE == "low_fact_confidence"


def test_add_at_the_threshold_passes() -> None:
    assert decide("ADD", CONTROLLED, confidence=0.7) == Gate("created", "")


def test_nan_confidence_never_passes() -> None:
    assert decide("ADD", CONTROLLED, confidence=float("nan")) == Gate("skipped", "low_fact_confidence")


def test_the_threshold_is_configurable() -> None:
    assert gate("ADD", CONTROLLED, fact_confidence=0.72, normalized_content=CONTENT, min_confidence=0.75) == Gate(
        "skipped", "low_fact_confidence"
    )
    assert gate("ADD", CONTROLLED, fact_confidence=0.3, normalized_content=CONTENT, min_confidence=0.0) == Gate(
        "created", ""
    )


@pytest.mark.parametrize("text", ["", "   ", "...", " !?; "])
def test_add_with_empty_normalized_content_is_skipped(text: str) -> None:
    content = normalize_content(text).normalized
    assert decide("ADD", CONTROLLED, content=content) == Gate("skipped", REASON_EMPTY_CONTENT)
    assert REASON_EMPTY_CONTENT == "empty_fact_content"


def test_whitespace_passed_as_content_counts_as_empty() -> None:
    assert decide("ADD", CONTROLLED, content=" \n") == Gate("skipped", "empty_fact_content")


def test_confidence_is_checked_before_content() -> None:
    assert decide("ADD", CONTROLLED, confidence=0.2, content="") == Gate("skipped", "low_fact_confidence")


# --- gate: the exact-duplicate gate ---


def test_created_with_a_stored_hash_is_deduped() -> None:
    assert exact_duplicate(Gate("created"), "mem-existing") == Gate("deduped", REASON_EXACT_DUPLICATE)


@pytest.mark.parametrize("existing", [None, ""])
def test_created_without_a_stored_hash_stays_created(existing: str | None) -> None:
    assert exact_duplicate(Gate("created"), existing) == Gate("created", "")


@pytest.mark.parametrize(
    "verdict",
    [
        Gate("skipped", "low_fact_confidence"),
        Gate("skipped", "empty_fact_content"),
        Gate("proposed", "shadow_mode"),
        Gate("recorded"),
        Gate("blocked", "update_delete_not_allowed"),
        Gate("updated"),
        Gate("deleted"),
    ],
)
def test_exact_duplicate_only_touches_created(verdict: Gate) -> None:
    assert exact_duplicate(verdict, "mem-existing") == verdict


def test_seed_order_confidence_then_content_then_duplicate() -> None:
    def run(confidence: float, content: str, existing: str | None) -> Gate:
        return exact_duplicate(decide("ADD", CONTROLLED, confidence=confidence, content=content), existing)

    assert run(0.1, "", "dup") == Gate("skipped", "low_fact_confidence")
    assert run(0.9, "", "dup") == Gate("skipped", "empty_fact_content")
    assert run(0.9, CONTENT, "dup") == Gate("deduped", "exact_duplicate")
    assert run(0.9, CONTENT, None) == Gate("created", "")


# --- gate: NONE, UPDATE, DELETE ---


@pytest.mark.parametrize("flags", [CONTROLLED, FULL])
def test_none_is_recorded_whatever_the_fact(flags: PipelineFlags) -> None:
    assert decide("NONE", flags) == Gate("recorded", "")
    assert decide("NONE", flags, confidence=0.1, content="") == Gate("recorded", "")


@pytest.mark.parametrize("action", ["UPDATE", "DELETE"])
def test_destructive_actions_are_blocked_in_controlled_mode(action: str) -> None:
    assert decide(action, CONTROLLED) == Gate("blocked", REASON_UPDATE_DELETE_NOT_ALLOWED)
    assert REASON_UPDATE_DELETE_NOT_ALLOWED == "update_delete_not_allowed"


@pytest.mark.parametrize(("action", "outcome"), [("UPDATE", "updated"), ("DELETE", "deleted")])
def test_destructive_actions_apply_in_full_mode(action: str, outcome: str) -> None:
    assert decide(action, FULL) == Gate(outcome, "")  # type: ignore[arg-type]


@pytest.mark.parametrize("action", ["UPDATE", "DELETE"])
def test_not_allowed_is_reported_before_the_facts_own_gates(action: str) -> None:
    assert decide(action, CONTROLLED, confidence=0.1, content="") == Gate("blocked", "update_delete_not_allowed")


@pytest.mark.parametrize("action", ["UPDATE", "DELETE"])
def test_destructive_actions_on_a_weak_or_empty_fact_are_blocked(action: str) -> None:
    assert decide(action, FULL, confidence=0.5) == Gate("blocked", "low_fact_confidence")
    assert decide(action, FULL, content="") == Gate("blocked", "empty_fact_content")


def test_graph_flag_changes_no_outcome() -> None:
    for action in ("ADD", "UPDATE", "DELETE", "NONE"):
        for flags in (CONTROLLED, FULL, SHADOW):
            with_graph = PipelineFlags(
                shadow_mode=flags.shadow_mode, allow_update_delete=flags.allow_update_delete, graph_enabled=True
            )
            assert decide(action, with_graph) == decide(action, flags)


@pytest.mark.parametrize("action", ["add", "MERGE", ""])
def test_unknown_action_is_a_programming_error(action: str) -> None:
    with pytest.raises(ValueError, match="unknown decision action"):
        decide(action, CONTROLLED)


def test_every_outcome_the_gates_give_is_an_audit_outcome() -> None:
    seen = {
        exact_duplicate(decide(action, flags, confidence, content), existing).outcome
        for action in ("ADD", "UPDATE", "DELETE", "NONE")
        for flags in (CONTROLLED, FULL, SHADOW, FROZEN)
        for confidence in (0.1, 0.9)
        for content in ("", CONTENT)
        for existing in (None, "dup")
    }
    assert seen == {"proposed", "created", "deduped", "skipped", "recorded", "blocked", "updated", "deleted"}
    assert seen <= set(OUTCOMES)
