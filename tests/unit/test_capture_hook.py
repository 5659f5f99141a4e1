"""`memstream hook`: finding each host's session file, spooling from the checkpoint, never failing the agent."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from memstream.capture import hook
from memstream.capture.state import CaptureState
from memstream.hooks import dispatch, main, read_payload
from memstream.process import identity
from memstream.settings import Settings
from tests.unit.capture_fakes import FakeFormats, message, session_file

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings.from_env({}, data_dir=tmp_path / "data", codex_dir=tmp_path / "codex", kimi_dir=tmp_path / "kimi")


def spool(settings: Settings) -> list[str]:
    with CaptureState.open(settings.capture_db) as state:
        return [s.payload["content"] for s in state.spooled(1000)]


def test_a_stop_hook_spools_the_new_turns_and_the_next_call_only_what_came_since(
    settings: Settings, tmp_path: Path
) -> None:
    transcript = session_file(tmp_path / "claude" / "s1.jsonl", "s1", 2)
    payload = {"session_id": "s1", "transcript_path": str(transcript), "cwd": "/w", "hook_event_name": "Stop"}
    assert hook.capture("claude-code", payload, settings, formats=FakeFormats()) == 2
    # Stop fired before the reply's last line reached the disk: the next call picks it up.
    with transcript.open("a") as handle:
        handle.write(message(2) + message(3))
    assert hook.capture("claude-code", payload, settings, formats=FakeFormats()) == 2
    assert hook.capture("claude-code", payload, settings, formats=FakeFormats()) == 0
    assert spool(settings) == [f"message {i} of the session" for i in range(4)]


def test_memstream_down_keeps_the_turns_spooled_and_starts_no_flusher(settings: Settings, tmp_path: Path) -> None:
    transcript = session_file(tmp_path / "s1.jsonl", "s1", 2)
    hook.capture(
        "gemini", {"transcript_path": str(transcript), "hook_event_name": "AfterAgent"}, settings, formats=FakeFormats()
    )
    assert not hook.start_flusher(settings)
    assert len(spool(settings)) == 2


def test_codex_notify_finds_the_rollout_by_thread_id(settings: Settings) -> None:
    thread = "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    day = settings.codex_dir / "sessions" / "2026" / "02" / "03"
    rollout = session_file(day / f"rollout-2026-02-03T10-00-00-{thread}.jsonl", thread, 2)
    session_file(
        settings.codex_dir / "sessions" / "2026" / "02" / "01" / "rollout-2026-02-01T10-00-00-other.jsonl", "x", 1
    )
    notify = {"type": "agent-turn-complete", "thread-id": thread, "turn-id": "1", "cwd": "/w", "input-messages": []}
    assert hook.session_file("codex", notify, settings) == rollout
    # Codex's Stop hook gives the path itself (or null, then its session id is the thread).
    stop = {"hook_event_name": "Stop", "session_id": thread, "transcript_path": None, "cwd": "/w"}
    assert hook.session_file("codex", stop, settings) == rollout
    assert hook.session_file("codex", {"thread-id": "../etc"}, settings) is None


def test_kimi_derives_the_wire_log_from_session_and_work_dir(settings: Settings) -> None:
    cwd = "/home/dev/shop"
    wire = session_file(
        settings.kimi_dir / "sessions" / hashlib.md5(cwd.encode()).hexdigest() / "abc" / "wire.jsonl", "abc", 1
    )
    assert hook.session_file("kimi", {"hook_event_name": "Stop", "session_id": "abc", "cwd": cwd}, settings) == wire
    # A work dir that moved: found by the session id alone.
    assert hook.session_file("kimi", {"session_id": "abc", "cwd": "/elsewhere"}, settings) == wire
    assert hook.session_file("kimi", {"session_id": "nope", "cwd": cwd}, settings) is None


def test_gemini_places_a_chat_that_names_no_path_by_the_hooks_cwd(tmp_path: Path) -> None:
    # Issue 37.3: a chat whose records name no path (a greeting, an explanation) has only its projectHash,
    # the sha256 of the project root; gemini-cli sends that root as the hook's cwd. Its turns were never
    # captured, though `install --check` said the hook ran.
    cwd = "/home/ada/orbit"
    digest = hashlib.sha256(cwd.encode()).hexdigest()
    chat = tmp_path / "gemini" / "tmp" / digest / "chats" / "session-2026-01-01T10-00-5b959dae.json"
    chat.parent.mkdir(parents=True)
    chat.write_text(
        json.dumps(
            {
                "sessionId": "5b959dae",
                "projectHash": digest,
                "messages": [
                    {"id": "1", "type": "user", "content": "hi", "timestamp": "2026-01-01T10:00:00Z"},
                    {
                        "id": "2",
                        "type": "gemini",
                        "content": "Hello! How can I help?",
                        "timestamp": "2026-01-01T10:00:02Z",
                    },
                ],
            }
        )
    )
    settings = Settings.from_env({}, data_dir=tmp_path / "data", gemini_dir=tmp_path / "gemini")
    payload = {"session_id": "5b959dae", "transcript_path": str(chat), "cwd": cwd, "hook_event_name": "AfterAgent"}
    assert hook.capture("gemini", payload, settings, send=False) == 2
    with CaptureState.open(settings.capture_db) as state:
        assert {(s.payload["content"], s.payload["project"]) for s in state.spooled(10)} == {
            ("hi", cwd),
            ("Hello! How can I help?", cwd),
        }


def test_kimi_finds_the_context_log_of_a_session_before_the_wire_and_kimi_codes_wire(settings: Settings) -> None:
    cwd = "/testbed"
    folder = hashlib.md5(cwd.encode()).hexdigest()
    log = session_file(settings.kimi_dir / "sessions" / folder / "531d195b.jsonl", "531d195b", 1)
    assert hook.session_file("kimi", {"hook_event_name": "Stop", "session_id": "531d195b", "cwd": cwd}, settings) == log
    code = (
        settings.kimi_dir.parent / ".kimi-code" / "sessions" / "wd_1" / "session_7" / "agents" / "main" / "wire.jsonl"
    )
    wire = session_file(code, "session_7", 1)
    assert (
        hook.session_file("kimi", {"hook_event_name": "Stop", "session_id": "session_7", "cwd": cwd}, settings) == wire
    )


def test_codex_notify_json_is_the_last_argument() -> None:
    payload = read_payload(["--data-dir", "/d", '{"type": "agent-turn-complete", "thread-id": "t"}'], io.StringIO(""))
    assert payload == {"type": "agent-turn-complete", "thread-id": "t"}
    assert read_payload([], io.StringIO('{"hook_event_name": "Stop"}')) == {"hook_event_name": "Stop"}
    assert read_payload([], io.StringIO("not json")) == {}
    assert read_payload([], io.StringIO("[1, 2]")) == {}


def test_session_start_without_the_recall_side_prints_nothing() -> None:
    assert dispatch("claude-code", {"hook_event_name": "SessionStart", "source": "startup"}) == ""


@pytest.mark.parametrize(
    "argv, stdin",
    [
        (["claude-code"], "garbage"),
        (["claude-code"], '{"hook_event_name": "Stop", "transcript_path": "/no/such/file.jsonl"}'),
        (["nonsense-host"], "{}"),
        ([], ""),
        (["codex", "--data-dir"], ""),
    ],
)
def test_whatever_happens_a_hook_exits_0_with_nothing_on_stdout(
    argv: list[str], stdin: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    monkeypatch.setenv("MEMSTREAM_DATA_DIR", str(tmp_path))
    assert main(argv, stdin=io.StringIO(stdin), stdout=out) == 0
    assert out.getvalue() == ""


def test_the_hook_command_exits_0_fast_with_memstream_down(tmp_path: Path) -> None:
    transcript = session_file(tmp_path / "s1.jsonl", "s1", 2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    payload = json.dumps({"session_id": "s1", "transcript_path": str(transcript), "hook_event_name": "Stop"})
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "memstream.cli", "hook", "claude-code", "--data-dir", str(tmp_path / "data")],
        input=payload,
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        timeout=60,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout) == (0, "")
    assert time.monotonic() - began < 60  # bounded; the figure itself is bench/perf/capture.py's


def test_the_hook_imports_no_faust_kafka_or_sdk(tmp_path: Path) -> None:
    transcript = session_file(tmp_path / "s1.jsonl", "s1", 2)
    payload = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript)})
    probe = (
        "import sys, io; from memstream.hooks import main; "
        f"main(['claude-code'], stdin=io.StringIO({payload!r})); "
        "heavy = [m for m in ('faust', 'aiokafka', 'anthropic', 'google.genai', 'xai_sdk', 'voyageai', "
        "'qdrant_client', 'numpy', 'opentelemetry') if m in sys.modules]; print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "MEMSTREAM_DATA_DIR": str(tmp_path)},
        timeout=60,
    )
    assert done.stdout.strip() == "[]", done.stderr


def test_codex_notify_through_the_cli_module_finds_the_rollout(tmp_path: Path) -> None:
    thread = "0199a5c2-7e41-7d13-9b1f-52c0e8a4d6f1"
    codex = tmp_path / "codex"
    rollout = session_file(
        codex / "sessions" / "2026" / "02" / "03" / f"rollout-2026-02-03T10-00-00-{thread}.jsonl", thread, 2
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    notify = json.dumps({"type": "agent-turn-complete", "thread-id": thread, "turn-id": "1", "cwd": "/w"})
    done = subprocess.run(
        [sys.executable, "-m", "memstream.cli", "hook", "codex", "--data-dir", str(tmp_path / "data"), notify],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT), "MEMSTREAM_CODEX_DIR": str(codex)},
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert (done.returncode, done.stdout) == (0, "")
    with CaptureState.open(tmp_path / "data" / "capture.db") as state:
        assert state.checkpoint(str(rollout)) is not None  # found by thread id and read (its format: the test's)


@pytest.fixture
def running_up(settings: Settings) -> Iterator[int]:
    """A process standing in for a `memstream up` taking the hooks' notes on the data dir."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "memstream", "up"])
    deadline = time.monotonic() + 30
    while b"memstream" not in Path(f"/proc/{child.pid}/cmdline").read_bytes():  # until it has exec'd
        assert time.monotonic() < deadline
        time.sleep(0.01)
    queue = settings.data_dir / "hook-queue"
    queue.mkdir(parents=True)
    # As up's claim() writes it, less the newline: the script must read it all the same.
    (queue / "taker.pid").write_text(f"{child.pid} {identity(child.pid)}")
    try:
        yield child.pid
    finally:
        child.kill()
        child.wait()


