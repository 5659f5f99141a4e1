"""The memory spec: explicit "remember that…" requests and the type guessed for them."""

from __future__ import annotations

import pytest

from memstream.recall.search import SECTIONS
from memstream.rules.explicit import explicit_requests, guess_type

# --- explicit_requests ---


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        ("Remember that we use JWT in httpOnly cookies", "We use JWT in httpOnly cookies"),
        ("Save this: always run tests before committing", "Always run tests before committing"),
        ("Note that the API rate limit is 100 req/min", "The API rate limit is 100 req/min"),
        ("Please remember that builds take five minutes", "Builds take five minutes"),
        ("Keep in mind that CI is slow on Fridays", "CI is slow on Fridays"),
        ("Remember: the API lives under /v2", "The API lives under /v2"),
    ],
)
def test_each_request_form_is_found(message: str, fact: str) -> None:
    assert explicit_requests(message) == [fact]


@pytest.mark.parametrize(
    "message",
    [
        "REMEMBER THAT staging runs in eu-west-1",
        "remember that staging runs in eu-west-1",
        "ReMeMbEr ThAt staging runs in eu-west-1",
        "PLEASE REMEMBER THAT staging runs in eu-west-1",
    ],
)
def test_requests_are_case_insensitive(message: str) -> None:
    assert explicit_requests(message) == ["Staging runs in eu-west-1"]


@pytest.mark.parametrize(
    "message",
    [
        "Thanks. Remember that staging runs in eu-west-1",
        "Great work! Note that staging runs in eu-west-1",
        "Is it done? Keep in mind that staging runs in eu-west-1",
        "Thanks.Remember that staging runs in eu-west-1",
        "First line\nSave this: staging runs in eu-west-1",
        "   Remember that staging runs in eu-west-1",
    ],
)
def test_request_after_a_sentence_end_is_found(message: str) -> None:
    assert explicit_requests(message) == ["Staging runs in eu-west-1"]


def test_fact_is_capitalized_and_the_trailing_period_stripped() -> None:
    assert explicit_requests("remember that the port is 8080.") == ["The port is 8080"]
    assert explicit_requests("note that deploys need the VPN.  ") == ["Deploys need the VPN"]


def test_capitalization_keeps_the_rest_of_the_fact() -> None:
    assert explicit_requests("remember that iOS builds need Xcode 16") == ["IOS builds need Xcode 16"]


def test_two_requests_in_one_message() -> None:
    message = "Remember that the port is 8080.\nAlso, thanks for the fix.\nNote that staging needs the VPN."
    assert explicit_requests(message) == ["The port is 8080", "Staging needs the VPN"]


def test_two_requests_in_one_line() -> None:
    message = "Remember that the port is 8080. Note that staging needs the VPN."
    assert explicit_requests(message) == ["The port is 8080", "Staging needs the VPN"]


@pytest.mark.parametrize(
    "message",
    [
        "I will remember it",
        "I don't remember the port",
        "remembering",
        "Remembering the port is hard",
        "You should note that down somewhere",
        "Sure, remember that later",
        "",
        "Nothing to see here.",
    ],
)
def test_no_request_is_found(message: str) -> None:
    assert explicit_requests(message) == []


# --- guess_type ---


@pytest.mark.parametrize(
    "fact",
    ["I prefer bun over npm", "I always want short answers", "My editor is vim and I never use tabs", "Prefers tabs"],
)
def test_personal_wording_is_a_user_preference(fact: str) -> None:
    assert guess_type(fact) == ("preference", "user")


def test_seed_example_preference() -> None:
    assert guess_type("I prefer bun over npm") == ("preference", "user")


@pytest.mark.parametrize(
    "fact",
    [
        # "run" is a config word, and nothing personal: project-config (checked before tech words).
        "Always run tests before committing",
        "The API port is 8080",
        "Deploy with the release script",
        "Set the env var FOO before starting",
    ],
)
def test_config_words_are_project_config(fact: str) -> None:
    assert guess_type(fact) == ("project-config", "project")


