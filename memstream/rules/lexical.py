"""Pipeline v2's lexical contradiction detector: should a human look at this UPDATE/DELETE?

A cheap second opinion on a destructive proposal, no model involved. The fact and the
memory it targets must share a subject (at least two content words), and then disagree
on the surface: one is negated and the other is not, or one says one side of an antonym
pair (enabled/disabled) and the other says the other side. A hit flags the audit record
``review_needed``; it never decides the outcome. Both kinds of false positive are
expected: "not disabled" against "enabled" agree, yet are flagged twice.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

#: Pipeline v2: "lexical overlap of at least two tokens".
MIN_OVERLAP = 2

#: Polarity markers. Every "…n't" contraction counts too (see ``_is_negation``). "none" is
#: left out on purpose: in coding facts it is mostly Python's None ("returns None").
#: Antonyms such as "disabled" are kept apart: they belong to ``ANTONYM_PAIRS``.
NEGATIONS: Final[frozenset[str]] = frozenset(
    {
        "not", "no", "never", "nor", "neither", "nobody", "nothing", "cannot", "without",
        # contractions typed without their apostrophe
        "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "cant", "wont",
        "shouldnt", "wouldnt", "couldnt", "hasnt", "havent", "hadnt", "mustnt",
    }
)  # fmt: skip

#: Pairs whose sides contradict each other when one text says one and the other the other.
#: No negation appears here ("yes"/"no" is not a pair): polarity is ``NEGATIONS``' job.
ANTONYM_PAIRS: Final[tuple[tuple[str, str], ...]] = (
    ("enabled", "disabled"), ("enable", "disable"), ("enables", "disables"),
    ("allow", "deny"), ("allowed", "denied"), ("allows", "denies"),
    ("allow", "disallow"), ("allowed", "disallowed"),
    ("true", "false"), ("on", "off"),
    ("include", "exclude"), ("included", "excluded"), ("includes", "excludes"),
    ("accept", "reject"), ("accepted", "rejected"), ("accepts", "rejects"),
    ("add", "remove"), ("added", "removed"), ("adds", "removes"),
    ("start", "stop"), ("started", "stopped"), ("starts", "stops"),
    ("open", "close"), ("open", "closed"), ("opened", "closed"),
    ("sync", "async"), ("synchronous", "asynchronous"),
    ("public", "private"), ("required", "optional"), ("mandatory", "optional"),
    ("success", "failure"), ("succeeds", "fails"), ("succeeded", "failed"),
    ("pass", "fail"), ("passes", "fails"), ("passed", "failed"), ("passing", "failing"),
    ("valid", "invalid"), ("supported", "unsupported"), ("secure", "insecure"),
    ("mutable", "immutable"), ("visible", "hidden"), ("online", "offline"),
    ("installed", "uninstalled"), ("lock", "unlock"), ("locked", "unlocked"),
    ("increase", "decrease"), ("upgrade", "downgrade"),
)  # fmt: skip

#: Function words that say nothing about a fact's subject, so they never count towards
#: the overlap; neither do negations (they are polarity, not subject) nor 1-character
#: tokens. Without this, "The build is green" and "The cache is not used" would share a
#: subject through "the" and "is".
STOPWORDS: Final[frozenset[str]] = frozenset(
    {
        "a", "an", "the", "and", "or", "but", "if", "then", "than", "so", "as", "of", "in", "on", "at",
        "by", "for", "to", "from", "with", "into", "onto", "over", "under", "about", "after", "before",
        "between", "through", "during", "per", "via",
        "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "doing",
        "has", "have", "had", "having", "will", "would", "shall", "should", "can", "could", "may",
        "might", "must",
        "i", "me", "my", "we", "us", "our", "you", "your", "he", "him", "his", "she", "her", "it", "its",
        "they", "them", "their",
        "this", "that", "these", "those", "there", "here", "which", "who", "whom", "whose", "what",
        "when", "where", "why", "how",
        "all", "any", "both", "each", "every", "some", "such", "other", "more", "most", "only", "just",
        "also", "very", "too", "now", "still", "again", "once", "up", "out",
    }
)  # fmt: skip

# Alphanumeric runs (Unicode letters and digits), with an apostrophe inside a word kept so
# that "doesn't" stays one recognisable token.
_TOKEN = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


class LexicalCheck(msgspec.Struct, frozen=True):
    """The detector's verdict. ``reason`` is "" when nothing is flagged, else one or more
    of "negation polarity" and "antonyms a/b", joined by "; "."""

    review_needed: bool
    reason: str = ""
    #: The shared content words, in the order the fact uses them.
    overlap: list[str] = []


def tokenize(text: str) -> list[str]:
    """Lowercase alphanumeric runs, in order. A "…n't" contraction stays one token
    ("doesn't"); any other clitic is cut off ("user's" → "user", "we're" → "we")."""
    tokens: list[str] = []
    for token in _TOKEN.findall(text.lower().translate(_APOSTROPHES)):
        if "'" in token and not token.endswith("n't"):
            token = token.split("'", 1)[0]
        tokens.append(token)
    return tokens


def check(fact_text: str, target_text: str) -> LexicalCheck:
    """Does the fact lexically contradict the memory it targets?"""
    fact_tokens, target_tokens = tokenize(fact_text), tokenize(target_text)
    fact_set, target_set = set(fact_tokens), set(target_tokens)
    overlap = list(dict.fromkeys(t for t in fact_tokens if t in target_set and _is_content(t)))
    if len(overlap) < MIN_OVERLAP:
        return LexicalCheck(False, overlap=overlap)
    reasons: list[str] = []
    if _negated(fact_set) != _negated(target_set):
        reasons.append("negation polarity")
    reasons.extend(f"antonyms {a}/{b}" for a, b in ANTONYM_PAIRS if _opposed(fact_set, target_set, a, b))
    return LexicalCheck(bool(reasons), "; ".join(reasons), overlap)


def _is_negation(token: str) -> bool:
    return token in NEGATIONS or token.endswith("n't")


def _negated(tokens: set[str]) -> bool:
    return any(_is_negation(t) for t in tokens)


def _is_content(token: str) -> bool:
    return len(token) > 1 and token not in STOPWORDS and not _is_negation(token)


def _opposed(first: set[str], second: set[str], a: str, b: str) -> bool:
    """One text holds only side ``a`` and the other only side ``b``, either way round.

    A text that names both sides ("enable X, disable Y") takes no side of the pair.
    """
    first_side, second_side = first & {a, b}, second & {a, b}
    return len(first_side) == 1 and len(second_side) == 1 and first_side != second_side
