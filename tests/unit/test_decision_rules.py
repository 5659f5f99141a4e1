"""Pipeline v2's decision stage: memstream.rules.decision."""

from __future__ import annotations

import json

import msgspec
import pytest

from memstream.rules.decision import (
    ACTIONS,
    DEFAULT_CONFIDENCE,
    MAX_CANDIDATES,
    MAX_REASON_CHARS,
    NO_CANDIDATES_REASON,
    PROMPT_VERSION,
    SYSTEM,
    Proposal,
    no_candidates_proposal,
    parse_decision,
    prompt,
)
from tests.unit.factories import memory

CANDIDATES = ("mem-a", "mem-b", "mem-c")


def reply(**fields: object) -> str:
    return json.dumps(fields)


# --- constants and prompt ---


def test_constants_follow_the_seed() -> None:
    assert PROMPT_VERSION == "decision.v1"
    assert MAX_CANDIDATES == 5
    assert ACTIONS == ("ADD", "UPDATE", "DELETE", "NONE")
    assert 0.0 <= DEFAULT_CONFIDENCE < 0.7  # a default never clears the write gate


def test_system_prompt_names_every_action_and_the_reply_keys() -> None:
    for word in ("ADD", "UPDATE", "DELETE", "NONE", '"action"', '"targetId"', '"confidence"', '"reason"'):
        assert word in SYSTEM
    assert "Return ONLY JSON" in SYSTEM


def test_prompt_presents_the_fact_and_a_numbered_list_of_candidates() -> None:
    candidates = [
        memory("mem-a", "tech-context", "We install packages with npm"),
        memory("mem-b", "progress", "CI is green on main"),
    ]
    text = prompt("We switched from npm to bun", "tech-context", candidates)
    assert 'New fact (type=tech-context): "We switched from npm to bun"' in text
    assert '1. id=mem-a type=tech-context content="We install packages with npm"' in text
    assert '2. id=mem-b type=progress content="CI is green on main"' in text
    assert text.index("1. id=mem-a") < text.index("2. id=mem-b")


def test_prompt_quotes_texts_so_quotes_and_newlines_stay_inside_one_entry() -> None:
    candidates = [memory("mem-a", text='Run "make test"\nbefore pushing')]
    text = prompt('Use "uv"\nnot pip', "preference", candidates)
    assert 'New fact (type=preference): "Use \\"uv\\"\\nnot pip"' in text
    assert '1. id=mem-a type=architecture content="Run \\"make test\\"\\nbefore pushing"' in text
    # One line per candidate: the embedded newline did not break the list.
    assert [line for line in text.splitlines() if line.startswith("1. ")] == [
        '1. id=mem-a type=architecture content="Run \\"make test\\"\\nbefore pushing"'
    ]


def test_prompt_keeps_non_ascii_readable() -> None:
    text = prompt("Le déploiement passe par Helm", "tech-context", [memory("m", text="Déploiement: kubectl")])
    assert "déploiement" in text and "Déploiement: kubectl" in text


# --- no candidates ---


def test_no_candidates_proposes_add_with_the_facts_confidence_and_a_fixed_reason() -> None:
    proposal = no_candidates_proposal(0.83)
    assert proposal == Proposal(action="ADD", target_id="", confidence=0.83, reason=NO_CANDIDATES_REASON)
    assert no_candidates_proposal(0.4).reason == no_candidates_proposal(0.9).reason != ""


@pytest.mark.parametrize(("given", "expected"), [(1.7, 1.0), (-0.2, 0.0), (float("nan"), DEFAULT_CONFIDENCE)])
def test_no_candidates_confidence_is_kept_within_bounds(given: float, expected: float) -> None:
    assert no_candidates_proposal(given).confidence == expected


def test_proposal_is_frozen() -> None:
    proposal = no_candidates_proposal(0.9)
    with pytest.raises(AttributeError):
        proposal.action = "DELETE"  # type: ignore[misc]


def test_proposal_round_trips_through_msgspec() -> None:
    proposal = Proposal(action="UPDATE", target_id="mem-a", confidence=0.9, reason="bun replaced npm")
    assert msgspec.json.decode(msgspec.json.encode(proposal), type=Proposal) == proposal


# --- parse_decision: the happy paths ---


@pytest.mark.parametrize("action", ["UPDATE", "DELETE"])
def test_targeted_actions_keep_a_candidate_target(action: str) -> None:
    proposal, warnings = parse_decision(
        reply(action=action, targetId="mem-b", confidence=0.9, reason="same"), CANDIDATES
    )
    expected = Proposal(action=action, target_id="mem-b", confidence=0.9, reason="same")  # type: ignore[arg-type]
    assert proposal == expected
    assert warnings == []


def test_add_ignores_any_target() -> None:
    proposal, warnings = parse_decision(
        reply(action="ADD", targetId="mem-a", confidence=0.8, reason="new information"), CANDIDATES
    )
    assert proposal == Proposal(action="ADD", target_id="", confidence=0.8, reason="new information")
    assert warnings == []


