"""Live capture, replayed: real recorded sessions written the way their CLI writes them, the installed hook
fired after each write as the CLI fires it, and the memories read back and scored (issue 37).

Whole-file capture (``memstream ingest``) reads a finished file once; users' turns arrive live instead, a
few lines at a time, each followed by a hook. This module replays every labelled file of
``tests/fixtures/capture/real`` that way:

- **Written as the CLI writes it.** A JSONL file (Claude Code, Codex, Kimi) grows in ``CHUNKS`` steps at
  line boundaries, in the place the CLI keeps it under a home folder (``.claude/projects/<dashed launch
  folder>/<session>.jsonl``, ``.codex/sessions/YYYY/MM/DD/rollout-….jsonl``, ``.kimi/sessions/<md5 of the
  work dir>/…``, ``.kimi-code/sessions/<workspace>/<session>/agents/main/wire.jsonl``); Gemini CLI's single
  JSON chat (``.gemini/tmp/<projectHash>/chats/session-….json``) is rewritten whole with more messages.
- **The hook fired as the CLI fires it.** After each step the host's capture event (Claude Code and Kimi
  ``Stop``, Codex ``Stop``, Gemini ``AfterAgent``) with the payload that CLI sends (its fields, the
  session's current ``cwd``), and the host's ``SessionEnd`` after the last one where it has one. Codex has
  none: its last reply is taken once the file is quiet, as ``memstream up`` does.
- **Scored on memories.** Per CLI: the exchanges (a question, user messages sent back to back, and
  everything said until the next one) whose question and final answer are both in one memory of the
  session's right project; memories of a replayed session filed under another project; and orphan
  replies, memories holding an answer without any question.

Two runners share it. ``python -m bench.perf.capture --live`` installs the hooks with ``memstream install``,
runs the commands it wrote with ``sh -c`` against a real ``memstream up`` and reads the memories back from
its API. The test suite's smaller form (:func:`replay_in_process`) hands each payload to
:func:`memstream.capture.hook.capture`, the code ``up`` runs on a hook's note, and turns what reached the
spool into memories by the pipeline's own raw-mode rules (:func:`raw_mode_memories`).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "capture" / "real"
LABELS_SUFFIX = ".labels.json"
#: Steps a JSONL file grows in (fewer if it has fewer lines): the issue's replay.
CHUNKS = 20
#: Score below which a CLI fails the benchmark.
TARGET = 0.97
#: The host ``memstream install``/``hook`` names for each fixture folder (a CLI's session format).
HOST_OF = {"claude": "claude-code", "codex": "codex", "gemini": "gemini", "kimi": "kimi"}
#: Characters of a long message's head and tail that must be in the memory: a message over the memory's
#: limit keeps both ends (its middle is what is cut), so a match on them is a match on the message.
ENDS = 100
_DASHED = re.compile(r"[^A-Za-z0-9]")


def norm(text: str) -> str:
    """Whitespace collapsed: how texts are compared."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Exchange:
    """A question (user messages sent back to back) and the last thing said before the next one."""

    questions: tuple[str, ...]
    answer: str = ""

    def brief(self) -> str:
        return norm(self.questions[0])[:70]


@dataclass(frozen=True)
class Recorded:
    """One labelled real session file: its CLI, its project and its exchanges (from the hand-made labels)."""

    cli: str
    path: Path
    project: str
    exchanges: tuple[Exchange, ...]

    @property
    def host(self) -> str:
        return HOST_OF[self.cli]

    @property
    def name(self) -> str:
        return self.path.name


def exchanges_of(turns: Iterable[Mapping[str, Any]]) -> tuple[Exchange, ...]:
    """Labelled turns, in order, as exchanges; a session's repeated message counts once (first seen wins)."""
    exchanges: list[Exchange] = []
    questions: list[str] = []
    answer = ""
    seen: set[tuple[str, str]] = set()
    for turn in turns:
        role, text = str(turn["role"]), str(turn["text"])
        if (role, norm(text)) in seen:
            continue
        seen.add((role, norm(text)))
        if role == "user":
            if answer:
                exchanges.append(Exchange(tuple(questions), answer))
                questions, answer = [], ""
            questions.append(text)
        elif questions:
            answer = text
        # An answer before any question (a session resumed mid-exchange) has no question to pair with.
    if questions:
        exchanges.append(Exchange(tuple(questions), answer))
    return tuple(exchanges)


