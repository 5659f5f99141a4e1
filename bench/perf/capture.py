"""Capture throughput and hook latency: a backlog of session files into searchable memories; and fidelity.

    .venv/bin/python -m bench.perf.capture [--sessions 1000 --turns 50] [--hooks 200] [--quick]
    .venv/bin/python -m bench.perf.capture --fidelity [--show-misses]
    .venv/bin/python -m bench.perf.capture --live [--show-misses] [--only NAME …]

``--fidelity`` reads the real recorded session files of ``tests/fixtures/capture/real`` (their origins in
``SOURCES.md``) the way ``memstream ingest --dry-run --json`` does, and scores the turns it would publish
against the turns labelled by hand beside each file (``<name>.labels.json``): recall (expected turns
printed) and precision (printed turns that were expected), per CLI. A turn matches when its role, its text
(whitespace collapsed) and its project are the expected ones; a session's repeated message is one turn
(first seen wins). Two runs: "as found", the files read where they are with nothing else given (a new
user's first try on an export); and "named", with ``--project`` given for the files whose records cannot
name their project (the label says so), as the user would then do.

``--live`` replays the same files the way their CLIs write them live, through the hooks ``memstream install``
writes, with a real ``memstream up`` running (``tests/support/live_capture.py`` says how: JSONL grown in 20
chunks at line boundaries, Gemini's JSON rewritten whole, each CLI's payload and cwd), then reads the memories
back from the API and scores per CLI the exchanges whose question and final answer are both in one memory of
the right project, memories filed under a wrong project, and orphan replies. It exits 1 when a CLI is below
97%, or on any wrong-project memory or orphan.

Builds a backlog of ``--sessions`` session files of ``--turns`` turns each (the full size is 1,000 sessions,
50,000 turns): copies of the Claude Code fixtures (``tests/fixtures/capture/claude``) with fresh session,
message and record ids when the CLI adapters are installed, else files in the test suite's stand-in format
(``tests/unit/capture_fakes.py``), which exercises the same machinery (checkpoints, dedup, spool,
publisher) with a trivial parser. It then measures, on the embedded broker and store in raw mode:

- read: files/s and turns/s from disk to the spool (checkpoints, first-seen dedup, one transaction a file);
- re-run: the same files again, unchanged (stat only; target: 1,000 files under 2 s);
- publish: turns/s from the spool to the broker (acknowledged);
- searchable: turns/s from the start of publishing until every exchange is a memory in the store;
- hook: p50/p95 from start to exit of ``memstream hook claude-code`` processes, each after 2 new turns
  were appended to a session file. A hook only spools (a local ``memstream up`` drains the spool every
  second), so this is its cost whether memstream is up or down. Target: p95 < 200 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.capture.model import Source

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "capture" / "claude"
REAL = ROOT / "tests" / "fixtures" / "capture" / "real"
LABELS_SUFFIX = ".labels.json"
FIDELITY_TARGET = 0.97
HOOK_TARGET_P95_MS = 200.0
RERUN_TARGET_S = 2.0


def adapters_available() -> bool:
    return all(importlib.util.find_spec(f"memstream.capture.{m}") is not None for m in ("reader", "detect", "adapters"))


def build_backlog(folder: Path, sessions: int, turns: int, *, real: bool) -> None:
    """``sessions`` files of about ``turns`` turns each, every one with fresh ids and distinct words."""
    old = time.time() - 86_400  # a backlog: every file finished long ago (no reply is held back as live)
    for i in range(sessions):
        path = folder / f"p{i % 20}" / f"{uuid.uuid4()}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_claude_session(i, turns) if real else _standin_session(i, turns))
        os.utime(path, (old, old))


def _standin_session(i: int, turns: int) -> str:
    from tests.unit.capture_fakes import header, message

    lines = [header(f"bench-{i}", f"/bench/project-{i % 20}")]
    lines += [
        message(t, text=f"session {i} turn {t}: module m{(i * 31 + t) % 9973} uses lib{t % 97}") for t in range(turns)
    ]
    return "".join(lines)


_FIXTURE_TURNS: dict[str, int] = {}


def _claude_session(i: int, turns: int) -> str:
    """Rounds of one Claude Code fixture as one session: fresh session, record and message ids, and each
    text marked with its session and round, until the session has about ``turns`` turns."""
    sources = sorted(p for p in FIXTURES.glob("*.jsonl") if not p.name.startswith("agent-"))
    source = sources[i % len(sources)]
    per_round = _turns_of(source)
    session = str(uuid.uuid4())
    lines = []
    for r in range(max(1, -(-turns // max(per_round, 1)))):
        ids: dict[str, str] = {}
        for raw in source.read_text().splitlines():
            try:
                record = json.loads(raw)
            except ValueError:
                continue  # the fixtures' deliberately broken lines are the adapters' tests, not load
            lines.append(json.dumps(_fresh(record, session, ids, f"[s{i} r{r}] ")))
    return "\n".join(lines) + "\n"


def _fresh(value: Any, session: str, ids: dict[str, str], mark: str) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "sessionId":
                out[key] = session
            elif key in ("uuid", "parentUuid", "leafUuid", "id") and isinstance(item, str):
                out[key] = ids.setdefault(
                    item, f"msg_{uuid.uuid4().hex[:24]}" if item.startswith("msg_") else str(uuid.uuid4())
                )
            elif key in ("text", "content") and isinstance(item, str):
                out[key] = mark + item
            else:
                out[key] = _fresh(item, session, ids, mark)
        return out
    if isinstance(value, list):
        return [_fresh(item, session, ids, mark) for item in value]
    return value


def _turns_of(source: Path) -> int:
    if source.name not in _FIXTURE_TURNS:
        from memstream.capture.adapters import parse
        from memstream.capture.reader import read_session

        read = read_session(source, final=True)
        _FIXTURE_TURNS[source.name] = len(
            parse(Source.CLAUDE, str(source), read.records, mtime=datetime.now(UTC)).turns
        )
    return _FIXTURE_TURNS[source.name]


def formats(real: bool) -> Any:
    if real:
        from memstream.capture.ingest import CliFormats

        return CliFormats()
    from tests.unit.capture_fakes import FakeFormats

    return FakeFormats()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


HOOK_STANDIN = """
import io, sys
from memstream.capture import hook
from memstream.hooks import read_payload
from memstream.settings import Settings
from tests.unit.capture_fakes import FakeFormats
try:
    hook.capture("claude-code", read_payload([], sys.stdin), Settings.from_env(), formats=FakeFormats())
