"""Reads while the pipeline works through a backlog (issue 42): search, block and MCP latency, idle and
during a backlog of exchanges, beside the ingest rate of the same run.

    .venv/bin/python -m bench.read.read_under_load [--exchanges 1500] [--interval 0.25] [--source DIR]

Starts its own `memstream up` on the embedded default (Tansu, the in-process store, the bundled
embedder, raw mode) in a fresh data dir, stores a few exchanges and times each read ``--idle`` times;
then publishes ``--exchanges`` exchanges at once with `memstream publish --file` (as the issue did)
and asks one read every ``--interval`` seconds, search, block and MCP in turn, each over a new HTTP
connection as a hook or an agent asks, until every exchange is stored. The ingest rate is the
exchanges stored per second from the publish to the last one stored; ``--interval 0`` asks nothing
during the backlog, for the rate without reads. ``--source`` runs `up` from another source tree (the
previous commit's, from ``git archive``) with this one's Python, for a before and after on one machine.

Target (issue 42): during the backlog, p95 <= 100 ms and max <= 1 s for each read, the ingest rate
within 10% of the rate without reads. The load average is printed beside every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from memstream.kafka.broker import free_port

ROOT = Path(__file__).resolve().parents[2]
#: The issue's bound on a read during the backlog.
TARGET_P95_MS = 100.0
TARGET_MAX_MS = 1000.0
#: How long one read may take before it counts as failed (the issue saw 43 s).
READ_TIMEOUT_S = 120.0
_STORED = re.compile(r'^memstream_events_processed_total\{stage="store"\} ([0-9.e+]+)$', re.MULTILINE)
_WORDS = " ".join(
    [
        "deploy cache index migration token cookie session queue worker retry timeout port nginx redis postgres",
        "kafka topic partition offset schema version release branch merge rebase lint test fixture mock build",
        "docker image volume secret vault rotate certificate domain proxy header cors csrf login signup invoice",
    ]
).split()
QUERIES = ["which port does the staging database use", "how do we deploy", "retry timeout on the queue worker"]


def exchanges_file(path: Path, root: Path, count: int, sessions: int, seed: int, tag: str) -> None:
    """``count`` exchanges (a question and a reply of a few sentences), spread over ``sessions`` sessions
    in one project per five sessions, as JSON lines for `memstream publish --file`."""
    from bench.perf.embedder import answers

    rng = random.Random(seed)
    replies = answers(count, seed)
    with path.open("w") as out:
        for e in range(count):
            s = e % sessions
            question = f"{tag} {e}: {' '.join(rng.sample(_WORDS, 10))}?"
            for role, content in (("user", question), ("assistant", replies[e])):
                line = {"session_id": f"{tag}-s{s}", "project": str(root / f"p{s % max(1, sessions // 5)}")}
                out.write(json.dumps({**line, "role": role, "content": content}) + "\n")


class Up:
    """A `memstream up` process from ``source``, on a fresh data dir; stopped with SIGINT."""

    def __init__(self, workdir: Path, source: Path, extra: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}"
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_", "VOYAGE_"))}
        self.env = {
            **clean,
            "PYTHONPATH": str(source),
            "MEMSTREAM_DATA_DIR": str(workdir / "data"),
            "MEMSTREAM_HTTP_PORT": str(self.port),
            "MEMSTREAM_HTTP_HOST": "127.0.0.1",
            "MEMSTREAM_API_OPEN": "true",  # the one local user, no token to pass
            "MEMSTREAM_USER": "bench@example.com",
            "MEMSTREAM_LOG_LEVEL": "warning",
            **(extra or {}),
        }
        self.source = source
        self.log = workdir / "up.log"
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "memstream.cli", "up"],
                env=self.env,
                cwd=source,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # the bench's own Ctrl-C stops it through stop()
            )
        try:
            self._wait_ready()
        except BaseException:  # the bench stopped while `up` started (SIGTERM, Ctrl-C): leave nothing behind
            self.kill()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 180
        while status(f"{self.api}/health") != 200:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"memstream up did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.2)

    def publish(self, path: Path) -> float:
        """Seconds `memstream publish --file` took (until the broker acknowledged every turn)."""
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "memstream.cli", "publish", "--file", str(path)],
            env=self.env,
            cwd=self.source,
            capture_output=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"publish failed: {done.stderr.decode()[-2000:]}")
        return time.monotonic() - began

    def stored(self) -> int:
        """Memories the store stage has written (its own counter, read from /metrics)."""
        try:
            with urllib.request.urlopen(f"{self.api}/metrics", timeout=READ_TIMEOUT_S) as response:
                found = _STORED.search(response.read().decode())
        except OSError:
            return -1
        return int(float(found.group(1))) if found else 0

    def wait_stored(self, count: int, timeout: float, give_up: float = 0.0) -> int:
        """Wait until ``count`` memories are stored, or ``give_up`` seconds (0: never); how many are."""
        began = time.monotonic()
        while (stored := self.stored()) < count:
            if give_up and time.monotonic() - began > give_up:
                return stored
            if time.monotonic() - began > timeout:
                raise SystemExit(f"{stored} of {count} stored after {timeout:.0f}s")
            time.sleep(0.5)
        return stored

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        """SIGKILL to what is left of its session (a test that failed must leave nothing behind)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


