"""Citations at capture (issue 39): the files each exchange's tool calls and text name, from the four CLIs'
real session fixtures, resolved against a git work tree with its HEAD and a fingerprint of each region."""

from __future__ import annotations

import io
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from memstream.capture import adapters, citations
from memstream.capture.ingest import turn_payload
from memstream.capture.model import RawRecord, Source
from memstream.capture.reader import read_session
from memstream.capture.run import ingest
from memstream.capture.spool import make_turns
from memstream.capture.state import CaptureState
from memstream.identity import turn_hash
from memstream.recall import git
from memstream.schemas import Citation, Memory, Provenance
from memstream.schemas.codec import decode, encode
from memstream.settings import Settings

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "capture" / "real"


def payloads_of(source: Source, path: Path, project: str = "") -> list[dict]:
    read = read_session(path, final=True)
    records = list(read.records)
    parsed = adapters.parse(source, str(path), records, mtime=datetime.now(UTC), projects={})
    out = []
    for turn in parsed.turns:
        payload = turn_payload(turn, turn_hash(turn.content), datetime.now(UTC))
        payload["project"] = turn.project or project
        out.append(payload)
    citations.annotate(out, records)
    return out


def cited_paths(payloads: list[dict]) -> set[str]:
    return {c["path"] for p in payloads for c in p["provenance"].get("citations", [])}


def test_claude_read_and_edit_calls_are_cited_with_read_ranges() -> None:
    payloads = payloads_of(Source.CLAUDE, REAL / "claude" / "kimi-cli-2e672ecd6a-2.jsonl")
    root = "/Users/moonshot/dev/working/kimi/kimi-cli/src/kimi_cli"
    assert {f"{root}/tools/__init__.py", f"{root}/ui/shell/visualize.py"} <= cited_paths(payloads)
    ranges = {
        (c["start"], c.get("end")) for p in payloads for c in p["provenance"].get("citations", []) if "start" in c
    }
    assert (100, 269) in ranges  # Read offset 100, limit 170
    assert (1, 80) in ranges  # Read limit 80


def test_codex_apply_patch_files_are_cited_relative_to_the_project() -> None:
    path = next((REAL / "codex").glob("rollout-2026-05-11T11-26-55-*.jsonl"))
    payloads = payloads_of(Source.CODEX, path)
    project = "/Users/Sample_User/repos/codemie-ai/codemie-code"
    assert f"{project}/src/agents/plugins/codemie-code.plugin.ts" in cited_paths(payloads)
    # A skill file the shell read lives outside the project: not a citation of it.
    assert not any("/.codex/" in p for p in cited_paths(payloads))


def test_gemini_file_tool_calls_are_cited() -> None:
    payloads = payloads_of(
        Source.GEMINI,
        REAL / "gemini" / "session-2025-12-01T21-45-5b959dae.json",
        "/Users/Jane_Smith/Documents/projects/epm-cdme",
    )
    assert "/Users/Jane_Smith/Documents/projects/epm-cdme/assistants/lead_gemini.txt" in cited_paths(payloads)


def test_kimi_tool_calls_are_cited() -> None:
    session = next((REAL / "kimi" / "sessions").glob("*/d8447fa8-*.jsonl"))
    payloads = payloads_of(Source.KIMI, session, "/testbed")
    assert "/testbed/sklearn/compose/_column_transformer.py" in cited_paths(payloads)
    wire = payloads_of(
        Source.KIMI, REAL / "kimi" / "kimi-code-assistant_tools-wire.jsonl", "/private/tmp/as-agent-lab/kimi/project"
    )
    assert "/private/tmp/as-agent-lab/kimi/project/.gitignore" in cited_paths(wire)


