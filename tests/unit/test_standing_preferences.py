"""Issue 25.4: raw mode makes a separate user memory only of an explicit, first-person, standing
preference; everyday chat (a public conversational benchmark sent 10% of its exchanges to the user
scope under the old rule) stays the project's conversation. And a long exchange keeps both sides."""

from __future__ import annotations

import pytest

from memstream.rules.explicit import standing_preferences
from memstream.rules.extraction import CONVERSATION_MAX_CHARS, raw_facts


@pytest.mark.parametrize(
    ("message", "preference"),
    [
        ("I prefer tabs over spaces.", "I prefer tabs over spaces"),
        ("Great. By the way I prefer bun over npm.", "I prefer bun over npm"),
        ("Always use bun instead of npm", "Always use bun instead of npm"),
        ("Never push to main directly!", "Never push to main directly"),
        ("please always run the linter before committing", "Always run the linter before committing"),
        ("remember that I deploy from the release branch", "I deploy from the release branch"),
        ("Keep in mind that I review every migration myself.", "I review every migration myself"),
        ("My preference is short commit messages", "My preference is short commit messages"),
        ("I always prefer explicit imports", "I always prefer explicit imports"),
    ],
)
def test_a_standing_preference_is_found(message: str, preference: str) -> None:
    assert standing_preferences(message) == [preference]


@pytest.mark.parametrize(
    "message",
    [
        "I love it",
        "My dream is to open a bakery by the sea",
        "I like the new design a lot",
        "I always wanted a dog when I was little",
        "I never thought about it that way",
        "Always the same story with this laptop",
        "I want to go to Japan next spring",
        "My favourite colour is blue, what's yours?",
        "Do you prefer tea or coffee?",
        "I'd prefer if we talked about it later",
        "Remember that time we went hiking?",
        "Remember when I said I prefer tabs?",
        "You prefer tabs, right?",
        "we prefer to meet on Mondays",
        "I hate Mondays",
        "Can you always use the same font?",
    ],
)
def test_everyday_chat_is_not_a_standing_preference(message: str) -> None:
    assert standing_preferences(message) == []


def test_every_preference_of_a_message_is_found_once() -> None:
    message = "I prefer tabs. Also, always use bun. Remember that I prefer tabs."
    assert standing_preferences(message) == ["I prefer tabs", "Always use bun"]


def test_a_long_question_is_cut_in_its_middle_and_the_answer_kept() -> None:
    question = "Why does the export fail? " + "Here is the log line. " * 100 + "What should I change first?"
    answer = "Add an index on orders.created_at; the export scans the table."
    [fact] = raw_facts(f"[user] {question}\n[assistant] {answer}")
    assert len(fact.text) <= CONVERSATION_MAX_CHARS
    assert fact.text.startswith("[user] Why does the export fail?")
    assert "What should I change first?" in fact.text  # the question's end
    assert fact.text.endswith(f"[assistant] {answer}")  # the whole answer


def test_a_long_answer_is_cut_in_its_middle_and_the_question_kept() -> None:
    answer = "First, the cause. " + "More detail here. " * 150 + "So: add the index."
    [fact] = raw_facts(f"[user] Why is it slow?\n[assistant] {answer}")
    assert len(fact.text) <= CONVERSATION_MAX_CHARS
    assert fact.text.startswith("[user] Why is it slow?\n[assistant] First, the cause.")
    assert fact.text.endswith("So: add the index.")


def test_long_notes_go_before_the_question_and_the_answer_give_up_their_middles() -> None:
    # Issue 37.2: what the agent said while working is cut first; the question and the final answer keep
    # both ends even when, together, they must give up their middles.
    parts = [f"[{'user' if i == 0 else 'assistant'}] start{i} " + "x " * 600 + f"end{i}" for i in range(4)]
    [fact] = raw_facts("\n".join(parts))
    assert len(fact.text) <= CONVERSATION_MAX_CHARS
    for i in (0, 3):
        assert f"start{i}" in fact.text and f"end{i}" in fact.text
    assert "[…] 2 messages in between left out" in fact.text


def test_a_short_exchange_is_kept_whole() -> None:
    exchange = "[user] Which port?\n[assistant] 8080."
    [fact] = raw_facts(exchange)
    assert fact.text == exchange