def status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def reads(api: str, project: Path) -> dict[str, Callable[[str], None]]:
    """One call per kind of read, each over a new connection; raises unless it answered 200."""

    def get(path: str, timeout: float = READ_TIMEOUT_S) -> None:
        with urllib.request.urlopen(f"{api}{path}", timeout=timeout) as response:
            response.read()

    def search(query: str) -> None:
        get(f"/search?{urllib.parse.urlencode({'q': query, 'project': str(project)})}")

    def block(query: str) -> None:
        get(f"/block?{urllib.parse.urlencode({'project': str(project)})}")

    def mcp(query: str) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "search_memories", "arguments": {"query": query, "project": str(project)}},
        }
        request = urllib.request.Request(
            f"{api}/mcp",
            data=json.dumps(body).encode(),
            headers={
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-06-18",
            },
        )
        with urllib.request.urlopen(request, timeout=READ_TIMEOUT_S) as response:
            answer = json.loads(response.read())
        if "error" in answer or answer.get("result", {}).get("isError"):
            raise RuntimeError(f"MCP answered an error: {str(answer)[:300]}")

    return {"search": search, "block": block, "mcp": mcp}


def timed(call: Callable[[str], None], query: str) -> float | None:
    """Milliseconds the read took; None when it failed."""
    began = time.perf_counter()
    try:
        call(query)
    except Exception as exc:
        print(f"  a read failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    return (time.perf_counter() - began) * 1000


class Prober(threading.Thread):
    """Asks one read every ``interval`` seconds, the kinds in turn, until stopped."""

    def __init__(self, calls: dict[str, Callable[[str], None]], interval: float) -> None:
        super().__init__(daemon=True)
        self.calls, self.interval = calls, interval
        self.took: dict[str, list[float]] = {name: [] for name in calls}
        self.failed: dict[str, int] = dict.fromkeys(calls, 0)
        self.done = threading.Event()

    def run(self) -> None:
        names = list(self.calls)
        i = 0
        while not self.done.is_set():
            name = names[i % len(names)]
            ms = timed(self.calls[name], QUERIES[i % len(QUERIES)])
            if ms is None:
                self.failed[name] += 1
            else:
                self.took[name].append(ms)
            i += 1
            self.done.wait(self.interval)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def row(name: str, took: list[float], failed: int) -> str:
    if not took:
        return f"  {name:<8} no answer ({failed} failed)"
    return (
        f"  {name:<8} p50 {statistics.median(took):>7.0f} ms  p95 {percentile(took, 95):>7.0f} ms  "
        f"max {max(took):>7.0f} ms  ({len(took)} reads, {failed} failed)"
    )


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) a process has used so far, its own threads' (Linux's /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} / {five:.2f} (1 / 5 min, {os.cpu_count()} cores)"


