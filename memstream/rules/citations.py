"""Which of its exchange's citations an extracted fact keeps (issue 39), as a pure rule.

A raw exchange's memory is the exchange itself: it keeps every file its tool calls and text cited. A
fact drawn from it by a model speaks of less: it keeps only the files it names (by path, or by file
name), checked against the files the session touched, so a fact cites no file the session never saw
and "we use pytest" does not go stale when an unrelated file the same exchange edited changes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePosixPath

import msgspec

from memstream.schemas.memory import Citation, Provenance


def named_in(text: str, citation: Citation) -> bool:
    """Whether ``text`` names the cited file: its path relative to the repository, or its file name
    as a whole word (``auth.py`` in "see auth.py", not in "oauth.pyc")."""
    path = citation.path
    if path in text:
        return True
    name = PurePosixPath(path).name
    return bool(name) and re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", text) is not None


def fact_sources(sources: Sequence[Provenance], text: str, *, raw: bool) -> list[Provenance]:
    """The fact's sources: the snapshot's, each keeping only the citations ``text`` names (all when ``raw``)."""
    if raw:
        return list(sources)
    return [
        msgspec.structs.replace(source, citations=[c for c in source.citations if named_in(text, c)])
        if source.citations
        else source
        for source in sources
    ]