def test_with_up_running_a_hook_leaves_a_note_and_up_captures_from_it(
    settings: Settings, tmp_path: Path, running_up: int
) -> None:
    from memstream.capture.handoff import pending_notes, run_marker
    from memstream.capture.watch import take_notes

    transcript = session_file(tmp_path / "claude" / "s1.jsonl", "s1", 2)
    payload = {"session_id": "s1", "transcript_path": str(transcript), "hook_event_name": "Stop"}
    out = io.StringIO()
    argv = ["claude-code", "--data-dir", str(settings.data_dir)]
    assert main(argv, stdin=io.StringIO(json.dumps(payload)), stdout=out) == 0
    assert out.getvalue() == ""
    # The hook never waited on capture.db: it did not open it at all.
    assert not settings.capture_db.exists()
    assert len(pending_notes(settings.data_dir)) == 1
    assert take_notes(settings, FakeFormats()) == 1
    assert spool(settings) == [f"message {i} of the session" for i in range(2)]
    assert pending_notes(settings.data_dir) == []
    assert run_marker(settings.data_dir, "claude-code", "Stop").exists()  # `up` marked the run


def test_session_start_is_never_handed_off(settings: Settings, running_up: int) -> None:
    from memstream.capture.handoff import hand_off, pending_notes

    payload = json.dumps({"hook_event_name": "SessionStart", "session_id": "s1"}).encode()
    assert not hand_off(str(settings.data_dir), "claude-code", payload)
    assert main(["claude-code", "--data-dir", str(settings.data_dir)], stdin=io.StringIO(payload.decode())) == 0
    assert pending_notes(settings.data_dir) == []