def test_none_keeps_a_candidate_target_and_needs_none() -> None:
    with_target, _ = parse_decision(reply(action="NONE", targetId="mem-c", confidence=0.7, reason="dup"), CANDIDATES)
    without, warnings = parse_decision(reply(action="NONE", confidence=0.7, reason="dup"), CANDIDATES)
    assert with_target is not None and with_target.target_id == "mem-c"
    assert without == Proposal(action="NONE", target_id="", confidence=0.7, reason="dup")
    assert warnings == []


@pytest.mark.parametrize("spelling", ["update", "Update", " UPDATE ", "uPdAtE"])
def test_action_is_read_case_insensitively(spelling: str) -> None:
    proposal, _ = parse_decision(reply(action=spelling, targetId="mem-a", confidence=0.9, reason="r"), CANDIDATES)
    assert proposal is not None and proposal.action == "UPDATE"


def test_snake_case_target_key_is_accepted_too() -> None:
    proposal, _ = parse_decision(reply(action="DELETE", target_id="mem-a", confidence=0.9, reason="gone"), CANDIDATES)
    assert proposal is not None and proposal.target_id == "mem-a"


def test_reason_whitespace_is_collapsed() -> None:
    proposal, _ = parse_decision(reply(action="ADD", confidence=0.9, reason="  new\n  tool   choice "), CANDIDATES)
    assert proposal is not None and proposal.reason == "new tool choice"


# --- parse_decision: tolerant reading ---


def test_think_block_and_fence_are_stripped() -> None:
    raw = (
        "<think>The fact says bun replaced npm, so {this} is an update.</think>\n"
        "```json\n"
        '{"action": "UPDATE", "targetId": "mem-a", "confidence": 0.92, "reason": "npm replaced by bun"}\n'
        "```"
    )
    proposal, warnings = parse_decision(raw, CANDIDATES)
    assert proposal == Proposal(action="UPDATE", target_id="mem-a", confidence=0.92, reason="npm replaced by bun")
    assert warnings == []


def test_prose_around_the_json_is_tolerated() -> None:
    raw = (
        'Here is my decision: {"action": "NONE", "targetId": "mem-b", "confidence": 0.6, "reason": "known"}'
        " Hope it helps."
    )
    proposal, _ = parse_decision(raw, CANDIDATES)
    assert proposal == Proposal(action="NONE", target_id="mem-b", confidence=0.6, reason="known")


def test_a_one_item_array_is_read_as_the_decision() -> None:
    proposal, warnings = parse_decision('[{"action": "ADD", "confidence": 0.9, "reason": "new"}]', CANDIDATES)
    assert proposal == Proposal(action="ADD", confidence=0.9, reason="new")
    assert warnings == []


def test_an_array_of_several_uses_the_first_decision_with_a_warning() -> None:
    raw = json.dumps(
        [
            {"action": "DELETE", "targetId": "mem-a", "confidence": 0.9, "reason": "gone"},
            {"action": "ADD", "confidence": 0.9, "reason": "new"},
        ]
    )
    proposal, warnings = parse_decision(raw, CANDIDATES)
    assert proposal is not None and proposal.action == "DELETE"
    assert len(warnings) == 1 and "first decision" in warnings[0]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("I think you should add it.", "unparseable"),
        ("", "unparseable"),
        ('"ADD"', "expected a JSON object"),  # valid JSON, but a bare string
        ("[1, 2]", "without a decision object"),
        ("[]", "without a decision object"),
    ],
)
def test_unreadable_replies_yield_no_proposal_and_a_warning(raw: str, fragment: str) -> None:
    proposal, warnings = parse_decision(raw, CANDIDATES)
    assert proposal is None
    assert len(warnings) == 1 and fragment in warnings[0]


# --- parse_decision: validation ---


@pytest.mark.parametrize("action", ["UPDATE", "DELETE"])
def test_hallucinated_target_drops_the_proposal(action: str) -> None:
    proposal, warnings = parse_decision(
        reply(action=action, targetId="mem-zzz", confidence=0.95, reason="looks related"), CANDIDATES
    )
    assert proposal is None
    assert len(warnings) == 1 and "'mem-zzz' is not one of the candidates" in warnings[0]


@pytest.mark.parametrize("target", [None, "", "   ", False])
@pytest.mark.parametrize("action", ["UPDATE", "DELETE"])
def test_missing_target_drops_the_proposal(action: str, target: object) -> None:
    fields: dict[str, object] = {"action": action, "confidence": 0.9, "reason": "r"}
    if target is not None:
        fields["targetId"] = target
    proposal, warnings = parse_decision(json.dumps(fields), CANDIDATES)
    assert proposal is None
    assert warnings == [f"{action} without a targetId, proposal dropped"]


