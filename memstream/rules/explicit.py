"""Explicit memories (seed 001): "Remember that…", "Save this:…", "Note that…" become memories
directly, whatever the extraction model makes of the turn."""

from __future__ import annotations

import re

_REQUEST = re.compile(
    r"""(?:^|(?<=[.!?\n]))\s*(?:please\s+)?
        (?P<verb>remember|save\s+this|note|keep\s+in\s+mind)
        (?P<link>\s+that\s+|\s*[:\u2013\u2014-]\s*|\s*,\s*|\s+)
        (?P<fact>[^\n]+?)
        # A request ends with its sentence: another request may follow on the same line.
        (?P<end>[.!?](?=\s|$)|\n|$)""",
    re.IGNORECASE | re.VERBOSE,
)
#: Without "that" or a colon, only a clause with a personal subject is a statement to remember:
#: "remember I prefer bun", "remember, we deploy from main"; not "remember to…", "remember any…".
_SUBJECT = re.compile(r"(?:i|i'm|i've|we|we're|we've|you|you're|they|they're|it's)\b", re.IGNORECASE)
#: What follows "remember that" when "that" points at a thing, not a statement ("remember that time…").
_NOT_A_CLAUSE = re.compile(r"(?:time|day|night|bug|one|thing|guy|movie|song|trip)\b", re.IGNORECASE)
#: A fact may not open like a question or an instruction to recall something.
_QUESTION_START = re.compile(r"(?:to|any|when|how|what|who|where|why|which|if|whether|me)\b", re.IGNORECASE)


#: Words that make an explicit memory a personal preference (user scope) rather than project knowledge.
_PREFERENCE = re.compile(r"\b(i|i'm|my|me)\b.*\b(prefer|like|want|hate|always|never)\b|\bprefer", re.IGNORECASE)
_CONFIG = re.compile(r"\b(run|command|script|config|env|environment|port|install|deploy)\b", re.IGNORECASE)
_TECH = re.compile(r"\b(use|uses|using|stack|library|framework|version|limit|database|api)\b", re.IGNORECASE)


def explicit_requests(text: str) -> list[str]:
    """The statements a message explicitly asks to remember, in order.

    Matched forms: "remember/note/keep in mind that <statement>", "remember/save this/note: <statement>",
    and "remember[,] <I/we/you/they…> <rest>". Questions ("remember when…?"), advice ("remember to…")
    and reminiscence ("remember any good memories…", "remember that time…") are not requests.
    """
    found = []
    for match in _REQUEST.finditer(text):
        fact = match.group("fact").strip().rstrip(".").strip()
        link = match.group("link").strip().lower()
        verb = " ".join(match.group("verb").lower().split())
        if not fact or match.group("end") == "?" or fact.endswith("?"):
            continue
        if verb == "note" and link != "that":
            continue  # "note: …" and "note to self" are remarks; "note that …" asks
        if link == "that":
            if _NOT_A_CLAUSE.match(fact):
                continue
        elif link in (":", "-", "\u2013", "\u2014"):
            pass
        elif verb == "remember" and _SUBJECT.match(fact):
            pass  # bare or comma form: only a clause with a personal subject
        else:
            continue
        if _QUESTION_START.match(fact):
            continue
        found.append(fact[0].upper() + fact[1:])
    return found


def guess_type(fact: str) -> tuple[str, str]:
    """(type, scope) for an explicit memory, from its wording; the LLM is not asked."""
    if _PREFERENCE.search(fact):
        return "preference", "user"
    if _CONFIG.search(fact):
        return "project-config", "project"
    if _TECH.search(fact):
        return "tech-context", "project"
    return "learned-pattern", "project"