def recorded_sessions(root: Path = REAL, *, only: Iterable[str] = ()) -> list[Recorded]:
    """Every labelled real session file (or those whose name contains one of ``only``), in a stable order."""
    wanted = list(only)
    found = []
    for labels in sorted(root.rglob(f"*{LABELS_SUFFIX}")):
        data = json.loads(labels.read_text(encoding="utf-8"))
        path = labels.parent / str(data["file"]).split("/")[-1]
        if wanted and not any(part in path.name for part in wanted):
            continue
        cli = path.relative_to(root).parts[0]
        found.append(Recorded(cli, path, str(data["project"]), exchanges_of(data["turns"])))
    return found


# --- writing a session as its CLI does ---------------------------------------------------------------


@dataclass
class Replayed:
    """A recorded session as it is replayed: where its CLI keeps it, and its content after each step."""

    recorded: Recorded
    path: Path
    session_id: str
    steps: list[bytes]
    #: The session's current working directory after each step (Claude Code's lines record a ``cd``).
    cwds: list[str]


def _line_steps(data: bytes, chunks: int) -> list[int]:
    """Byte offsets, at line ends, where the file stops after each of (at most) ``chunks`` steps."""
    ends = [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    if not ends or ends[-1] != len(data):
        ends.append(len(data))
    count = min(chunks, len(ends))
    return sorted({ends[round(len(ends) * (i + 1) / count) - 1] for i in range(count)})


def _records(data: bytes) -> list[dict[str, Any]]:
    records = []
    for line in data.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def replayed(recorded: Recorded, home: Path, *, chunks: int = CHUNKS) -> Replayed:
    """Where ``recorded``'s CLI would keep it under ``home``, and what the file holds after each step."""
    data = recorded.path.read_bytes()
    if recorded.cli == "gemini":
        return _gemini(recorded, home, data, chunks)
    ends = _line_steps(data, chunks)
    steps = [data[:end] for end in ends]
    records = _records(data)
    if recorded.cli == "claude":
        session = next((str(r["sessionId"]) for r in records if r.get("sessionId")), recorded.path.stem)
        path = home / ".claude" / "projects" / _DASHED.sub("-", recorded.project) / f"{session}.jsonl"
        cwds = []
        for step in steps:
            recorded_cwds = [str(r["cwd"]) for r in _records(step) if r.get("cwd")]
            cwds.append(recorded_cwds[-1] if recorded_cwds else recorded.project)
        return Replayed(recorded, path, session, steps, cwds)
    if recorded.cli == "codex":
        meta = next(r["payload"] for r in records if r.get("type") == "session_meta")
        stamp = re.search(r"rollout-(\d{4})-(\d{2})-(\d{2})T", recorded.path.name)
        assert stamp is not None, recorded.path
        path = home / ".codex" / "sessions" / stamp[1] / stamp[2] / stamp[3] / recorded.path.name
        return Replayed(recorded, path, str(meta["id"]), steps, [str(meta.get("cwd") or recorded.project)] * len(steps))
    # Kimi: the context log before the wire (sessions/<md5 of the work dir>/<session>.jsonl), or Kimi Code's wire.
    folder = hashlib.md5(recorded.project.encode(), usedforsecurity=False).hexdigest()
    if recorded.path.parent.parent.name == "sessions":
        session = recorded.path.stem
        path = home / ".kimi" / "sessions" / folder / recorded.path.name
    else:
        session = f"session_{hashlib.sha256(recorded.path.name.encode()).hexdigest()[:12]}"
        path = home / ".kimi-code" / "sessions" / f"wd_{folder[:12]}" / session / "agents" / "main" / "wire.jsonl"
    return Replayed(recorded, path, session, steps, [recorded.project] * len(steps))


def _gemini(recorded: Recorded, home: Path, data: bytes, chunks: int) -> Replayed:
    document = json.loads(data)
    messages = list(document.get("messages") or [])
    count = max(1, min(chunks, len(messages)))
    cuts = sorted({round(len(messages) * (i + 1) / count) for i in range(count)})
    steps = [
        (json.dumps({**document, "messages": messages[:cut]}, indent=2, ensure_ascii=False) + "\n").encode()
        for cut in cuts
    ]
    steps[-1] = data  # the last write is the file as recorded, byte for byte
    path = home / ".gemini" / "tmp" / str(document["projectHash"]) / "chats" / recorded.path.name
    return Replayed(recorded, path, str(document["sessionId"]), steps, [recorded.project] * len(steps))


def payload(host: str, event: str, session: Replayed, step: int) -> dict[str, Any]:
    """The JSON ``host`` sends its hook for ``event`` after ``step`` (the fields of each CLI's hook input)."""
    common: dict[str, Any] = {"session_id": session.session_id, "cwd": session.cwds[step], "hook_event_name": event}
    final = event == "SessionEnd"
    if host == "claude-code":
        extra: dict[str, object] = {"reason": "exit"} if final else {"stop_hook_active": False}
        return {**common, "transcript_path": str(session.path), "permission_mode": "default", **extra}
    if host == "codex":
        return {
            **common,
            "turn_id": f"turn-{step}",
            "transcript_path": str(session.path),
            "model": "gpt-5",
            "permission_mode": "default",
            "stop_hook_active": False,
            "last_assistant_message": None,
        }
    if host == "gemini":
        extra = {"reason": "exit"} if final else {"prompt": "", "prompt_response": "", "stop_hook_active": False}
        return {**common, "transcript_path": str(session.path), "timestamp": "2026-01-01T00:00:00Z", **extra}
    # Kimi CLI: the session id and the work dir only (no path).
    return {**common, **({"reason": "exit"} if final else {"stop_hook_active": False})}


def capture_events(host: str) -> tuple[str, str | None]:
    """The event fired after each write, and the session-end event (None where the host has none)."""
    from memstream import hosts

    events = hosts.BY_NAME[host].capture_events
    end = "SessionEnd" if "SessionEnd" in events else None
    return next(e for e in events if e != "SessionEnd"), end


Fire = Callable[[str, str, dict[str, Any], Replayed, int], None]


def replay(session: Replayed, fire: Fire) -> None:
    """Write ``session`` step by step, firing the host's hook after each write and at its end."""
    host = session.recorded.host
    each, end = capture_events(host)
    session.path.parent.mkdir(parents=True, exist_ok=True)
    for step, content in enumerate(session.steps):
        if session.recorded.cli == "gemini":  # rewritten whole, as gemini-cli writes its JSON chat
            partial = session.path.with_name(f".{session.path.name}.tmp")
            partial.write_bytes(content)
            partial.replace(session.path)
        else:  # appended: only the bytes after what is already there
            with session.path.open("ab") as handle:
                handle.write(content[handle.tell() :])
        fire(host, each, payload(host, each, session, step), session, step)
    if end is not None:
        last = len(session.steps) - 1
        fire(host, end, payload(host, end, session, last), session, last)


# --- the hooks install wrote -------------------------------------------------------------------------


def installed_commands(host: str, home: Path) -> dict[str, str]:
    """The hook command per event that ``memstream install HOST`` wrote into the CLI's user settings."""
    commands: dict[str, str] = {}
    if host == "kimi":
        config = tomllib.loads((home / ".kimi" / "config.toml").read_text())
        for hook in config.get("hooks", []):
            commands.setdefault(str(hook["event"]), str(hook["command"]))
        return commands
    if host == "codex":
        hooks = tomllib.loads((home / ".codex" / "config.toml").read_text()).get("hooks", {})
    else:
        folder = ".claude" if host == "claude-code" else ".gemini"
        hooks = json.loads((home / folder / "settings.json").read_text()).get("hooks", {})
    for event, groups in hooks.items():
        for group in groups:
            for hook in group.get("hooks", []):
                commands.setdefault(str(event), str(hook["command"]))
    return commands


def shell_fire(home: Path, env: Mapping[str, str], workdir: Path) -> Fire:
    """A :data:`Fire` that runs the installed command with ``sh -c``, the payload on stdin, as the CLIs do.

    The process runs in ``workdir``: the recorded sessions' folders are not on this machine (the payload
    carries the session's ``cwd``, as every CLI's does)."""
    commands = {host: installed_commands(host, home) for host in HOST_OF.values()}

    def fire(host: str, event: str, body: dict[str, Any], session: Replayed, step: int) -> None:
        command = commands[host].get(event)
        if command is None:
            raise AssertionError(f"memstream install {host} wrote no {event} hook")
        subprocess.run(
            ["sh", "-c", command],
            input=json.dumps(body).encode(),
            env=dict(env),
            cwd=workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=120,
            check=False,
        )

    return fire


# --- memories --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """An active conversation memory as read back: its project, its session and its text."""

    project: str
    session_id: str
    text: str


def raw_mode_memories(
    turns: Iterable[Mapping[str, Any]], *, window: int = 8, message_max_chars: int = 4_000, idle: bool = False
) -> list[Stored]:
    """The conversation memories raw mode makes of ``turns`` (in publishing order), by the pipeline's rules.

    Per session and project, as ``agents/snapshot.py`` does: each turn applied to the session's state
    (:func:`memstream.rules.snapshot.apply_turn`), except the host's end of a session repeating a turn
    already applied (:func:`memstream.rules.snapshot.ends_applied`); an assistant turn makes the exchange
    it belongs to a memory (one per exchange: a later message refreshes it), its text the exchange as
    :func:`memstream.rules.extraction.raw_facts` keeps it. A session that ends on unanswered questions
    stores them when its host said it ended (``ends_session``), or, with ``idle``, as the idle flush does
    once nothing has come for ``MEMSTREAM_PHASE1_IDLE_SECONDS`` (15 minutes: no replay waits that long).
    """
    from memstream.rules.extraction import raw_facts
    from memstream.rules.secrets import redact
    from memstream.rules.snapshot import apply_turn, current_exchange, ends_applied, last_exchange
    from memstream.schemas import Provenance, SessionState

    states: dict[tuple[str, str], SessionState] = {}
    texts: dict[tuple[str, str, int], str] = {}

    def store(key: tuple[str, str], messages: list[Any], base: int) -> None:
        facts = raw_facts(redact(last_exchange(messages, message_max_chars=message_max_chars)))
        if facts:
            texts[(*key, base)] = facts[0].text

    def flush(key: tuple[str, str]) -> None:
        exchange, base = current_exchange(states[key])
        if exchange and exchange[-1].role == "user":
            store(key, exchange, base)

    for offset, turn in enumerate(turns):
        key = (str(turn["session_id"]), str(turn["project"]))
        state = states.get(key) or SessionState(lineage=key[0])
        provenance = Provenance(**{k: v for k, v in (turn.get("provenance") or {}).items() if k != "citations"})
        if turn.get("ends_session") and ends_applied(state, turn["role"], provenance):
            flush(key)  # the host's end, naming a turn the session has: nothing new to apply
            continue
        applied = apply_turn(
            state,
            partition=0,
            offset=offset,
            role=turn["role"],
            content=str(turn["content"]),
            size=window,
            message_max_chars=message_max_chars,
            provenance=provenance,
        )
        states[key] = applied.state
        if applied.exchange:
            store(key, applied.exchange, applied.exchange_base)
        if turn.get("ends_session"):
            flush(key)
    for key in states if idle else ():
        flush(key)
    return [Stored(project, session, text) for (session, project, _), text in texts.items()]


def spooled_turns(capture_db: Path) -> list[dict[str, Any]]:
    """Every turn in a data dir's capture spool, in capture order."""
    from memstream.capture.state import CaptureState

    with CaptureState.open(capture_db, readonly=True) as state:
        return [spooled.payload for spooled in state.spooled(1_000_000)]


def in_process_settings(home: Path, data_dir: Path) -> Any:
    """Settings whose CLI homes are under ``home`` (the hooks' own view of this machine)."""
    from memstream.settings import Settings

    return Settings.from_env(
        {},
        data_dir=data_dir,
        claude_dir=home / ".claude",
        codex_dir=home / ".codex",
        gemini_dir=home / ".gemini",
        kimi_dir=home / ".kimi",
        kimi_code_dir=home / ".kimi-code",
    )


def replay_in_process(recorded: list[Recorded], home: Path, data_dir: Path, *, chunks: int = CHUNKS) -> list[Replayed]:
    """Replay ``recorded`` with each payload taken as ``up`` takes a hook's note
    (:func:`memstream.capture.hook.capture`), then release what is held back once the files are quiet,
    as ``up`` does; the turns are then in ``data_dir``'s spool. ``chunks=1`` is whole-file capture: each
    file written once, complete, and its hooks fired once."""
    from memstream.capture.hook import capture
    from memstream.capture.watch import release_quiet

    settings = in_process_settings(home, data_dir)

    def fire(host: str, event: str, body: dict[str, Any], session: Replayed, step: int) -> None:
        capture(host, body, settings, send=False)

    sessions = [replayed(r, home, chunks=chunks) for r in recorded]
    for session in sessions:
        replay(session, fire)
    release_quiet(settings, quiet=0.0)
    return sessions


# --- the score ---------------------------------------------------------------------------------------


def contains(memory: str, text: str) -> bool:
    """Whether a memory holds ``text``: whole, or (a message longer than a memory keeps) both its ends."""
    wanted = norm(text)
    if len(wanted) <= 2 * ENDS:
        return wanted in memory
    return wanted[:ENDS] in memory and wanted[-ENDS:] in memory


def is_orphan(text: str) -> bool:
    """A memory with an answer and no question at all."""
    return "[assistant]" in text and not re.search(r"(^|\n)\[user\] ", text)


@dataclass
class Score:
    """One CLI's figures."""

    files: int = 0
    exchanges: int = 0
    whole: int = 0
    wrong_project: int = 0
    orphans: int = 0
    misses: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.whole / self.exchanges if self.exchanges else 1.0

    @property
    def met(self) -> bool:
        return self.rate >= TARGET and self.wrong_project == 0 and self.orphans == 0


def session_ids(session: Replayed) -> set[str]:
    """The session ids capture gives the replayed file's turns (the adapters' own reading of it)."""
    from memstream.capture.adapters import parse
    from memstream.capture.detect import detect
    from memstream.capture.model import Source
    from memstream.capture.reader import read_session

    if not session.path.is_file():
        return {session.session_id}
    read = read_session(session.path, final=True)
    source = detect(session.path, session.path.read_bytes()[:65_536]) or Source(session.recorded.cli)
    parsed = parse(source, str(session.path), read.records, mtime=datetime.now(UTC))
    return {turn.session_id for turn in parsed.turns} | {session.session_id}


def score(sessions: Iterable[Replayed], memories: Iterable[Stored]) -> dict[str, Score]:
    """Per CLI: exchanges whole in one memory of the right project, wrong-project memories, orphan replies."""
    stored = [Stored(PurePosixPath(m.project).as_posix(), m.session_id, norm(m.text)) for m in memories]
    scores: dict[str, Score] = {}
    for session in sessions:
        recorded = session.recorded
        figures = scores.setdefault(recorded.cli, Score())
        figures.files += 1
        ids = session_ids(session)
        mine = [m for m in stored if m.session_id in ids]
        right = [m for m in mine if m.project == recorded.project]
        for memory in mine:
            if memory.project != recorded.project:
                figures.wrong_project += 1
                figures.misses.append(f"{recorded.name}: memory in {memory.project}: {memory.text[:90]!r}")
            if is_orphan(memory.text):
                figures.orphans += 1
                figures.misses.append(f"{recorded.name}: orphan reply: {memory.text[:90]!r}")
        for exchange in recorded.exchanges:
            figures.exchanges += 1
            said = [*exchange.questions, *([exchange.answer] if exchange.answer else [])]
            if any(all(contains(m.text, text) for text in said) for m in right):
                figures.whole += 1
            else:
                figures.misses.append(f"{recorded.name}: exchange not whole in one memory: {exchange.brief()!r}")
    return scores


def report(scores: Mapping[str, Score], *, show_misses: bool = False) -> list[str]:
    """The figures as table lines (and each miss, if asked)."""
    lines = [
        f"  {'CLI':<8}{'files':>6}{'exchanges':>11}{'whole':>7}{'score':>8}{'wrong project':>15}{'orphans':>9}",
    ]
    for cli, s in sorted(scores.items()):
        lines.append(
            f"  {cli:<8}{s.files:>6}{s.exchanges:>11}{s.whole:>7}{s.rate:>8.1%}{s.wrong_project:>15}{s.orphans:>9}"
        )
        if show_misses:
            lines.extend(f"    {miss}" for miss in s.misses)
    return lines


# --- with a real `memstream up` ------------------------------------------------------------------------


def live_env(work: Path, port: int, base: Mapping[str, str]) -> dict[str, str]:
    """A user's environment for the replay: its own home, state folder and data dir; raw mode (no LLM key)."""
    clean = {k: v for k, v in base.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_", "VOYAGE_", "XAI_"))}
    homes = ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "KIMI_SHARE_DIR", "KIMI_CODE_HOME")
    clean = {k: v for k, v in clean.items() if k not in ("GOOGLE_API_KEY", "GEMINI_API_KEY", *homes)}
    (work / "home").mkdir(parents=True, exist_ok=True)
    return {
        **clean,
        "HOME": str(work / "home"),
        "XDG_STATE_HOME": str(work / "state"),
        "MEMSTREAM_DATA_DIR": str(work / "data"),
        "MEMSTREAM_HTTP_PORT": str(port),
        "MEMSTREAM_TOPIC_PREFIX": f"live{hashlib.sha256(str(work).encode()).hexdigest()[:8]}",
        "MEMSTREAM_PARTITIONS": "2",
    }


def install_all(python: str, env: Mapping[str, str], cwd: Path) -> None:
    """``memstream install HOST`` for every host, as a user would (user scope)."""
    for host in HOST_OF.values():
        done = subprocess.run(
            [python, "-m", "memstream.cli", "install", host],
            env=dict(env),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"memstream install {host} failed: {done.stderr or done.stdout}")


def stored_memories(env: Mapping[str, str]) -> list[Stored]:
    """The active conversation memories of the running ``up`` (its admin list, with the local token)."""
    from memstream.commands.read import api_request
    from memstream.settings import Settings

    settings = Settings.from_env(dict(env))
    _, body = api_request(settings, "GET", "/memories", {"limit": "100000"})
    return [
        Stored(str(m.get("project") or ""), str(m.get("session_id") or ""), str(m.get("text") or ""))
        for m in json.loads(body)["memories"]
        if m.get("type") == "conversation" and m.get("superseded_by") is None
    ]


def settled(env: Mapping[str, str], capture_db: Path, queue: Path) -> tuple[bool, str]:
    """Whether nothing waits on the way in, and a digest of what is stored (:func:`waiting`)."""
    counts, digest = waiting(env, capture_db, queue)
    return not any(counts.values()), digest


def waiting(env: Mapping[str, str], capture_db: Path, queue: Path) -> tuple[dict[str, int], str]:
    """What waits on the way in (hook notes, spooled turns, replies held back until their file is quiet,
    turns sent but not stored), and a digest of what is stored. A held reply (Codex's last, with no session-end hook) is
    released by ``up`` only once its file has been quiet for the live window: on a loaded machine that can
    come after a fixed wait, and a benchmark that stopped then counted it missing."""
    from memstream.capture.ingest import HELD
    from memstream.capture.state import CaptureState
    from memstream.intake.turnlog import TurnLog
    from memstream.settings import Settings

    notes = [p for p in queue.glob("*.json") if not p.name.startswith(".")] if queue.is_dir() else []
    with CaptureState.open(capture_db, readonly=True) as state:
        counts = {"notes": len(notes), "spooled": state.spool_size(), "held": len(state.unfinished(HELD))}
    # And nothing waits in the pipeline: every turn sent is stored (the turn log marks it done then). A
    # quiet spell of the store alone is no sign of it on a loaded machine: embedding can stall longer.
    turnlog = TurnLog.for_settings(Settings.from_env(dict(env)))
    if turnlog is not None:
        try:
            counts["unstored"] = turnlog.count_unfinished()
        finally:
            turnlog.close()
    memories = stored_memories(env)
    digest = hashlib.sha256(json.dumps(sorted((m.session_id, m.text) for m in memories)).encode()).hexdigest()
    return counts, digest