def test_a_list_position_is_not_taken_for_an_id() -> None:
    # The prompt numbers the candidates; "2" is a position, not the id "mem-b".
    proposal, warnings = parse_decision(reply(action="UPDATE", targetId=2, confidence=0.9, reason="r"), CANDIDATES)
    assert proposal is None and "'2' is not one of the candidates" in warnings[0]


def test_a_numeric_target_matches_a_numeric_candidate_id() -> None:
    proposal, _ = parse_decision(reply(action="DELETE", targetId=42, confidence=0.9, reason="r"), ["42"])
    assert proposal is not None and proposal.target_id == "42"


def test_target_ids_are_compared_after_trimming() -> None:
    proposal, _ = parse_decision(reply(action="UPDATE", targetId=" mem-a ", confidence=0.9, reason="r"), CANDIDATES)
    assert proposal is not None and proposal.target_id == "mem-a"


def test_no_candidates_means_no_update_or_delete_can_stand() -> None:
    proposal, _ = parse_decision(reply(action="UPDATE", targetId="mem-a", confidence=0.9, reason="r"), [])
    assert proposal is None


def test_none_with_a_hallucinated_target_keeps_the_proposal_without_it() -> None:
    proposal, warnings = parse_decision(
        reply(action="NONE", targetId="mem-zzz", confidence=0.7, reason="already known"), CANDIDATES
    )
    assert proposal == Proposal(action="NONE", target_id="", confidence=0.7, reason="already known")
    assert len(warnings) == 1 and "target dropped" in warnings[0]


@pytest.mark.parametrize("reason", ["", "   ", "\n\t", None, 42, ["because"]])
def test_an_empty_or_non_text_reason_drops_the_proposal(reason: object) -> None:
    fields: dict[str, object] = {"action": "ADD", "confidence": 0.9}
    if reason is not None:
        fields["reason"] = reason
    proposal, warnings = parse_decision(json.dumps(fields), CANDIDATES)
    assert proposal is None
    assert warnings == ["ADD without a reason, proposal dropped"]


def test_a_long_reason_is_truncated_with_a_warning() -> None:
    proposal, warnings = parse_decision(reply(action="ADD", confidence=0.9, reason="x" * 2_000), CANDIDATES)
    assert proposal is not None and len(proposal.reason) == MAX_REASON_CHARS
    assert proposal.reason.endswith("…")
    assert any("truncated" in w for w in warnings)


@pytest.mark.parametrize("action", [None, "", "MERGE", "REPLACE", 3, "ADD_OR_UPDATE"])
def test_unknown_action_drops_the_proposal(action: object) -> None:
    fields: dict[str, object] = {"targetId": "mem-a", "confidence": 0.9, "reason": "r"}
    if action is not None:
        fields["action"] = action
    proposal, warnings = parse_decision(json.dumps(fields), CANDIDATES)
    assert proposal is None
    assert len(warnings) == 1 and "unknown action" in warnings[0]


@pytest.mark.parametrize(("given", "expected"), [(1.5, 1.0), (-0.3, 0.0), (0, 0.0), (1, 1.0), (0.42, 0.42)])
def test_confidence_is_clamped_to_the_unit_interval(given: float, expected: float) -> None:
    proposal, warnings = parse_decision(reply(action="ADD", confidence=given, reason="r"), CANDIDATES)
    assert proposal is not None and proposal.confidence == expected
    assert warnings == []


def test_a_numeric_string_confidence_is_read() -> None:
    proposal, warnings = parse_decision(reply(action="ADD", confidence=" 0.85 ", reason="r"), CANDIDATES)
    assert proposal is not None and proposal.confidence == 0.85
    assert warnings == []


def test_missing_confidence_gets_the_default_with_a_warning() -> None:
    proposal, warnings = parse_decision(reply(action="ADD", reason="r"), CANDIDATES)
    assert proposal is not None and proposal.confidence == DEFAULT_CONFIDENCE
    assert warnings == [f"no confidence, using {DEFAULT_CONFIDENCE}"]


@pytest.mark.parametrize("value", ["high", True, [0.9], {"value": 0.9}])
def test_non_numeric_confidence_gets_the_default_with_a_warning(value: object) -> None:
    proposal, warnings = parse_decision(reply(action="ADD", confidence=value, reason="r"), CANDIDATES)
    assert proposal is not None and proposal.confidence == DEFAULT_CONFIDENCE
    assert len(warnings) == 1 and "not a number" in warnings[0]


def test_nan_confidence_gets_the_default() -> None:
    # json.loads accepts the bare NaN token some models emit.
    proposal, warnings = parse_decision('{"action": "ADD", "confidence": NaN, "reason": "r"}', CANDIDATES)
    assert proposal is not None and proposal.confidence == DEFAULT_CONFIDENCE
    assert "not a number" in warnings[0]


def test_validation_drops_before_it_reads_confidence() -> None:
    # A dropped proposal carries only the warning that dropped it.
    raw = reply(action="DELETE", targetId="nope", confidence="high", reason="")
    proposal, warnings = parse_decision(raw, CANDIDATES)
    assert proposal is None and len(warnings) == 1
