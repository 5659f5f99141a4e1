"""Explicit memories (seed 001): "Remember that…", "Save this:…", "Note that…" become memories
directly, whatever the extraction model makes of the turn."""

from __future__ import annotations

import re

_REQUEST = re.compile(
    r"""(?:^|(?<=[.!?\n]))\s*(?:please\s+)?
        (?:remember(?:\s+that)?|save\s+this|note\s+that|keep\s+in\s+mind(?:\s+that)?)
        \s*[:,-]?\s+(?P<fact>[^\n]+?)
        # A request ends with its sentence: another request may follow on the same line.
        (?=[.!?](?:\s|$)|\n|$)""",
    re.IGNORECASE | re.VERBOSE,
)
#: Words that make an explicit memory a personal preference (user scope) rather than project knowledge.
_PREFERENCE = re.compile(r"\b(i|i'm|my|me)\b.*\b(prefer|like|want|hate|always|never)\b|\bprefer", re.IGNORECASE)
_CONFIG = re.compile(r"\b(run|command|script|config|env|environment|port|install|deploy)\b", re.IGNORECASE)
_TECH = re.compile(r"\b(use|uses|using|stack|library|framework|version|limit|database|api)\b", re.IGNORECASE)


def explicit_requests(text: str) -> list[str]:
    """The facts a message explicitly asks to remember, in order."""
    found = []
    for match in _REQUEST.finditer(text):
        fact = match.group("fact").strip().rstrip(".").strip()
        if fact:
            found.append(fact[0].upper() + fact[1:])
    return found


def states_preference(text: str) -> bool:
    """Does this text state a personal preference ("I prefer…", "my…always")?"""
    return bool(_PREFERENCE.search(text))


def guess_type(fact: str) -> tuple[str, str]:
    """(type, scope) for an explicit memory, from its wording; the LLM is not asked."""
    if states_preference(fact):
        return "preference", "user"
    if _CONFIG.search(fact):
        return "project-config", "project"
    if _TECH.search(fact):
        return "tech-context", "project"
    return "learned-pattern", "project"
