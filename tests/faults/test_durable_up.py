"""The default install keeps what it acknowledged (issue 35): `memstream up` with its embedded broker,
killed as a whole, loses no turn `memstream publish` was told was published.

A real ``memstream up`` on a fresh data dir (raw mode, the embedded broker as its child), 300
exchanges published with ``memstream publish --file`` (which exits 0 once they are acknowledged),
then up's whole process group -- the broker with it -- is killed (SIGKILL) or interrupted (SIGINT)
at a random instant, and ``up`` is started again on the same data dir: every exchange becomes its
memory, exactly once. Before the durable turn log, most were lost (the broker's memory was the only
copy): with ``MEMSTREAM_TURN_LOG=off`` this test stored 0 of 300.
"""

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
from pathlib import Path

import pytest

from memstream.kafka.broker import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio]

ROOT = Path(__file__).resolve().parents[2]
_WORDS = """apple river kernel socket tensor garden violin compiler harbor pixel lattice meadow quartz rocket
saddle thunder velvet walnut yogurt zebra anchor biscuit canyon dolphin engine falcon glacier hammer
igloo jasmine kettle lantern mosaic nectar orchid pepper quiver raven sapphire tulip umbrella vortex
whistle xenon yacht zipper acorn bamboo cactus daisy ember fjord gravel hazel ivory jungle koala
lemon mango nickel olive parrot"""
WORDS = _WORDS.split()


def workload(root: Path, *, sessions: int, exchanges: int, projects: int, seed: int) -> tuple[str, list[str]]:
    """JSONL of turns interleaved across sessions, and the memory texts raw mode must make of them.
    Random words keep every exchange far from every other, so semantic dedup merges none."""
    rng = random.Random(seed)
    lines, expected = [], []
    for p in range(projects):
        (root / f"p{p}").mkdir(parents=True, exist_ok=True)
    for e in range(exchanges):
        for s in range(sessions):
            question = f"{' '.join(rng.sample(WORDS, 12))} {s}-{e}?"
            answer = f"{' '.join(rng.sample(WORDS, 12))}."
            for role, content in (("user", question), ("assistant", answer)):
                turn = {"session_id": f"s{s}", "project": str(root / f"p{s % projects}"), "role": role}
                lines.append(json.dumps({**turn, "content": content}))
            expected.append(" ".join(f"[user] {question}\n[assistant] {answer}".split()))
    return "\n".join(lines) + "\n", expected


class Up:
    """`memstream up` in a process group of its own (as in a terminal), on one data dir."""

    def __init__(self, data_dir: Path, log: Path) -> None:
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

    def memory_texts(self) -> list[str] | None:
        try:
            url = f"http://127.0.0.1:{self.port}/memories?limit=100000"
            with urllib.request.urlopen(url, timeout=30) as response:
                return [str(m["text"]) for m in json.loads(response.read())["memories"]]
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


async def settle(up: Up, expected: list[str], timeout: float) -> list[str]:
    """The memories once every expected one is stored, or what there is at the deadline."""
    deadline = time.monotonic() + timeout
    texts: list[str] = []
    while time.monotonic() < deadline:
        found: list[str] | None = await asyncio.to_thread(up.memory_texts)
        texts = found or texts
        if set(expected) <= {" ".join(t.split()) for t in texts}:
            await asyncio.sleep(3)  # a duplicate would show now, if it were coming
            found = await asyncio.to_thread(up.memory_texts)
            return found or texts
        await asyncio.sleep(1)
    return texts


def verdict(expected: list[str], texts: list[str]) -> tuple[int, int, int]:
    """(lost, duplicated, unexpected)."""
    counts = Counter(" ".join(t.split()) for t in texts)
    lost = len(set(expected) - set(counts))
    duplicated = sum(n - 1 for text, n in counts.items() if n > 1 and text in set(expected))
    return lost, duplicated, sum(n for text, n in counts.items() if text not in set(expected))


@pytest.mark.timeout(900)  # two starts and 300 exchanges embedded: minutes on a loaded 2-core runner
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill-9-group", "sigint-group"])
async def test_up_stopped_as_a_whole_keeps_every_acknowledged_exchange(tmp_path: Path, sig: int) -> None:
    seed = random.randrange(1_000_000)
    text, expected = workload(tmp_path / "projects", sessions=60, exchanges=5, projects=7, seed=seed)
    turns = tmp_path / "turns.jsonl"
    turns.write_text(text)
    up = Up(tmp_path / "data", tmp_path / "up.log")
    up.data_dir.mkdir()
    up.start()
    try:
        await up.wait_ready()
        await asyncio.to_thread(up.publish, turns)  # exits 0: all 600 turns acknowledged
        await asyncio.sleep(random.uniform(0.0, 3.0))
        up.signal_group(sig)
        up.start()
        await up.wait_ready()
        texts = await settle(up, expected, timeout=600)
    finally:
        up.stop()
    lost, duplicated, unexpected = verdict(expected, texts)
    assert (lost, duplicated, unexpected) == (0, 0, 0), f"seed {seed}: {len(texts)} memories; see {up.log}"
    assert len(texts) == len(expected) == 300