def test_a_stale_taker_file_is_not_trusted(settings: Settings, tmp_path: Path) -> None:
    from memstream.capture.handoff import taker_alive

    queue = settings.data_dir / "hook-queue"
    queue.mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "60"])  # alive, but not memstream: a reused pid
    try:
        (queue / "taker.pid").write_text(f"{sleeper.pid} an-earlier-boot:12345\n")
        assert not taker_alive(str(settings.data_dir))
    finally:
        sleeper.kill()
        sleeper.wait()
    (queue / "taker.pid").write_text(f"{sleeper.pid} {identity(sleeper.pid)}\n")  # dead now
    assert not taker_alive(str(settings.data_dir))
    (queue / "taker.pid").write_text(f"{sleeper.pid}\n")  # an older up's file: no identity
    assert not taker_alive(str(settings.data_dir))


def test_a_pid_reused_by_another_memstream_process_is_not_taken_for_up(settings: Settings, tmp_path: Path) -> None:
    """up crashed and left taker.pid; its pid now belongs to a hook or `memstream mcp` (same venv, same word
    in its command line). Neither the Python hook nor the shell script may hand off to it."""
    from memstream.capture.handoff import pending_notes, taker_alive

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "memstream", "mcp"])
    try:
        deadline = time.monotonic() + 30
        while b"memstream" not in Path(f"/proc/{other.pid}/cmdline").read_bytes():  # until it has exec'd
            assert time.monotonic() < deadline
            time.sleep(0.01)
        queue = settings.data_dir / "hook-queue"
        queue.mkdir(parents=True)
        script = installed_script(settings)
        # As an up of before wrote it (the pid alone), and as a crashed up of now left it (another identity).
        for n, left_behind in enumerate([f"{other.pid}\n", f"{other.pid} an-earlier-boot:12345\n"]):
            (queue / "taker.pid").write_text(left_behind)
            assert not taker_alive(str(settings.data_dir))
            transcript = session_file(tmp_path / f"s{n}.jsonl", f"s{n}", 2)
            done = run_script(script, settings, {"transcript_path": str(transcript), "hook_event_name": "Stop"})
            assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
            assert pending_notes(settings.data_dir) == []  # no note for a process that will never take it
            with CaptureState.open(settings.capture_db) as state:
                assert state.checkpoint(str(transcript)) is not None  # the Python hook captured it itself
    finally:
        other.kill()
        other.wait()


