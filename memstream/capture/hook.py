"""Live capture from the coding CLIs' hooks: find the session file, read it from its checkpoint, spool, send.

A hook call must never slow or break the agent. While a ``memstream up`` runs on the data dir, the hook
only leaves its payload for it (:mod:`memstream.capture.handoff`) and ``up`` runs :func:`capture` on it.
Otherwise the hook runs :func:`capture` itself: it imports no Faust, Kafka client or SDK, reads the
session file from its checkpoint and writes the new turns to the spool (durable, see
:mod:`memstream.capture.state`), then hands the sending to a detached ``memstream.capture.flusher``
process when memstream publishes to a Kafka of its own, and returns. When memstream is down the turns
wait in the spool; ``memstream up`` (at start), ``memstream ingest`` or, with a configured Kafka, the next
hook call sends them. Claude Code's ``Stop`` can fire before the reply's last lines reach the disk: they
are after the checkpoint, so the next call reads them.

Where each host's session file is (from the hosts' own sources and docs):

- Claude Code (``Stop``, ``SessionEnd``): ``transcript_path`` in the JSON on stdin.
- Codex's ``Stop`` hook gives ``transcript_path`` (nullable) and ``session_id`` (the thread). A ``notify``
  program (set by hand) gets ``{"type": "agent-turn-complete", "thread-id", "turn-id", "cwd", …}`` as its
  last argument, with no path: the rollout is ``sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``
  under the Codex home.
- Gemini CLI (``AfterAgent``, ``SessionEnd``): ``transcript_path`` on stdin.
- Kimi CLI (``Stop``, ``SessionEnd``): only ``session_id`` and ``cwd``: the wire log is
  ``sessions/<md5 of cwd>/<session id>/wire.jsonl`` under the Kimi home (else found by session id).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

from memstream import hosts
from memstream.capture.model import Source
from memstream.settings import Settings

#: The hosts ``memstream hook`` serves, and the session format each writes.
HOSTS: dict[str, Source] = {host.name: Source(host.llm_source) for host in hosts.HOSTS}
#: Events after which the session file is complete: its last line is read even without a newline.
FINAL_EVENTS = frozenset({"SessionEnd"})
#: Hosts whose hook ``cwd`` is the session's project, for a file whose records cannot name it: gemini-cli
#: files a chat under the sha256 of that folder and Kimi under its md5, so a chat that names no path has
#: only the hash (issue 37.3). Claude Code's and Codex's files always name it; Claude Code's hook cwd
#: follows the agent's ``cd``.
CWD_IS_PROJECT = frozenset({"gemini", "kimi"})


def session_file(host: str, payload: dict[str, Any], settings: Settings) -> Path | None:
    """The session file a hook payload is about, or None if it cannot be found."""
    transcript = payload.get("transcript_path")
    if isinstance(transcript, str) and transcript:
        return Path(transcript).expanduser()
    if host == "codex":
        thread = payload.get("thread-id") or payload.get("thread_id") or payload.get("session_id")
        return codex_rollout(settings.codex_dir.expanduser(), str(thread)) if thread else None
    if host == "kimi":
        session = payload.get("session_id")
        return (
            kimi_wire(
                settings.kimi_dir.expanduser(),
                str(session),
                str(payload.get("cwd") or ""),
                code_home=settings.kimi_code_dir.expanduser(),
            )
            if session
            else None
        )
    return None


def codex_rollout(codex_home: Path, thread_id: str) -> Path | None:
    """The rollout file of a Codex thread: newest day folders first, so a live session is found at once."""
    if not thread_id or "/" in thread_id:
        return None
    sessions = codex_home / "sessions"
    pattern = f"rollout-*-{thread_id}.jsonl"
    try:
        for year in sorted(sessions.iterdir(), reverse=True):
            for month in sorted(year.iterdir(), reverse=True):
                for day in sorted(month.iterdir(), reverse=True):
                    found = sorted(day.glob(pattern))
                    if found:
                        return found[-1]
    except (FileNotFoundError, NotADirectoryError):
        pass
    archived = sorted((codex_home / "archived_sessions").glob(pattern))
    return archived[-1] if archived else None


def kimi_wire(kimi_home: Path, session_id: str, cwd: str, *, code_home: Path | None = None) -> Path | None:
    """A Kimi session's log: Kimi CLI's wire under the md5 of its work dir (else wherever the session is),
    the context log that was the only record before the wire (``sessions/<md5>/<session>.jsonl``), or Kimi
    Code's main wire (``<code_home>/sessions/<workspace>/<session>/agents/main/wire.jsonl``; Kimi Code's home is
    ``KIMI_CODE_HOME``, else ``~/.kimi-code``, also looked for beside ``kimi_home``)."""
    if not session_id or "/" in session_id or session_id.startswith("."):
        return None
    sessions = kimi_home / "sessions"
    if cwd:
        folder = sessions / hashlib.md5(cwd.encode()).hexdigest()
        for direct in (folder / session_id / "wire.jsonl", folder / f"{session_id}.jsonl"):
            if direct.is_file():
                return direct
    codes = dict.fromkeys(home / "sessions" for home in (code_home, kimi_home.parent / ".kimi-code") if home)
    for pattern, root in (
        (f"*/{session_id}/wire.jsonl", sessions),
        (f"*/{session_id}.jsonl", sessions),
        *((f"*/{session_id}/agents/main/wire.jsonl", code) for code in codes),
    ):
        found = sorted(root.glob(pattern))
        if found:
            return found[0]
    return None


def capture(host: str, payload: dict[str, Any], settings: Settings, *, formats: Any = None, send: bool = True) -> int:
    """Spool the new turns of the payload's session file; start a flusher if memstream is up.

    Returns how many new turns were spooled. Raises only on a broken state file (the dispatcher
    swallows it: a hook never fails the agent).
    """
    from memstream.capture.ingest import Capture, CliFormats
    from memstream.capture.state import CaptureState

    path = session_file(host, payload, settings)
    if path is None or not path.is_file():
        return 0
    event = str(payload.get("hook_event_name") or payload.get("type") or "")
    cwd = payload.get("cwd")
    project = cwd if host in CWD_IS_PROJECT and isinstance(cwd, str) and os.path.isabs(cwd) else ""
    with CaptureState.open(settings.capture_db) as state:
        capture = Capture(state, formats or CliFormats(settings.capture_roots), project=project)
        ended = event in FINAL_EVENTS
        outcome = capture.file(path, HOSTS[host], final=ended, host_ended=ended)
        waiting = state.spool_size()
    if waiting and send:  # `up` taking a hook's note sends the spool itself (send=False)
        start_flusher(settings)
    return len(outcome.new)


def start_flusher(settings: Settings) -> bool:
    """Send the spool from a detached process when it is this hook's job.

    A running ``memstream up`` on this data dir drains the spool itself (about once a second): the hook
    starts nothing. Without one, a configured Kafka (``MEMSTREAM_KAFKA_BOOTSTRAP``) is published to by a
    detached flusher. Neither: memstream is down, and the spool waits for ``memstream up``.
    """
    from memstream.runtime import read_runtime_file

    if not settings.kafka_bootstrap or read_runtime_file(settings) is not None:
        return False
    import subprocess  # only here: a hook that starts no flusher does not pay for importing it

    env = {**os.environ, "MEMSTREAM_DATA_DIR": str(settings.data_dir.resolve())}
    subprocess.Popen(
        [sys.executable, "-m", "memstream.capture.flusher"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    return True