def run(args: argparse.Namespace) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="read-under-load-") as tmp:
        workdir = Path(tmp)
        seed_file, backlog = workdir / "seed.jsonl", workdir / "backlog.jsonl"
        exchanges_file(seed_file, workdir, 20, 5, 1, "seed")
        exchanges_file(backlog, workdir, args.exchanges, args.sessions, 2, "backlog")
        up = Up(workdir, args.source)
        try:
            up.publish(seed_file)
            up.wait_stored(20, args.timeout)
            calls = reads(up.api, workdir / "p0")
            for call in calls.values():  # the first of each loads what it reads
                timed(call, QUERIES[0])
            print(f"idle ({load()}):")
            idle: dict[str, list[float]] = {name: [] for name in calls}
            idle_failed = dict.fromkeys(calls, 0)
            for i in range(args.idle):
                for name, call in calls.items():
                    ms = timed(call, QUERIES[i % len(QUERIES)])
                    if ms is None:
                        idle_failed[name] += 1
                    else:
                        idle[name].append(ms)
                time.sleep(0.05)
            for name in calls:
                print(row(name, idle[name], idle_failed[name]))
            prober = Prober(calls, args.interval)
            cpu_began = cpu_seconds(up.process.pid)
            began = time.monotonic()
            if args.interval > 0:
                prober.start()
            accepted = up.publish(backlog)
            stored = up.wait_stored(20 + args.exchanges, args.timeout, give_up=args.max_seconds) - 20
            took = time.monotonic() - began
            prober.done.set()
            if prober.is_alive():
                prober.join(READ_TIMEOUT_S)
            rate = stored / took
            print(f"backlog of {args.exchanges} exchanges ({load()}):")
            cut = f" (cut at --max-seconds {args.max_seconds:.0f})" if stored < args.exchanges else ""
            print(f"  published in {accepted:.1f}s; {stored} stored in {took:.1f}s{cut}: {rate:.2f} exchanges/s")
            # CPU time survives a loaded machine where the rate does not: what one exchange cost `up`.
            cpu = cpu_seconds(up.process.pid) - cpu_began
            print(f"  up's CPU meanwhile: {cpu:.1f} s, {cpu / max(1, stored):.2f} s per exchange stored")
            if args.interval > 0:
                for name in calls:
                    print(row(name, prober.took[name], prober.failed[name]))
                within = all(
                    prober.took[n]
                    and not prober.failed[n]
                    and percentile(prober.took[n], 95) <= TARGET_P95_MS
                    and max(prober.took[n]) <= TARGET_MAX_MS
                    for n in calls
                )
                verdict = "met" if within else "MISSED"
                print(f"  target p95 <= {TARGET_P95_MS:.0f} ms, max <= {TARGET_MAX_MS:.0f} ms: {verdict}")
            return {"rate": rate, "idle": idle, "backlog": prober.took, "failed": prober.failed}
        finally:
            up.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=1500)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--idle", type=int, default=20, help="reads of each kind while idle")
    parser.add_argument("--interval", type=float, default=0.25, help="seconds between reads during the backlog")
    parser.add_argument("--timeout", type=float, default=1200.0, help="most seconds the backlog may take")
    parser.add_argument(
        "--max-seconds", type=float, default=0.0, help="end the backlog phase after this long (0: when all are stored)"
    )
    parser.add_argument("--source", type=Path, default=ROOT, help="the source tree `up` runs from")
    args = parser.parse_args()
    print(f"memstream up from {args.source}; {args.exchanges} exchanges over {args.sessions} sessions")
    run(args)


if __name__ == "__main__":
    main()