@pytest.mark.parametrize(
    "fact",
    ["We use JWT in httpOnly cookies", "The API rate limit is 100 req/min", "The database is Postgres 16"],
)
def test_tech_words_are_tech_context(fact: str) -> None:
    assert guess_type(fact) == ("tech-context", "project")


@pytest.mark.parametrize(
    "fact", ["Deploys go through make ship", "Deploys happen on Fridays", "Write small commits", "Reviews take a day"]
)
def test_anything_else_is_a_project_rule_the_block_shows(fact: str) -> None:
    # learned-pattern has no [MEMORY] block section: a remembered rule typed so never reached the next
    # session (issue 37.5).
    assert guess_type(fact) == ("tech-context", "project")
    assert any("tech-context" in types for _, types in SECTIONS)


def test_preference_wins_over_config_and_tech_words() -> None:
    assert guess_type("I prefer to run the api on port 3000") == ("preference", "user")


def test_config_wins_over_tech_words() -> None:
    assert guess_type("Run the api with uvicorn") == ("project-config", "project")


# --- near misses: chit-chat, advice and questions are not requests to remember a statement ---


@pytest.mark.parametrize(
    "message",
    [
        "Remember to listen to your heart",
        "Remember to listen to your heart.",
        "Please remember to drink water",
        "Remember any good memories from your childhood?",
        "Remember any good memories from the trip.",
        "Remember when we fixed the login bug?",
        "Remember how the cache worked?",
        "Remember what I said about tabs?",
        "Remember that time we broke prod?",
        "Remember that bug from yesterday?",
        "Remember me?",
        "Remember, remember the fifth of November",
        "Keep in mind the deadline",
        "Note to self: buy milk",
        "Can you remember that the port is 8080?",
        "Remember that the port is 8080?",
        "Remember the good old days",
    ],
)
def test_near_misses_are_not_requests(message: str) -> None:
    assert explicit_requests(message) == []


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        ("Remember I prefer bun over npm", "I prefer bun over npm"),
        ("Please remember we deploy from main only.", "We deploy from main only"),
        ("Remember, we never push on Fridays", "We never push on Fridays"),
        ("remember - the staging db is on port 6543", "The staging db is on port 6543"),
        ("Remember that I prefer bun over npm for all installs.", "I prefer bun over npm for all installs"),
    ],
)
def test_statements_to_remember_still_are(message: str, fact: str) -> None:
    assert explicit_requests(message) == [fact]


def test_a_note_is_a_request_only_with_that() -> None:
    assert explicit_requests("Note: the build is flaky today") == []
    assert explicit_requests("Note that the build is flaky on Mondays") == ["The build is flaky on Mondays"]


# --- issue 28: requests the small models missed, which the rule itself must catch ---


@pytest.mark.parametrize(
    ("message", "fact"),
    [
        # A tag question asks for agreement, not whether to remember: the request stands.
        (
            "Remember that we deploy with `make release` only from main, ok?",
            "We deploy with `make release` only from main",
        ),
        ("Remember that staging runs in eu-west-1, right?", "Staging runs in eu-west-1"),
        ("Note that the cache is per tenant, okay?", "The cache is per tenant"),
        # A discourse marker before the request still starts it.
        (
            "Also, remember that we deploy with make release only from main. Now fix the bug.",
            "We deploy with make release only from main",
        ),
        ("Oh and please remember that CI needs the ARM runner.", "CI needs the ARM runner"),
        ("btw remember that the docs build is strict", "The docs build is strict"),
        ("One more thing: remember that tokens expire hourly", "Tokens expire hourly"),
    ],
)
def test_a_request_with_a_tag_question_or_a_leading_marker_is_found(message: str, fact: str) -> None:
    assert explicit_requests(message) == [fact]


@pytest.mark.parametrize(
    "message",
    [
        "Do you remember that time we broke prod?",
        "Remember that we deployed on Friday?",
        "Also, do you remember that build?",
        "And remember when the cache exploded?",
    ],
)
def test_questions_with_markers_are_still_not_requests(message: str) -> None:
    assert explicit_requests(message) == []