def test_the_console_script_hands_off_importing_nothing_but_the_hand_off(
    settings: Settings, tmp_path: Path, running_up: int
) -> None:
    from memstream.capture.handoff import pending_notes

    transcript = session_file(tmp_path / "s1.jsonl", "s1", 2)
    payload = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript)})
    probe = (
        "import sys; from memstream.entry import hook; "
        f"code = hook(['claude-code', '--data-dir', {str(settings.data_dir)!r}]); "
        "print(code, sorted(m for m in sys.modules if m.startswith('memstream') or m in ('json', 'pathlib')))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        input=payload,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert (
        done.stdout.strip()
        == "0 ['memstream', 'memstream.capture', 'memstream.capture.handoff', 'memstream.entry', 'memstream.process']"
    ), done.stderr
    assert len(pending_notes(settings.data_dir)) == 1


def test_up_names_itself_as_the_taker_only_while_it_takes_notes(settings: Settings, tmp_path: Path) -> None:
    import asyncio

    from memstream.capture.watch import take_notes_forever

    taker = settings.data_dir / "hook-queue" / "taker.pid"

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(take_notes_forever(settings, interval=0.05, stop=stop, formats=FakeFormats()))
        try:
            deadline = time.monotonic() + 30
            while not taker.exists():
                assert time.monotonic() < deadline, "up never named itself"
                await asyncio.sleep(0.02)
            assert taker.read_text() == f"{os.getpid()} {identity(os.getpid())}\n"
        finally:
            stop.set()
            await task

    asyncio.run(scenario())
    assert not taker.exists()  # stopped: hooks capture by themselves again


def installed_script(settings: Settings) -> Path:
    from memstream.capture.handoff import hook_script

    script = settings.data_dir / "hook-bin" / "memstream"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(hook_script(str(Path(sys.executable).with_name("memstream")), settings.data_dir))
    script.chmod(0o755)
    return script


def run_script(script: Path, settings: Settings, payload: Mapping[str, object]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(script), "hook", "claude-code", "--data-dir", str(settings.data_dir)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")},
        timeout=60,
    )


