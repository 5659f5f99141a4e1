"""Where the injected-context settings live: one file in the server's data directory.

``memstream.schemas.injected.ContextSettings`` per project, read by every ``/block`` (SessionStart's
source) and by the console's block page, written by the console. A file rather than a topic: the
embedded broker keeps its topics in memory only, and settings must outlive a restart like the token
file does. Reads are cached by the file's modification time and size, so a ``/block`` costs one
``stat``; a write replaces the file atomically.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import msgspec

from memstream.schemas.injected import ContextSettings, defaults

#: The file's name in the data directory.
FILE_NAME = "context-settings.json"
_DECODER = msgspec.json.Decoder(dict[str, ContextSettings])
_ENCODER = msgspec.json.Encoder()


class SettingsFile:
    """The settings of every configured project, by project key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: tuple[float, int, dict[str, ContextSettings]] | None = None
        self._lock = threading.Lock()

    def all(self) -> dict[str, ContextSettings]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return {}
        held = self._cache
        if held is not None and held[:2] == (stat.st_mtime, stat.st_size):
            return held[2]
        found = _DECODER.decode(self.path.read_bytes())
        self._cache = (stat.st_mtime, stat.st_size, found)
        return found

    def of(self, project_key: str) -> ContextSettings:
        """The project's settings; the defaults (today's block) when it has none."""
        return self.all().get(project_key) or defaults(project_key)

    def save(self, chosen: ContextSettings) -> None:
        with self._lock:
            every = {**self.all(), chosen.scope_key: chosen}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            partial.write_bytes(_ENCODER.encode(every))
            os.replace(partial, self.path)
            self._cache = None


_files: dict[Path, SettingsFile] = {}


def settings_file(data_dir: Path) -> SettingsFile:
    """The one reader of ``data_dir``'s settings per process."""
    path = Path(data_dir) / FILE_NAME
    found = _files.get(path)
    if found is None:
        found = _files[path] = SettingsFile(path)
    return found


def project_of(keys: Sequence[str]) -> str:
    """The project among a block's scope keys ("" for a block of the user scope only)."""
    return next((key for key in keys if key.startswith("p_")), "")


def for_keys(data_dir: Path, keys: Sequence[str]) -> ContextSettings | None:
    """The settings a block over ``keys`` follows (None: no project among them)."""
    project = project_of(keys)
    return settings_file(data_dir).of(project) if project else None


def trail_id(project_key: str) -> str:
    """The ``memory_id`` of the settings' audit records: their trail is ``history.for_memory`` of it."""
    return f"context-settings:{project_key}"


def describe(chosen: ContextSettings) -> str:
    """The settings in words, as the audit record keeps them."""
    parts = ["on" if chosen.enabled else "off"]
    if chosen.hidden_sections:
        parts.append("sections left out: " + ", ".join(chosen.hidden_sections))
    if chosen.hidden_types:
        parts.append("types left out: " + ", ".join(chosen.hidden_types))
    parts.append(f"budget {chosen.max_tokens} tokens" if chosen.max_tokens else "the session's budget")
    said = "; ".join(parts)
    return f"{said}: {chosen.reason}" if chosen.reason else said
