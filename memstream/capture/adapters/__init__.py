"""One adapter per coding CLI: a pure function from a session file's records to its human-visible turns.

Every adapter has the signature of :class:`Adapter`. ``projects`` is the CLI's own project map (the
identifier a CLI files sessions under -> the project directory) for formats whose records do not carry
the working directory (Gemini CLI, Kimi); the other adapters ignore it. ``final=False`` tells an adapter
that the CLI may still be writing the file: one whose messages are streamed over many records (Kimi) then
holds back a message the records do not finish and says where to resume (``Parsed.resume_offset``);
the default ``True`` emits everything read. Each module's docstring names the source it was written from
and how each case of the format is handled.

:func:`parse` is the registry's entry point. When it is given no ``projects``, it finds the CLI's home
from the session file's own path (``~/.gemini`` above ``tmp/``, ``~/.kimi`` or ``~/.kimi-code`` above
``sessions/``), else takes the ``home`` it is given (the configured ``--gemini-dir``/``--kimi-dir``: an
export or a copy from another machine read with this machine's map), and loads that CLI's map
(:func:`cli_projects`), so a caller that knows nothing of project maps still gets projects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import lru_cache
from pathlib import Path
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
        final: bool = True,
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
    final: bool = True,
    home: Path | None = None,
) -> Parsed:
    """The turns of ``path`` read with ``source``'s adapter (``projects`` defaults to :func:`cli_projects`)."""
    if projects is None:
        projects = cli_projects(source, Path(path), home=home)
    return ADAPTERS[source](path, records, mtime=mtime, projects=projects, final=final)


def cli_projects(source: Source, session_file: Path, *, home: Path | None = None) -> Mapping[str, str]:
    """The project map of the CLI home ``session_file`` lives in, else of ``home``; {} for other CLIs.

    A file inside a CLI's own folders uses that CLI home's map; a file anywhere else (an export, a copy
    from another machine) uses the configured ``home``'s, when one is given.
    """
    if source is Source.GEMINI:
        home = _home_above(session_file, "tmp", GEMINI_DEPTHS) or home
        markers = ("projects.json", "trustedFolders.json")
    elif source is Source.KIMI:
        home = _home_above(session_file, "sessions", KIMI_DEPTHS) or home
        markers = ("kimi.json", "workspaces.json")
    else:
        return {}
    if home is None:
        return {}
    folders = _stamp(home / "tmp") if source is Source.GEMINI else 0  # new .project_root markers
    return _load(source, str(home), (*(_stamp(home / marker) for marker in markers), folders))


#: How many folders below ``tmp`` a Gemini CLI file lives: ``<project>/checkpoint-*.json``,
#: ``<project>/chats/session-*``, a sub-agent's ``<project>/chats/<parent session>/…``.
GEMINI_DEPTHS = (1, 2, 3)
#: How many folders below ``sessions`` a Kimi file lives: ``<md5>/<uuid>.jsonl`` (before the wire log),
#: ``<md5>/<session>/wire.jsonl``, and Kimi Code's ``<workspace>/<session>/agents/<agent>/wire.jsonl``.
KIMI_DEPTHS = (1, 2, 4)


def _home_above(session_file: Path, folder: str, depths: tuple[int, ...]) -> Path | None:
    # Only the CLI's own layout counts: a "tmp" or "sessions" folder higher up is someone else's.
    parents = session_file.parents
    for depth in depths:
        if depth + 1 < len(parents) and parents[depth].name == folder:
            return parents[depth + 1]
    return None


def _stamp(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


@lru_cache(maxsize=32)
def _load(source: Source, home: str, stamp: tuple[int, ...]) -> Mapping[str, str]:
    # Keyed by the map's modification time, so an ingest run loads each map once and sees later changes.
    del stamp
    if source is Source.GEMINI:
        return gemini.load_projects(Path(home))
    return kimi.load_projects(Path(home))
