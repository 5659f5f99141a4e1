"""`memstream up` on one data dir, stopped at a random instant while acknowledged exchanges are in
flight, started again: the harness of tests/faults/test_durable_up.py and bench/faults/durable.py.

Raw mode by default; ``llm`` makes it LLM mode against a fake Anthropic API (tests/fakes) that takes
``delay`` seconds per answer, and the memories expected are its one note per exchange."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memstream.kafka.broker import free_port
from tests.support.group import GROUP_ENV

ROOT = Path(__file__).resolve().parents[2]
_WORDS = """apple river kernel socket tensor garden violin compiler harbor pixel lattice meadow quartz rocket
saddle thunder velvet walnut yogurt zebra anchor biscuit canyon dolphin engine falcon glacier hammer
igloo jasmine kettle lantern mosaic nectar orchid pepper quiver raven sapphire tulip umbrella vortex
whistle xenon yacht zipper acorn bamboo cactus daisy ember fjord gravel hazel ivory jungle koala
lemon mango nickel olive parrot"""
WORDS = _WORDS.split()


#: The most words two answers of a :func:`workload` share.
SHARED_WORDS_MAX = 5


def workload(
    root: Path, *, sessions: int, exchanges: int, projects: int, seed: int, llm: bool = False
) -> tuple[str, list[str]]:
    """JSONL of turns interleaved across sessions, and the memory texts raw mode (``llm``: the fake
    model's one note per exchange) must make of them. Random words keep every exchange far from
    every other, so semantic dedup merges none: no two answers share more than
    :data:`SHARED_WORDS_MAX` words (an LLM run lost a note to the bundled embedder's dedup, 0.0497 from
    one sharing 8 of its 12 words, below its 0.05)."""
    rng = random.Random(seed)
    lines, expected = [], []
    answers: list[set[str]] = []
    for p in range(projects):
        (root / f"p{p}").mkdir(parents=True, exist_ok=True)
    for e in range(exchanges):
        for s in range(sessions):
            question = f"{' '.join(rng.sample(WORDS, 12))} {s}-{e}?"
            words = rng.sample(WORDS, 12)
            for _ in range(1_000):  # a workload far larger than 300 exchanges may not find one: take the last
                if all(len(other.intersection(words)) <= SHARED_WORDS_MAX for other in answers):
                    break
                words = rng.sample(WORDS, 12)
            answers.append(set(words))
            answer = f"{' '.join(words)}."
            for role, content in (("user", question), ("assistant", answer)):
                turn = {"session_id": f"s{s}", "project": str(root / f"p{s % projects}"), "role": role}
                lines.append(json.dumps({**turn, "content": content}))
            memory = f"Note: {answer}" if llm else f"[user] {question}\n[assistant] {answer}"
            expected.append(" ".join(memory.split()))
    return "\n".join(lines) + "\n", expected


class Up:
    """`memstream up` in a process group of its own (as in a terminal), on one data dir."""

    def __init__(self, data_dir: Path, log: Path, **extra_env: str) -> None:
        self.data_dir, self.log = data_dir, log
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_", "VOYAGE_", "XAI_"))}
        env.pop("GEMINI_API_KEY", None)
        env.pop("GOOGLE_API_KEY", None)
        self.env = {
            **env,
            "PYTHONPATH": str(ROOT),
            "MEMSTREAM_DATA_DIR": str(data_dir),
            "MEMSTREAM_PARTITIONS": "2",
            "MEMSTREAM_API_OPEN": "true",  # the harness reads /memories as the one local user
            "MEMSTREAM_USER": "dev@example.com",
            "MEMSTREAM_HTTP_HOST": "127.0.0.1",
            "MEMSTREAM_LOG_LEVEL": "info",
            **GROUP_ENV,
            **extra_env,
        }

    def start(self) -> None:
        self.port = free_port()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "memstream.cli", "up"],
                env={**self.env, "MEMSTREAM_HTTP_PORT": str(self.port)},
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=self.data_dir.parent,
                start_new_session=True,
            )

    def signal_group(self, sig: int) -> None:
        """``sig`` to up's process group and to every process under up (a broker in a group of its
        own included), as a power loss (SIGKILL) or a terminal's Ctrl-C (SIGINT) reaches them."""
        assert self.process is not None
        family = descendants(self.process.pid)
        os.killpg(self.process.pid, sig)
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        for pid in family:  # nothing of the old `up` may outlive it (its broker above all)
            deadline = time.monotonic() + 30
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)

    def signal_up(self, sig: int) -> None:
        """``sig`` to up's own pid only, as a service manager stops it, and wait until it has exited
        (its drain bound and grace are its own); anything of it left after that is killed."""
        assert self.process is not None
        family = descendants(self.process.pid)
        os.kill(self.process.pid, sig)
        try:
            self.process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        for pid in family:
            deadline = time.monotonic() + 30
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)

    def stop_as(self, how: str) -> None:
        """Stop up as ``how`` says: kill-9-group, sigint-group or sigterm-up."""
        if how == "kill-9-group":
            self.signal_group(signal.SIGKILL)
        elif how == "sigint-group":
            self.signal_group(signal.SIGINT)
        elif how == "sigterm-up":
            self.signal_up(signal.SIGTERM)
        else:
            raise ValueError(how)

    async def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"up exited with {self.process.returncode}; see {self.log}")
            try:
                runtime = json.loads((self.data_dir / "runtime.json").read_text())
            except (OSError, ValueError):
                runtime = {}
            if runtime.get("ready") and runtime.get("pid") == self.process.pid:
                return
            await asyncio.sleep(0.2)
        raise TimeoutError(f"up not ready within {timeout}s; see {self.log}")

    def memory_texts(self, prefix: str = "") -> list[str] | None:
        """The stored memories' texts that start with ``prefix`` (None: up does not answer)."""
        try:
            url = f"http://127.0.0.1:{self.port}/memories?limit=100000"
            with urllib.request.urlopen(url, timeout=30) as response:
                texts = [str(m["text"]) for m in json.loads(response.read())["memories"]]
                return [text for text in texts if text.startswith(prefix)]
        except (OSError, ValueError):
            return None

    def publish(self, path: Path) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "memstream.cli", "publish", "--file", str(path)],
            env=self.env,
            cwd=self.data_dir.parent,
            capture_output=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr.decode()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.signal_group(signal.SIGKILL)


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (its parent, the killed `up`, is gone) is dead for this purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def settle(up: Up, expected: list[str], timeout: float, *, prefix: str = "") -> list[str]:
    """The memories once every expected one is stored, or what there is at the deadline."""
    deadline = time.monotonic() + timeout
    texts: list[str] = []
    while time.monotonic() < deadline:
        found: list[str] | None = await asyncio.to_thread(up.memory_texts, prefix)
        texts = found or texts
        if set(expected) <= {" ".join(t.split()) for t in texts}:
            await asyncio.sleep(3)  # a duplicate would show now, if it were coming
            found = await asyncio.to_thread(up.memory_texts, prefix)
            return found or texts
        await asyncio.sleep(1)
    return texts