def test_the_installed_hook_script_hands_off_to_up_in_shell(
    settings: Settings, tmp_path: Path, running_up: int
) -> None:
    from memstream.capture.handoff import pending_notes, read_note
    from memstream.capture.watch import take_notes

    script = installed_script(settings)
    transcript = session_file(tmp_path / "s1.jsonl", "s1", 2)
    payload = {"session_id": "s1", "transcript_path": str(transcript), "hook_event_name": "Stop"}
    done = run_script(script, settings, payload)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    notes = pending_notes(settings.data_dir)
    assert len(notes) == 1 and notes[0].name.endswith(".claude-code.json")
    assert len(notes[0].name.split("-")[0]) == 6  # mktemp's name: the shell left it, not the Python hook
    assert read_note(notes[0]) is not None and read_note(notes[0])[2] == payload  # type: ignore[index]
    assert not settings.capture_db.exists()
    assert take_notes(settings, FakeFormats()) == 1
    assert spool(settings) == [f"message {i} of the session" for i in range(2)]
    # SessionStart is answered by the Python hook, never left as a note.
    done = run_script(script, settings, {"hook_event_name": "SessionStart", "session_id": "s1"})
    assert done.returncode == 0 and pending_notes(settings.data_dir) == []
    assert [p.name for p in (settings.data_dir / "hook-queue").iterdir()] == ["taker.pid"]  # no leftover


def test_the_installed_hook_script_runs_the_python_hook_when_up_is_down(settings: Settings, tmp_path: Path) -> None:
    script = installed_script(settings)
    transcript = session_file(tmp_path / "s1.jsonl", "s1", 2)
    done = run_script(script, settings, {"transcript_path": str(transcript), "hook_event_name": "Stop"})
    assert (done.returncode, done.stdout) == (0, "")
    with CaptureState.open(settings.capture_db) as state:
        assert state.checkpoint(str(transcript)) is not None  # the Python hook read the file itself


def test_up_taking_a_note_starts_no_flusher_even_with_a_configured_kafka(
    settings: Settings, tmp_path: Path, running_up: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    from memstream.capture.handoff import hand_off
    from memstream.capture.watch import take_notes

    started: list[Settings] = []
    monkeypatch.setattr(hook, "start_flusher", started.append)
    transcript = session_file(tmp_path / "s1.jsonl", "s1", 2)
    payload = {"transcript_path": str(transcript), "hook_event_name": "Stop"}
    assert hand_off(str(settings.data_dir), "claude-code", json.dumps(payload).encode())
    with_kafka = dataclasses.replace(settings, kafka_bootstrap="127.0.0.1:9")
    assert take_notes(with_kafka, FakeFormats()) == 1
    assert len(spool(settings)) == 2 and started == []  # up's own drain sends the spool


def test_hook_help_says_what_the_command_is_for_not_unknown_host() -> None:
    # `memstream hook --help` printed "unknown host '--help'" (issue 37.7).
    # With no argument at all it says the same on stderr: a hook's stdout is what its host reads back.
    for asked, shown_on in ((["--help"], "stdout"), (["-h"], "stdout"), ([], "stderr")):
        done = subprocess.run(
            [sys.executable, "-m", "memstream.cli", "hook", *asked],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=60,
        )
        shown, other = (done.stdout, done.stderr) if shown_on == "stdout" else (done.stderr, done.stdout)
        assert done.returncode == 0 and other == "", other
        assert shown.startswith("usage: memstream hook HOST [--data-dir DIR] [PAYLOAD]")
        assert "claude-code" in shown and "unknown host" not in shown


def test_kimi_codes_wire_is_found_under_kimi_code_home(tmp_path: Path) -> None:
    """Kimi Code keeps its sessions in ``$KIMI_CODE_HOME/sessions`` (MoonshotAI/kimi-code: ``resolveKimiHome``,
    ``KIMI_CODE_HOME`` else ``~/.kimi-code``), wherever Kimi CLI's ``~/.kimi`` is."""
    settings = Settings.from_env(
        {"KIMI_CODE_HOME": str(tmp_path / "kc")}, data_dir=tmp_path / "data", kimi_dir=tmp_path / "kimi"
    )
    wire = session_file(
        tmp_path / "kc" / "sessions" / "wd_1" / "session_9" / "agents" / "main" / "wire.jsonl", "session_9", 1
    )
    payload = {"hook_event_name": "Stop", "session_id": "session_9", "cwd": "/testbed"}
    assert hook.session_file("kimi", payload, settings) == wire
