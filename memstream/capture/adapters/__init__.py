"""One adapter per coding CLI: a pure function from a session file's records to its human-visible turns.

Every adapter has the signature of :class:`Adapter`. ``projects`` is the CLI's own project map (the
identifier a CLI files sessions under -> the project directory) for formats whose records do not carry
the working directory (Gemini CLI, Kimi); the other adapters ignore it. Each module's docstring names the
source it was written from and how each case of the format is handled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol

from memstream.capture.adapters import claude, codex, gemini, kimi
from memstream.capture.model import Parsed, RawRecord, Source


class Adapter(Protocol):
    def __call__(
        self,
        path: str,
        records: Iterable[RawRecord],
        *,
        mtime: datetime,
        projects: Mapping[str, str] | None = None,
    ) -> Parsed: ...


ADAPTERS: dict[Source, Adapter] = {
    Source.CLAUDE: claude.parse,
    Source.CODEX: codex.parse,
    Source.GEMINI: gemini.parse,
    Source.KIMI: kimi.parse,
}


def parse(
    source: Source,
    path: str,
    records: Iterable[RawRecord],
    *,
    mtime: datetime,
    projects: Mapping[str, str] | None = None,
) -> Parsed:
    """The turns of ``path`` read with ``source``'s adapter."""
    return ADAPTERS[source](path, records, mtime=mtime, projects=projects)