def verdict(expected: list[str], texts: list[str]) -> tuple[int, int, int]:
    """(lost, duplicated, unexpected)."""
    counts = Counter(" ".join(t.split()) for t in texts)
    lost = len(set(expected) - set(counts))
    duplicated = sum(n - 1 for text, n in counts.items() if n > 1 and text in set(expected))
    return lost, duplicated, sum(n for text, n in counts.items() if text not in set(expected))


@dataclass
class Run:
    """One run's outcome: how up was stopped, and what became of the exchanges."""

    how: str
    llm: bool
    seed: int
    expected: int
    stored: int
    lost: int
    duplicated: int
    unexpected: int
    seconds: float
    log: str
    #: Missing at the deadline but stored within the grace after it (slow, not lost).
    late: int = 0
    #: Faust's "producer buffer full" warnings in up's log (flow control on the backlog, not a fault).
    buffer_warnings: int = 0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def slow_notes(delay: float, asked: Path | None = None) -> Any:
    """The fake model: one note per exchange (tests/e2e/test_replay_e2e.one_note_per_turn), each
    answer ``delay`` seconds late, as a slow (local) model is. ``asked``: a JSONL file that keeps each
    request's last message and the answer, so a run with a note missing shows what the model was given
    (the note is made of the request's *last* assistant line only)."""
    from tests.e2e.test_replay_e2e import one_note_per_turn

    async def answer(request: dict[str, Any]) -> str:
        await asyncio.sleep(delay)
        answered = one_note_per_turn(request)
        if asked is not None:
            with asked.open("a") as out:
                out.write(json.dumps({"asked": request["messages"][-1]["content"], "answered": answered}) + "\n")
        return answered

    return answer


async def stopped_and_started(
    workdir: Path,
    how: str,
    *,
    llm: bool = False,
    delay: float = 0.5,
    sessions: int = 60,
    exchanges: int = 5,
    projects: int = 7,
    seed: int | None = None,
    within: float = 3.0,
    timeout: float = 600,
    grace: float = 0,
) -> Run:
    """Start up on a fresh data dir, publish ``sessions * exchanges`` exchanges with ``memstream
    publish --file`` (acknowledged when it exits 0), stop up as ``how`` at a random instant up to
    ``within`` s later, start it again on the same data dir and wait for every memory. ``grace``: when
    some are missing at the ``timeout``, how much longer to wait and count those that come as late."""
    began = time.monotonic()
    seed = random.randrange(1_000_000) if seed is None else seed
    rng = random.Random(seed)
    text, expected = workload(
        workdir / "projects", sessions=sessions, exchanges=exchanges, projects=projects, seed=seed, llm=llm
    )
    turns = workdir / "turns.jsonl"
    turns.write_text(text)
    with contextlib.ExitStack() as stack:
        env: dict[str, str] = {}
        if llm:
            from tests.fakes.anthropic_server import FakeAnthropic

            claude = stack.enter_context(FakeAnthropic(slow_notes(delay, workdir / "model.jsonl"), api_key="sk-test"))
            env = {"ANTHROPIC_API_KEY": "sk-test", "MEMSTREAM_ANTHROPIC_BASE_URL": claude.base_url}
        up = Up(workdir / "data", workdir / "up.log", **env)
        up.data_dir.mkdir(parents=True)
        up.start()
        try:
            await up.wait_ready()
            await asyncio.to_thread(up.publish, turns)  # exits 0: every turn acknowledged
            await asyncio.sleep(rng.uniform(0.0, within))
            await asyncio.to_thread(up.stop_as, how)
            up.start()
            await up.wait_ready()
            prefix = "Note: " if llm else ""
            texts = await settle(up, expected, timeout=timeout, prefix=prefix)
            missing_at_deadline = verdict(expected, texts)[0]
            if missing_at_deadline and grace > 0:
                texts = await settle(up, expected, timeout=grace, prefix=prefix)
        finally:
            up.stop()
    lost, duplicated, unexpected = verdict(expected, texts)
    late = missing_at_deadline - lost
    seconds = time.monotonic() - began
    warned = up.log.read_text(errors="replace").count("producer buffer full")
    return Run(
        how, llm, seed, len(expected), len(texts), lost, duplicated, unexpected, seconds, str(up.log), late, warned
    )
