"""Pipeline v2's lexical contradiction detector: memstream.rules.lexical."""

from __future__ import annotations

import pytest

from memstream.rules.lexical import (
    ANTONYM_PAIRS,
    MIN_OVERLAP,
    NEGATIONS,
    STOPWORDS,
    LexicalCheck,
    check,
    tokenize,
)

# --- tokenize ---


def test_tokens_are_lowercase_alphanumeric_runs() -> None:
    tokens = tokenize("Use `uv_pip` with Python3.11, NOT pip!")
    assert tokens == ["use", "uv", "pip", "with", "python3", "11", "not", "pip"]


@pytest.mark.parametrize(
    ("text", "token"),
    [
        ("It doesn't work", "doesn't"),
        ("It doesn\u2019t work", "doesn't"),  # typographic apostrophe
        ("We can't ship", "can't"),
        ("We won't ship", "won't"),
        ("Tests shouldn't hit the network", "shouldn't"),
    ],
)
def test_n_t_contractions_stay_one_token(text: str, token: str) -> None:
    assert token in tokenize(text)


def test_other_clitics_are_cut_off() -> None:
    assert tokenize("The user's config, we're told, it's fine") == ["the", "user", "config", "we", "told", "it", "fine"]


def test_unicode_letters_are_kept() -> None:
    assert tokenize("Déploiement via Helm") == ["déploiement", "via", "helm"]


def test_empty_text_has_no_tokens() -> None:
    assert tokenize("") == [] and tokenize(" -- ... ") == []


# --- vocabulary ---


def test_negations_and_antonyms_are_kept_apart() -> None:
    antonym_words = {word for pair in ANTONYM_PAIRS for word in pair}
    assert not antonym_words & NEGATIONS
    assert "disabled" not in NEGATIONS and ("enabled", "disabled") in ANTONYM_PAIRS
    assert {"not", "no", "never", "without", "cannot"} <= NEGATIONS
    assert "none" not in NEGATIONS  # Python's None is not a negation


def test_the_seed_pairs_are_present() -> None:
    for pair in [
        ("enabled", "disabled"),
        ("enable", "disable"),
        ("allow", "deny"),
        ("allowed", "denied"),
        ("true", "false"),
        ("on", "off"),
        ("include", "exclude"),
        ("accept", "reject"),
        ("add", "remove"),
        ("start", "stop"),
        ("open", "close"),
        ("sync", "async"),
        ("public", "private"),
        ("required", "optional"),
    ]:
        assert pair in ANTONYM_PAIRS


def test_antonym_pairs_are_two_distinct_words() -> None:
    assert all(a != b for a, b in ANTONYM_PAIRS)
    assert len(set(ANTONYM_PAIRS)) == len(ANTONYM_PAIRS)


# --- overlap ---


def test_overlap_lists_shared_content_words_in_fact_order() -> None:
    result = check("Staging cluster telemetry is enabled", "Telemetry on the staging cluster is disabled")
    assert result.overlap == ["staging", "cluster", "telemetry"]


def test_stopwords_do_not_count_towards_overlap() -> None:
    # "the" and "is" are shared, but say nothing about a shared subject.
    result = check("The build is green", "The cache is not used")
    assert result == LexicalCheck(False, "", [])
    assert {"the", "is"} <= STOPWORDS


def test_negations_do_not_count_towards_overlap() -> None:
    result = check("We do not use Docker", "Tests never run without network")
    assert result.overlap == []


def test_single_character_tokens_do_not_count_towards_overlap() -> None:
    assert check("x y enabled", "x y disabled").overlap == []


@pytest.mark.parametrize(
    ("fact", "target"),
    [
        ("Caching is enabled", "Caching is disabled"),  # one shared word
        ("Telemetry is enabled", "Analytics are disabled"),  # none
        ("Docker is not used", "Docker builds images"),  # one
    ],
)
def test_below_two_shared_words_nothing_is_flagged(fact: str, target: str) -> None:
    result = check(fact, target)
    assert MIN_OVERLAP == 2
    assert len(result.overlap) < 2
    assert result.review_needed is False and result.reason == ""


def test_words_are_matched_exactly_not_stemmed() -> None:
    # "runs" and "run" are different tokens: only "linter" and "commit" are shared.
    assert check("The linter runs on every commit", "The linter does not run on every commit").overlap == [
        "linter",
        "commit",
    ]


