"""What ``memstream install`` did on this machine, so that ``uninstall`` can undo exactly that.

One small JSON file in the user's state folder (``$XDG_STATE_HOME/memstream/install.json``, by default
``~/.local/state/memstream/install.json``): the settings files and folders install created (uninstall
deletes them once they hold nothing again; a file the user had, even an empty one, is never deleted), and
the data dir of each host's install. A hook or MCP command written into a file a team commits has no
machine path in it (``memstream hook gemini``), and finds the data dir here. It imports only the stdlib:
every such hook reads it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def record_path(home: Path | None = None) -> Path:
    """Where the record is: ``$XDG_STATE_HOME/memstream/install.json``, else under ``home/.local/state``."""
    state = os.environ.get("XDG_STATE_HOME")
    base = Path(state) if state else (home or Path.home()) / ".local" / "state"
    return base / "memstream" / "install.json"


@dataclass
class InstallRecord:
    """The record's content: created paths, and the data dir per host."""

    path: Path
    created: set[str] = field(default_factory=set)
    data_dirs: dict[str, str] = field(default_factory=dict)
    #: Folders created to hold the record itself.
    own_dirs: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, path: Path) -> InstallRecord:
        try:
            data: Any = json.loads(path.read_text())
        except (FileNotFoundError, NotADirectoryError, ValueError):
            return cls(path)
        if not isinstance(data, dict):
            return cls(path)
        created = data.get("created") or []
        dirs = data.get("data_dirs") or {}
        own = data.get("own_dirs") or []
        return cls(
            path,
            {str(p) for p in created} if isinstance(created, list) else set(),
            {str(k): str(v) for k, v in dirs.items()} if isinstance(dirs, dict) else {},
            {str(p) for p in own} if isinstance(own, list) else set(),
        )

    def save(self) -> None:
        """Write the record; once it records nothing, delete it and the folders it was the reason for."""
        if not self.created and not self.data_dirs:
            self.path.unlink(missing_ok=True)
            folder = self.path.parent
            while str(folder) in self.own_dirs:
                try:
                    folder.rmdir()
                except OSError:  # something else lives there now: it stays
                    break
                folder = folder.parent
            return
        for folder in reversed([self.path.parent, *self.path.parent.parents]):
            if not folder.exists():
                folder.mkdir()
                self.own_dirs.add(str(folder))
        data = {
            "created": sorted(self.created),
            "data_dirs": dict(sorted(self.data_dirs.items())),
            "own_dirs": sorted(self.own_dirs),
        }
        tmp = self.path.with_name(self.path.name + ".partial")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, self.path)


def installed_data_dir(host: str, home: Path | None = None) -> Path | None:
    """The data dir ``memstream install HOST`` chose on this machine, if it ran."""
    record = InstallRecord.load(record_path(home))
    chosen = record.data_dirs.get(host)
    return Path(chosen) if chosen else None
