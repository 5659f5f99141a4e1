"""A test-only session format for the capture machinery: one JSON message a line, with a header line.

It stands in for the CLIs' adapters (another part of the code base) so the machinery (checkpoints,
dedup, spool, dry run, hooks) is tested on its own. Line 1 is ``{"session": ID, "cwd": DIR}``; every
other line is ``{"role": …, "text": …, "ts": …}`` and belongs to that session, as in Codex's rollouts
whose first line alone names the session and project.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memstream.capture.model import CapturedTurn, Parsed, Problem, RawRecord, Source

T0 = datetime(2026, 2, 3, 12, 0, tzinfo=UTC)


@dataclass
class FakeRead:
    records: list[RawRecord] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    offset: int = 0
    line: int = 1


class FakeFormats:
    """Files named ``*.fake.jsonl`` (or marked by a ``"fake"`` header) are sessions of ``source``."""

    def __init__(self, source: Source = Source.CLAUDE):
        self.source = source
        self.reads: list[tuple[Path, int]] = []

    def discover(self, paths: Sequence[Path], roots: Mapping[Source, list[Path]]) -> list[tuple[Path, Source]]:
        found: list[tuple[Path, Source]] = []
        for base in [*paths, *(r for rs in roots.values() for r in rs)]:
            candidates = [base] if base.is_file() else sorted(base.rglob("*.jsonl")) if base.is_dir() else []
            found.extend((p, self.source) for p in candidates if self.detect(p))
        return found

    def detect(self, path: Path) -> Source | None:
        with path.open("rb") as handle:
            return self.source if b'"session"' in handle.readline() else None

    def read(self, path: Path, *, offset: int, line: int, final: bool) -> FakeRead:
        self.reads.append((path, offset))
        data = path.read_bytes()[offset:]
        result = FakeRead(offset=offset, line=line)
        position = 0
        while (newline := data.find(b"\n", position)) != -1:
            chunk = data[position:newline]
            result.offset += newline + 1 - position
            try:
                text = chunk.decode()
                if text.strip():
                    json.loads(text)
                    result.records.append(RawRecord(line=result.line, offset=result.offset, text=text))
            except (UnicodeDecodeError, ValueError):
                result.problems.append(Problem(str(path), result.line, "invalid JSON"))
            result.line += 1
            position = newline + 1
        return result

    def parse(
        self, source: Source, path: Path, records: list[RawRecord], *, mtime: datetime, final: bool = True
    ) -> Parsed:
        parsed = Parsed()
        session, cwd = "", ""
        for record in records:
            data = json.loads(record.text)
            if "session" in data:
                session, cwd = data["session"], data.get("cwd", "")
                continue
            parsed.turns.append(
                CapturedTurn(
                    source=source,
                    session_id=session,
                    role=data["role"],
                    content=data["text"],
                    ts=datetime.fromisoformat(data["ts"]) if "ts" in data else mtime,
                    file=str(path),
                    line=record.line,
                    project=cwd,
                    model=data.get("model", ""),
                )
            )
        return parsed


def header(session: str, cwd: str = "/work/shop") -> str:
    return json.dumps({"session": session, "cwd": cwd}) + "\n"


def message(i: int, role: str = "", text: str = "") -> str:
    role = role or ("user" if i % 2 == 0 else "assistant")
    ts = (T0 + timedelta(seconds=i)).isoformat()
    return json.dumps({"role": role, "text": text or f"message {i} of the session", "ts": ts}) + "\n"


def session_file(path: Path, session: str, count: int, *, cwd: str = "/work/shop") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header(session, cwd) + "".join(message(i) for i in range(count)))
    return path