# --- negation polarity ---


@pytest.mark.parametrize(
    "target",
    [
        "The linter does not run on each commit",
        "The linter never runs on each commit",
        "The linter doesn't run on each commit",
        "The linter doesn\u2019t run on each commit",  # typographic apostrophe
        "The linter doesnt run on each commit",
        "The linter won't run on each commit",
        "The linter cannot run on each commit",
        "No linter runs on each commit",
        "Each commit lands without the linter",
    ],
)
def test_negation_on_one_side_only_is_flagged(target: str) -> None:
    result = check("The linter runs on each commit", target)
    assert result.review_needed is True
    assert result.reason == "negation polarity"


def test_negation_polarity_is_symmetric() -> None:
    fact, target = "The linter does not run on each commit", "The linter runs on each commit"
    assert check(fact, target).reason == check(target, fact).reason == "negation polarity"


def test_negation_on_both_sides_is_not_a_polarity_difference() -> None:
    result = check("The linter does not run on each commit", "The linter never runs on each commit")
    assert result.review_needed is False and result.reason == ""
    assert result.overlap == ["linter", "commit"]


def test_agreeing_texts_are_not_flagged() -> None:
    result = check("We deploy the API with Helm charts", "The API is deployed with Helm charts")
    assert len(result.overlap) >= 2
    assert result == LexicalCheck(False, "", result.overlap)


def test_python_none_is_not_a_negation() -> None:
    result = check("The parser returns None for empty input", "The parser returns a list for empty input")
    assert result.review_needed is False


# --- antonyms ---


@pytest.mark.parametrize(
    ("fact", "target", "pair"),
    [
        ("Telemetry is enabled in staging", "Telemetry is disabled in staging", "enabled/disabled"),
        ("Disable telemetry in the staging cluster", "Enable telemetry in the staging cluster", "enable/disable"),
        ("The proxy should allow outbound traffic", "The proxy should deny outbound traffic", "allow/deny"),
        ("Strict mode flag is true", "Strict mode flag is false", "true/false"),
        ("Feature flag dark launch is on", "Feature flag dark launch is off", "on/off"),
        ("Coverage reports include generated files", "Coverage reports exclude generated files", "include/exclude"),
        ("The CLI client is sync", "The CLI client is async", "sync/async"),
        ("The metrics endpoint is public", "The metrics endpoint is private", "public/private"),
        ("The API token field is required", "The API token field is optional", "required/optional"),
        ("Open the database connection per request", "Close the database connection per request", "open/close"),
        ("Start the worker queue at boot", "Stop the worker queue at boot", "start/stop"),
    ],
)
def test_antonym_conflicts_are_flagged_with_the_pair(fact: str, target: str, pair: str) -> None:
    result = check(fact, target)
    assert result.review_needed is True
    assert result.reason == f"antonyms {pair}"


def test_antonyms_are_case_insensitive_and_symmetric() -> None:
    fact, target = "Telemetry ENABLED for staging cluster", "telemetry Disabled for staging cluster"
    assert check(fact, target).reason == check(target, fact).reason == "antonyms enabled/disabled"


def test_the_same_side_on_both_texts_is_no_conflict() -> None:
    result = check("Telemetry is enabled in staging", "Telemetry stays enabled in staging")
    assert result.review_needed is False


def test_a_text_naming_both_sides_takes_no_side() -> None:
    result = check("Enable caching in staging and disable it in production", "Disable caching in staging")
    assert "enable/disable" not in result.reason


def test_negation_and_antonym_are_both_reported() -> None:
    result = check("Telemetry is not enabled in the staging cluster", "Telemetry is disabled in the staging cluster")
    assert result.review_needed is True
    assert result.reason == "negation polarity; antonyms enabled/disabled"


def test_several_antonym_pairs_are_all_reported_in_pair_order() -> None:
    result = check("Signup is public and enabled for staging", "Signup is private and disabled for staging")
    assert result.reason == "antonyms enabled/disabled; antonyms public/private"


def test_antonyms_need_the_overlap_too() -> None:
    assert check("Enable caching", "Disable logging").review_needed is False


def test_empty_texts_are_not_flagged() -> None:
    assert check("", "") == LexicalCheck(False, "", [])
    assert check("", "Telemetry is disabled in staging") == LexicalCheck(False, "", [])