def test_shell_commands_cite_sed_ranges_and_text_paths_only_when_the_file_exists(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("".join(f"line {n}\n" for n in range(1, 30)))
    found = citations._from_shell(1, "sed -n '3,9p' pkg/mod.py && cat missing.py", "")
    resolved = citations.citations(found, str(tmp_path), None)
    assert [(c.path, c.start, c.end) for c in resolved] == [(str(tmp_path / "pkg" / "mod.py"), 3, 9)]
    text = citations.cited_in_text(1, "The parser lives in `pkg/mod.py:4-6`; see also docs/nowhere.md and e.g.")
    assert [(c.path, c.start, c.end) for c in citations.citations(text, str(tmp_path), None)] == [
        (str(tmp_path / "pkg" / "mod.py"), 4, 6)
    ]


def make_repo(root: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    for key, value in (("user.email", "t@example.com"), ("user.name", "t"), ("commit.gpgsign", "false")):
        subprocess.run(["git", "-C", str(root), "config", key, value], check=True)


def commit_all(root: Path, message: str) -> str:
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-m", message], check=True)
    return subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()


def claude_line(kind: str, uuid: str, second: int, content: object, cwd: Path) -> dict:
    message = {"role": kind, "content": content}
    if kind == "assistant":
        message |= {"id": f"m{uuid}", "model": "x"}
    ts = f"2026-01-01T00:00:0{second}Z"
    return {"type": kind, "uuid": uuid, "sessionId": "s1", "cwd": str(cwd), "timestamp": ts, "message": message}


def test_an_ingested_claude_session_carries_its_repositorys_head_and_region_fingerprints(tmp_path: Path) -> None:
    repo = tmp_path / "proj"
    (repo / "api").mkdir(parents=True)
    (repo / "api" / "auth.py").write_text("".join(f"def f{n}():\n    return {n}\n" for n in range(20)))
    make_repo(repo)
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", "git@example.com:me/proj.git"], check=True)
    head = commit_all(repo, "first")
    sessions = tmp_path / "projects" / "x"
    sessions.mkdir(parents=True)
    read = {
        "type": "tool_use",
        "id": "t1",
        "name": "Read",
        "input": {"file_path": str(repo / "api" / "auth.py"), "offset": 3, "limit": 4},
    }
    said = {"type": "text", "text": "It is f1 in api/auth.py."}
    lines = [
        claude_line("user", "u1", 0, "where is login?", repo),
        claude_line("assistant", "a1", 1, [read], repo),
        claude_line("assistant", "a2", 2, [said], repo),
        claude_line("user", "u2", 3, "thanks", repo),
    ]  # fmt: skip
    session = sessions / "s1.jsonl"
    session.write_text("".join(json.dumps(line) + "\n" for line in lines))
    settings = Settings.from_env({}, data_dir=tmp_path / "data")
    ingest(settings, [session], out=io.StringIO(), err=io.StringIO())
    with CaptureState.open(settings.capture_db) as state:
        payloads = [s.payload for s in state.spooled(100)]
    turns = make_turns(payloads, "me")
    cited = [c for t in turns if t.provenance for c in t.provenance.citations]
    assert {(c.path, c.start, c.end) for c in cited} == {("api/auth.py", 3, 6), ("api/auth.py", 0, 0)}
    ranged = next(c for c in cited if c.start == 3)
    assert (ranged.repo, ranged.commit, ranged.dirty, ranged.remote) == (
        str(repo),
        head,
        False,
        "git@example.com:me/proj.git",
    )
    text = (repo / "api" / "auth.py").read_text().splitlines()
    assert ranged.fingerprint == git.fingerprint(text[2:6])
    # The turn event round-trips with its citations.
    assert decode(encode(turns[0])) == turns[0]


def test_old_provenance_and_memory_bytes_decode_without_citations() -> None:
    old = b'{"source_type":"claude","session_id":"s","file":"/f.jsonl","line":3}'
    assert msgspec.json.decode(old, type=Provenance).citations == []
    new = Provenance(
        source_type="claude", citations=[Citation(path="a.py", repo="/r", commit="c" * 40, start=1, end=2)]
    )
    assert msgspec.json.decode(msgspec.json.encode(new), type=Provenance) == new


def test_raw_records_without_json_are_skipped() -> None:
    assert citations.cited_in_records([RawRecord(1, 1, "not json"), RawRecord(2, 2, "[1, 2]")]) == []


def test_a_memory_keeps_its_sources_citations() -> None:
    from memstream.recall.staleness import citations_of

    now = datetime.now(UTC)
    cite = Citation(path="a.py", repo="/r")
    sources = [Provenance(source_type="claude", line=n, citations=[cite]) for n in (1, 2)]
    memory = Memory(
        id="m", text="t", type="conversation", scope="project", scope_key="p", created_at=now, updated_at=now,
        content_hash="h", embedding_model="e", sources=sources,
    )  # fmt: skip
    assert citations_of(memory) == [cite]
    assert msgspec.json.decode(msgspec.json.encode(memory), type=Memory) == memory