except Exception:
    pass
"""


def append_turns(path: Path, n: int) -> None:
    """Two new turns (a prompt and its reply) at the end of a Claude Code session file."""
    template = next(
        record
        for record in map(json.loads, reversed(path.read_text().splitlines()))
        if record.get("sessionId") and record.get("type") in ("user", "assistant")
    )
    lines = []
    for k, role in enumerate(("user", "assistant")):
        record = {
            "type": role,
            "sessionId": template["sessionId"],
            "cwd": template.get("cwd", "/bench"),
            "uuid": str(uuid.uuid4()),
            "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "isSidechain": False,
            "message": {
                "role": role,
                "id": f"msg_{uuid.uuid4().hex[:24]}",
                "content": [{"type": "text", "text": f"hook turn {n}-{k} {uuid.uuid4().hex}"}],
            },
        }
        lines.append(json.dumps(record) + "\n")
    with path.open("a") as handle:
        handle.write("".join(lines))


def time_hooks(files: list[Path], count: int, env: dict[str, str], *, real: bool) -> list[float]:
    """Start-to-exit of hook processes, each after two turns were appended to a session file."""
    from tests.unit.capture_fakes import message

    took = []
    for n in range(count):
        path = files[n % len(files)]
        if real:
            append_turns(path, n)
        else:
            with path.open("a") as handle:
                handle.write(
                    message(10_000 + 2 * n, text=f"hook turn {n} a") + message(10_001 + 2 * n, text=f"hook turn {n} b")
                )
        payload = json.dumps(
            {"session_id": "s", "transcript_path": str(path), "cwd": "/bench", "hook_event_name": "Stop"}
        )
        argv = (
            [str(Path(sys.executable).with_name("memstream")), "hook", "claude-code"]
            if real
            else [sys.executable, "-c", HOOK_STANDIN]
        )
        began = time.perf_counter()
        subprocess.run(argv, input=payload, text=True, env=env, capture_output=True, timeout=60, check=False)
        took.append((time.perf_counter() - began) * 1000)
    return took


def _bare_python(env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, capture_output=True, timeout=60, check=False)
    return (time.perf_counter() - began) * 1000


async def count_memory_changes(bootstrap: str, settings: Any, expected: int, timeout: float) -> int:
    """Memory-updated events on the topic, read until ``expected`` arrived or ``timeout`` passed."""
    from aiokafka import AIOKafkaConsumer

    from memstream.topics import MEMORY_UPDATED, topic_name

    consumer = AIOKafkaConsumer(
        topic_name(settings.topic_prefix, MEMORY_UPDATED),
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    seen = 0
    try:
        deadline = time.monotonic() + timeout
        while seen < expected and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=200)
            seen += sum(len(records) for records in batch.values())
    finally:
        await consumer.stop()
    return seen


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from memstream.capture.run import ingest
    from memstream.capture.spool import flush, pending
    from memstream.capture.state import CaptureState
    from memstream.kafka.broker import free_port
    from memstream.settings import Settings
    from memstream.worker import runner

    real = adapters_available() and FIXTURES.is_dir() and not args.standin
    work = Path(tempfile.mkdtemp(prefix="memstream-bench-capture-"))
    backlog = work / "sessions"
    build_backlog(backlog, args.sessions, args.turns, real=real)
    files = sorted(backlog.rglob("*.jsonl"))
    settings = Settings.from_env(
        {}, data_dir=work / "data", topic_prefix=f"bench{uuid.uuid4().hex[:8]}", http_port=free_port(), partitions=4
    )
    figures: dict[str, Any] = {"format": "claude fixtures" if real else "stand-in", "files": len(files)}

    out = io.StringIO()
    began = time.perf_counter()
    await asyncio.to_thread(ingest, settings, [backlog], formats=formats(real), out=out, err=io.StringIO())
    read_s = time.perf_counter() - began
    spooled = pending(settings)
    # Raw mode stores one memory per assistant turn (its exchange): that many memory changes are awaited.
    with CaptureState.open(settings.capture_db) as state:
        replies = sum(1 for s in state.spooled(10**7) if s.payload["role"] == "assistant")
    figures.update(
        turns=spooled, read_s=read_s, read_files_per_s=len(files) / read_s, read_turns_per_s=spooled / read_s
    )

    began = time.perf_counter()
    await asyncio.to_thread(ingest, settings, [backlog], formats=formats(real), out=io.StringIO(), err=io.StringIO())
    figures["rerun_s"] = time.perf_counter() - began

    running = await runner.start(settings, loglevel="warning", announce=True)
    try:
        store = running.providers.store
        before = await store.count()
        began = time.perf_counter()
        sent = await flush(settings, running.bootstrap)
        publish_s = time.perf_counter() - began
        figures.update(published=sent, publish_turns_per_s=sent / publish_s)
        exchanges = replies
        # Every exchange becomes one memory change (created, or refreshed when raw mode's dedup finds a
        # near-identical one): wait until the store has applied as many as there were exchanges.
        changes = await count_memory_changes(running.bootstrap, settings, exchanges, args.timeout)
        memories = (await store.count()) - before
        searchable_s = time.perf_counter() - began
        figures.update(memory_changes=changes, replies=replies)
        figures.update(memories=memories, searchable_s=searchable_s, searchable_turns_per_s=sent / searchable_s)

        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")},
            "MEMSTREAM_DATA_DIR": str(settings.data_dir.resolve()),
            "PYTHONPATH": str(ROOT),
        }
        hooks = await asyncio.to_thread(time_hooks, files, args.hooks, env, real=real)
        figures.update(hook_p50_ms=statistics.median(hooks), hook_p95_ms=percentile(hooks, 95), hook_runs=len(hooks))
        # The floor under any hook on this machine right now: a bare interpreter, started the same way.
        bare = [_bare_python(env) for _ in range(min(args.hooks, 20))]
        figures.update(python_startup_p50_ms=statistics.median(bare), load_average=os.getloadavg()[0])
    finally:
        await running.stop()
    return figures


def _norm(text: str) -> str:
    return " ".join(text.split())


def labelled_files(root: Path = REAL) -> list[tuple[Path, dict[str, Any]]]:
    """Every real session file with its labels, in a stable order."""
    found = []
    for labels in sorted(root.rglob(f"*{LABELS_SUFFIX}")):
        data = json.loads(labels.read_text(encoding="utf-8"))
        found.append((labels.parent / data["file"].split("/")[-1], data))
    return found


def printed_turns(path: Path, project: str) -> list[dict[str, Any]]:
    """The turns ``memstream ingest --dry-run`` would publish from ``path`` (with ``--project`` if given)."""
    from memstream.capture.ingest import Capture, CliFormats
    from memstream.capture.state import CaptureState

    with (
        tempfile.TemporaryDirectory(prefix="memstream-fidelity-") as work,
        CaptureState.open(Path(work) / "capture.db") as state,
    ):
        outcome = Capture(state, CliFormats(), dry_run=True, project=project).file(path, final=True)
    return outcome.new


def score(expected: set[tuple[str, str, str]], printed: set[tuple[str, str, str]]) -> tuple[int, int, int]:
    """(matched, expected, printed): a turn matches on role, whitespace-collapsed text and project."""
    return len(expected & printed), len(expected), len(printed)


def fidelity(*, named: bool, show_misses: bool = False) -> dict[str, tuple[int, int, int]]:
    """Per CLI: (matched, expected, printed) over its labelled real files."""
    totals: dict[str, tuple[int, int, int]] = {}
    for path, labels in labelled_files():
        cli = path.relative_to(REAL).parts[0]
        project = labels["project"] if named and labels.get("project_needs_flag") else ""
        expected = {(t["role"], _norm(t["text"]), labels["project"]) for t in labels["turns"]}
        printed = {(p["role"], _norm(p["content"]), p["project"]) for p in printed_turns(path, project)}
        matched, want, got = score(expected, printed)
        if show_misses:
            for role, text, where in sorted(expected - printed):
                print(f"  missed  {cli} {path.name} {role}: {text[:100]!r} ({where})")
            for role, text, where in sorted(printed - expected):
                print(f"  extra   {cli} {path.name} {role}: {text[:100]!r} ({where})")
        old = totals.get(cli, (0, 0, 0))
        totals[cli] = (old[0] + matched, old[1] + want, old[2] + got)
    return totals


def print_fidelity(show_misses: bool) -> bool:
    """Both runs as tables; True when every CLI meets the target in the "named" run."""
    met = True
    for named in (False, True):
        title = "named (--project where the file cannot know it)" if named else "as found (nothing given)"
        print(f"fidelity on real sessions, {title}; target >= {FIDELITY_TARGET:.0%} each")
        totals = fidelity(named=named, show_misses=show_misses)
        print(f"  {'CLI':<8}{'files':>6}{'expected':>10}{'printed':>9}{'recall':>9}{'precision':>11}")
        files = {cli: 0 for cli in totals}
        for path, _ in labelled_files():
            files[path.relative_to(REAL).parts[0]] += 1
        for cli, (matched, want, got) in totals.items():
            recall = matched / want if want else 1.0
            precision = matched / got if got else (1.0 if not want else 0.0)
            met = met and (not named or (recall >= FIDELITY_TARGET and precision >= FIDELITY_TARGET))
            print(f"  {cli:<8}{files[cli]:>6}{want:>10}{got:>9}{recall:>9.1%}{precision:>11.1%}")
    return met


#: Longest wait for the pipeline to take what the hooks handed it (s), unless ``--timeout`` says otherwise.
LIVE_DEADLINE_S = 900.0
#: How long the stored memories must stay the same before they are read as final (s).
LIVE_STABLE_S = 15.0


def live(only: list[str], show_misses: bool, deadline_s: float = LIVE_DEADLINE_S) -> bool:
    """Replay every labelled real session live through the installed hooks with `up` running; True if met."""
    from memstream.capture.ingest import LIVE_WINDOW
    from memstream.kafka.broker import free_port
    from tests.support import live_capture as lc

    recorded = lc.recorded_sessions(only=only)
    with tempfile.TemporaryDirectory(prefix="memstream-live-") as folder:
        work = Path(folder)
        env = lc.live_env(work, free_port(), os.environ)
        home, data = Path(env["HOME"]), Path(env["MEMSTREAM_DATA_DIR"])
        lc.install_all(sys.executable, env, work)
        up = subprocess.Popen(
            [sys.executable, "-m", "memstream.cli", "up"],
            env=env,
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=(work / "up.log").open("wb"),
        )
        try:
            deadline = time.monotonic() + 120
            while not (data / "hook-queue" / "taker.pid").exists():
                if up.poll() is not None or time.monotonic() > deadline:
                    up.kill()  # not left running behind a benchmark that gave up on it
                    up.wait(timeout=60)
                    raise SystemExit(f"memstream up did not start: {(work / 'up.log').read_text()[-2000:]}")
                time.sleep(0.2)
            started = time.monotonic()
            sessions = [lc.replayed(r, home) for r in recorded]
            fire = lc.shell_fire(home, env, work)
            for session in sessions:
                lc.replay(session, fire)
            replayed_s = time.monotonic() - started
            # Codex has no session-end hook: `up` takes a session's last reply once its file is quiet.
            quiet_until = time.monotonic() + LIVE_WINDOW + 20
            deadline = time.monotonic() + deadline_s
            last, since = "", time.monotonic()
            while True:
                done, digest = lc.settled(env, data / "capture.db", data / "hook-queue")
                if digest != last or not done:
                    last, since = digest, time.monotonic()
                elif time.monotonic() >= quiet_until and time.monotonic() - since >= LIVE_STABLE_S:
                    break
                if time.monotonic() > deadline:
                    counts, _ = lc.waiting(env, data / "capture.db", data / "hook-queue")
                    print(f"  (the memories were still changing at the deadline; waiting: {counts})")
                    break
                time.sleep(1.0)
            settled_s = time.monotonic() - started - replayed_s
            memories = lc.stored_memories(env)
        finally:
            up.send_signal(2)
            try:
                up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                up.kill()
        scores = lc.score(sessions, memories)
    hooks = sum(len(s.steps) for s in sessions)
    print(
        f"live capture of {len(sessions)} real sessions through the installed hooks, `up` running: "
        f"{hooks} writes and hooks in {replayed_s:.0f} s, {len(memories)} conversation memories "
        f"(read {settled_s:.0f} s later); "
        f"target >= {lc.TARGET:.0%} each, no wrong-project memory, no orphan (load average {os.getloadavg()[0]:.1f})"
    )
    print("\n".join(lc.report(scores, show_misses=show_misses)))
    return all(s.met for s in scores.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=50, help="turns per stand-in session")
    parser.add_argument("--hooks", type=int, default=200, help="hook processes timed")
    parser.add_argument("--timeout", type=float, default=900.0, help="longest wait for the memories (s)")
    parser.add_argument("--standin", action="store_true", help="use the stand-in format even if adapters exist")
    parser.add_argument("--quick", action="store_true", help="20 sessions of 10 turns, 20 hooks")
    parser.add_argument("--fidelity", action="store_true", help="recall and precision on the real labelled sessions")
    parser.add_argument("--show-misses", action="store_true", help="with --fidelity/--live: list each miss")
    parser.add_argument("--live", action="store_true", help="the real sessions replayed live through the hooks")
    parser.add_argument("--only", nargs="*", default=[], help="with --live: the files whose name contains these")
    args = parser.parse_args()
    if args.live:
        raise SystemExit(0 if live(args.only, args.show_misses, args.timeout) else 1)
    if args.fidelity:
        raise SystemExit(0 if print_fidelity(args.show_misses) else 1)
    if args.quick:
        args.sessions, args.turns, args.hooks, args.timeout = 20, 10, 20, min(args.timeout, 180.0)
    figures = asyncio.run(main_async(args))
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}, indent=2))
    print(
        f"read {figures['read_files_per_s']:.0f} files/s, {figures['read_turns_per_s']:.0f} turns/s; "
        f"re-run of {figures['files']} unchanged files {figures['rerun_s']:.2f}s; "
        f"publish {figures['publish_turns_per_s']:.0f} turns/s; "
        f"searchable {figures['searchable_turns_per_s']:.0f} turns/s ({figures['memories']} memories); "
        f"hook p50 {figures['hook_p50_ms']:.0f} ms, p95 {figures['hook_p95_ms']:.0f} ms "
        f"(target < {HOOK_TARGET_P95_MS:.0f} ms; bare python start {figures['python_startup_p50_ms']:.0f} ms, "
        f"load average {figures['load_average']:.1f})"
    )


if __name__ == "__main__":
    main()
