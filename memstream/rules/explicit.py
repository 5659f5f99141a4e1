"""Explicit memories (the memory spec): "Remember that…", "Save this:…", "Note that…" become memories
directly, whatever the extraction model makes of the turn."""

from __future__ import annotations

import re

_REQUEST = re.compile(
    r"""(?:^|(?<=[.!?:\n]))\s*
        # A discourse marker may open the sentence: "Also, remember that…", "btw remember that…".
        (?:(?:also|and|oh|so|ok|okay|btw|by\s+the\s+way|one\s+more\s+thing|p\.?s\.?)\b[,:]?\s+)*
        (?:please\s+)?
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
#: A tag question at the end asks for agreement, not whether to remember: "…only from main, ok?".
_TAG_QUESTION = re.compile(r",\s*(?:ok|okay|alright|right|yeah|yes|got\s+it|please|thanks)\s*$", re.IGNORECASE)
#: A fact may not open like a question or an instruction to recall something.
_QUESTION_START = re.compile(r"(?:to|any|when|how|what|who|where|why|which|if|whether|me)\b", re.IGNORECASE)


#: Words that make an explicit memory a personal preference (user scope) rather than project knowledge.
_PREFERENCE = re.compile(r"\b(i|i'm|my|me)\b.*\b(prefer|like|want|hate|always|never)\b|\bprefer", re.IGNORECASE)
_CONFIG = re.compile(r"\b(run|command|script|config|env|environment|port|install|deploy)\b", re.IGNORECASE)


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
        asked = match.group("end") == "?" or fact.endswith("?")
        if asked and _TAG_QUESTION.search(fact.rstrip("?")):
            fact, asked = _TAG_QUESTION.sub("", fact.rstrip("?")).strip(), False
        if not fact or asked:
            continue
        if verb == "note" and link != "that":
            continue  # "note: …" and "note to self" are remarks; "note that …" asks
        if link == "that":
            if _NOT_A_CLAUSE.match(fact) or len(fact.split()) < 2:
                continue  # "remember that time…", "remember that later": not a statement
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


def states_preference(text: str) -> bool:
    """Does this text state a personal preference ("I prefer…", "my…always")?"""
    return bool(_PREFERENCE.search(text))


def guess_type(fact: str) -> tuple[str, str]:
    """(type, scope) for an explicit memory, from its wording; the LLM is not asked.

    What names no preference, config or tech word is still a project rule the user asked to keep ("Deploys
    go through make ship"): tech-context (the memory spec's "constraints"), so the next session's [MEMORY]
    block shows it. learned-pattern, the memory spec's type for patterns condensed from past sessions, has no
    block section: explicit facts typed so reached the block only when a query matched them (issue 37.5)."""
    if states_preference(fact):
        return "preference", "user"
    if _CONFIG.search(fact):
        return "project-config", "project"
    return "tech-context", "project"


# --- standing preferences (raw mode, issue 25.4) ---------------------------------------------------

#: Verbs of a standing instruction ("always use…", "never push…"); "always the same…", "I always wanted…"
#: and the like are chat, not instructions.
_INSTRUCTION_VERBS = (
    r"use|run|write|prefer|format|add|put|call|name|keep|avoid|commit|push|include|answer|reply|respond|ask"
    r"|indent|test|make|document|comment|sign|pin|deploy|install|check|create|wrap|return|log|import|sort"
    r"|squash|rebase|merge|lint|type|annotate|explain|show|give|cite|mention|quote|read|review|update|bump"
    r"|lock|target|choose|pick|stick|work|start|open|close|prefix|reuse|split|rename|delete|remove|leave"
)
_PREFERENCE_PATTERNS = (
    # "I prefer…", "I always prefer…", "I'd rather…"
    re.compile(r"^I\s+(?:(?:always|usually|generally|really|strongly|do)\s+)?prefer\b", re.IGNORECASE),
    re.compile(r"^I'd\s+rather\b", re.IGNORECASE),
    # "My preference is…", "my preferred editor is…"
    re.compile(r"^my\s+(?:preference|preferred)\b", re.IGNORECASE),
    # "always use…", "never push…", "I always use…"
    re.compile(rf"^(?:I\s+)?(?:always|never)\s+(?:{_INSTRUCTION_VERBS})\b", re.IGNORECASE),
)
#: "remember that I…", "keep in mind that I…", "note that my…": an explicit first-person statement.
_REMEMBER_ME = re.compile(
    r"^(?:please\s+)?(?:remember|keep\s+in\s+mind|note)(?:\s+that)?\s*[:,]?\s+(?P<clause>(?:I|I'm|I've|I'd|my)\b.*)",
    re.IGNORECASE,
)
#: Words that open a sentence without changing what it states ("By the way, I prefer…").
_FILLER = re.compile(
    r"^(?:(?:by\s+the\s+way|btw|also|and|but|oh|ok|okay|so|fyi|anyway|please)\b[,:]?\s+)+", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def standing_preferences(text: str) -> list[str]:
    """The explicit, first-person, standing preferences a user's message states, in order, each once.

    Found: "I prefer…", "I'd rather…", "my preference is…", "always/never <do something>…" (an
    instruction), and "remember/keep in mind/note that I…". Not found: questions, and everyday talk
    that merely mentions liking or wanting ("I love it", "My dream is…", "I always wanted…"). A
    sentence is returned as stated, without a leading "please" or "remember that", capitalized.
    """
    found: list[str] = []
    seen: set[str] = set()
    for raw in _SENTENCE_END.split(text):
        sentence = raw.strip()
        if not sentence or sentence.endswith("?"):
            continue
        sentence = _FILLER.sub("", sentence).strip()
        request = _REMEMBER_ME.match(sentence)
        if request:
            statement = request.group("clause")
        elif any(p.match(sentence) for p in _PREFERENCE_PATTERNS):
            statement = sentence
        else:
            continue
        statement = statement.strip().rstrip(".!").strip()
        if not statement:
            continue
        statement = statement[0].upper() + statement[1:]
        if statement.lower() not in seen:
            seen.add(statement.lower())
            found.append(statement)
    return found
