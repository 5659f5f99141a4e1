"""How well recall tells what became of cited code, and what checking costs (issue 39).

A scripted git repository gets a few hundred commits: edits inside and outside cited regions, renames,
moves to other folders, deletions, reverts, and branches merged back. Along the way memories cite its
files at the commit of the moment (a region, or the whole file, fingerprinted as capture does). The
script keeps its own model of every file (its path and lines), so each memory's true status at HEAD is
known without asking git: ``gone`` (the file was deleted and not brought back), ``moved`` (it lives at
another path), ``changed`` (the cited text is no longer in it), ``current``. The checker
(``memstream.recall.staleness``) is then scored against those labels, and timed as recall uses it:
per search (10 hits) and per block (30 memories), cold and warm.

``--repo PATH`` also runs it on a real history (memstream's own, say): regions of files cited at older
commits, statuses counted (no labels) and the cost timed.

    python -m bench.quality.staleness [--commits 300] [--seed 7] [--repo /work/main]
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memstream.recall import git
from memstream.recall.staleness import Checker, statuses
from memstream.schemas import Citation, Memory, Provenance

STATUSES = ("current", "changed", "moved", "gone")
FILES = 40
LINES = 60


@dataclass
class Cited:
    ident: int
    citation: Citation
    region: list[str]  # the cited lines' text, to label with


def run(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True)
    return done.stdout


class Scripted:
    """A repository and the script's own model of it: file identity -> (path, lines)."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root, self.rng = root, rng
        self.files: dict[int, tuple[str, list[str]]] = {}
        self.counter = 0
        self.history: list[dict[int, tuple[str, list[str]]]] = []
        root.mkdir(parents=True)
        run(root, "init", "-q", "-b", "main")
        for key, value in (("user.email", "b@example.com"), ("user.name", "bench"), ("commit.gpgsign", "false")):
            run(root, "config", key, value)
        for ident in range(FILES):
            self.files[ident] = (f"pkg{ident % 5}/mod{ident}.py", [self.line(ident) for _ in range(LINES)])
        self.write_all()
        self.commit("initial")

    def line(self, ident: int) -> str:
        self.counter += 1
        return f"value_{ident}_{self.counter} = compute({self.counter % 97}, {self.rng.randint(0, 10**6)})"

    def write_all(self) -> None:
        for path, lines in self.files.values():
            target = self.root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("\n".join(lines) + "\n")

    def commit(self, message: str) -> str:
        run(self.root, "add", "-A")
        run(self.root, "commit", "-q", "--allow-empty", "-m", message)
        self.history.append(copy.deepcopy(self.files))
        return run(self.root, "rev-parse", "HEAD").strip()

    def edit(self, ident: int) -> None:
        path, lines = self.files[ident]
        for _ in range(self.rng.randint(1, 4)):
            at = self.rng.randrange(len(lines))
            choice = self.rng.random()
            if choice < 0.5:
                lines[at] = self.line(ident)
            elif choice < 0.8:
                lines.insert(at, self.line(ident))
            elif len(lines) > 20:
                del lines[at]
        (self.root / path).write_text("\n".join(lines) + "\n")

    def rename(self, ident: int) -> None:
        path, lines = self.files[ident]
        folder = self.rng.choice(["pkg0", "pkg1", "lib", "core/sub", "moved"])
        new = f"{folder}/renamed{ident}_{self.counter}.py"
        self.counter += 1
        (self.root / new).parent.mkdir(parents=True, exist_ok=True)
        run(self.root, "mv", path, new)
        self.files[ident] = (new, lines)

    def delete(self, ident: int) -> None:
        path, _ = self.files.pop(ident)
        run(self.root, "rm", "-q", path)

    def revert(self) -> str:
        run(self.root, "revert", "--no-edit", "HEAD")
        self.history.pop()
        self.files = copy.deepcopy(self.history[-1])
        self.history.append(copy.deepcopy(self.files))
        return run(self.root, "rev-parse", "HEAD").strip()

    def cite(self, ident: int, head: str) -> Cited:
        path, lines = self.files[ident]
        if self.rng.random() < 0.2:
            start = end = 0
            region = list(lines)
        else:
            start = self.rng.randint(1, len(lines) - 10)
            end = start + self.rng.randint(3, 9)
            region = lines[start - 1 : end]
        citation = Citation(
            path=path,
            repo=str(self.root),
            commit=head,
            start=start,
            end=end,
            fingerprint=git.fingerprint(region),
        )
        return Cited(ident, citation, region)

    def truth(self, cited: Cited) -> str:
        if cited.ident not in self.files:
            return "gone"
        path, lines = self.files[cited.ident]
        if path != cited.citation.path:
            return "moved"
        size = len(cited.region)
        if cited.citation.start == 0:
            return "current" if lines == cited.region else "changed"
        found = any(lines[i : i + size] == cited.region for i in range(len(lines) - size + 1))
        return "current" if found else "changed"


def script(root: Path, commits: int, seed: int) -> tuple[Scripted, list[Cited]]:
    rng = random.Random(seed)
    repo = Scripted(root, rng)
    head = run(root, "rev-parse", "HEAD").strip()
    cited: list[Cited] = []
    made = 0
    while made < commits:
        alive = sorted(repo.files)
        roll = rng.random()
        merged = len(run(root, "rev-list", "--parents", "-n", "1", "HEAD").split()) > 2
        if roll < 0.04 and made > 2 and not merged:  # a merge is not reverted here: -m picks a side
            head = repo.revert()
            made += 1
            continue
        if roll < 0.08:  # a branch of a few commits, merged back with a merge commit
            branch = f"topic{made}"
            run(root, "checkout", "-q", "-b", branch)
            for _ in range(rng.randint(2, 4)):
                repo.edit(rng.choice(sorted(repo.files)))
                repo.commit("topic edit")
                made += 1
            run(root, "checkout", "-q", "main")
            run(root, "merge", "-q", "--no-ff", "-m", "merge topic", branch)
            head = run(root, "rev-parse", "HEAD").strip()
            repo.history.append(copy.deepcopy(repo.files))
            made += 1
            continue
        ident = rng.choice(alive)
        if roll < 0.16 and len(alive) > 10:
            repo.delete(ident)
        elif roll < 0.28:
            repo.rename(ident)
            if rng.random() < 0.3:
                repo.edit(ident)  # a move with a small edit, as refactors do
        else:
            repo.edit(ident)
        head = repo.commit(f"change {made}")
        made += 1
        if rng.random() < 0.6:
            for pick in rng.sample(sorted(repo.files), k=min(3, len(repo.files))):
                cited.append(repo.cite(pick, head))
    return repo, cited


def score(pairs: Sequence[tuple[str, str]]) -> dict[str, tuple[float, float, int]]:
    out = {}
    for status in STATUSES:
        tp = sum(1 for truth, got in pairs if truth == status and got == status)
        said = sum(1 for _, got in pairs if got == status)
        real = sum(1 for truth, _ in pairs if truth == status)
        out[status] = (tp / said if said else 1.0, tp / real if real else 1.0, real)
    return out


def memories_of(cited: list[Citation], per_memory: int, rng: random.Random) -> list[Memory]:
    now = datetime.now(UTC)
    out = []
    for index in range(0, len(cited), per_memory):
        group = cited[index : index + per_memory]
        out.append(
            Memory(
                id=f"m{index}",
                text="t",
                type="architecture",
                scope="project",
                scope_key="p",
                created_at=now,
                updated_at=now,
                content_hash=str(index),
                embedding_model="e",
                sources=[Provenance(source_type="claude", citations=group)],
            )
        )
    rng.shuffle(out)
    return out


def cpu_s() -> float:
    """CPU seconds of this process and of the git processes it waited for: what a cold check costs,
    whatever the machine's load (wall time under load is mostly waiting for a core)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def cold_cpu(memories: list[Memory], size: int, trials: int = 5) -> float:
    """The median CPU ms (with git's) of checking ``size`` memories with a fresh checker, over ``trials`` sets."""
    spent = []
    for trial in range(trials):
        start = cpu_s()
        statuses(memories[trial * size : (trial + 1) * size], Checker())
        spent.append((cpu_s() - start) * 1000)
    return statistics.median(spent)


def timed(memories: list[Memory], size: int, rounds: int) -> tuple[float, float, float]:
    """(cold first call, warm p50, warm p95) in ms of checking ``size`` memories at a time."""
    checker = Checker()
    start = time.perf_counter()
    statuses(memories[:size], checker)
    cold = (time.perf_counter() - start) * 1000
    for index in range(0, len(memories), size):  # warm every memory once, as a running process would be
        statuses(memories[index : index + size], checker)
    samples = []
    for round_ in range(rounds):
        offset = (round_ * size) % max(1, len(memories) - size)
        start = time.perf_counter()
        statuses(memories[offset : offset + size], checker)
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return cold, statistics.median(samples), samples[int(len(samples) * 0.95) - 1]


def real_history(repo: Path, samples: int, seed: int) -> None:
    rng = random.Random(seed)
    commits = run(repo, "rev-list", "--first-parent", "HEAD").split()
    checker = Checker()
    cited: list[Citation] = []
    for commit in rng.sample(commits[1:], k=min(samples, len(commits) - 1)):
        files = [f for f in run(repo, "ls-tree", "-r", "--name-only", commit).split("\n") if f.endswith(".py")]
        for path in rng.sample(files, k=min(2, len(files))):
            lines = run(repo, "show", f"{commit}:{path}").splitlines()
            if len(lines) < 12:
                continue
            start = rng.randint(1, len(lines) - 10)
            end = start + 8
            region = lines[start - 1 : end]
            cited.append(
                Citation(
                    path=path, repo=str(repo), commit=commit, start=start, end=end, fingerprint=git.fingerprint(region)
                )
            )
    counts: dict[str, int] = {}
    for checked in checker.check_all(cited):
        counts[checked.status] = counts.get(checked.status, 0) + 1
    memories = memories_of(cited, 2, rng)
    cold, p50, p95 = timed(memories, 10, 200)
    print(
        f"\n{repo}: {len(commits)} commits on its first-parent line; "
        f"{len(cited)} regions cited at {samples} older commits"
    )
    print("  statuses at HEAD: " + ", ".join(f"{s} {counts.get(s, 0)}" for s in STATUSES))
    print(f"  per search (10 memories): cold {cold:.1f} ms, warm p50 {p50:.2f} ms, p95 {p95:.2f} ms")


def demo(folder: Path) -> None:
    """A block and a search answer before and after a refactor of the code three memories cite."""
    from memstream.recall.answers import search_index
    from memstream.recall.search import build_block
    from memstream.recall.staleness import marked
    from memstream.schemas.memory import HybridHit

    root = folder / "shop"
    files = {
        "api/auth.py": "".join(f"def helper{n}():\n    return {n}\n" for n in range(10))
        + "def login(user):\n    return jwt(user)\n",
        "config/http.yaml": "timeout: 10\nretries: 3\nbackoff: 2\n",
        "tests/test_clock.py": "from freezegun import freeze_time\n\n@freeze_time('2020-01-01')\n"
        + "def test_clock():\n    pass\n",
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    run(root, "init", "-q", "-b", "main")
    for key, value in (("user.email", "b@example.com"), ("user.name", "bench"), ("commit.gpgsign", "false")):
        run(root, "config", key, value)
    run(root, "add", "-A")
    run(root, "commit", "-q", "-m", "shop")
    head = run(root, "rev-parse", "HEAD").strip()

    def cite(path: str, start: int = 0, end: int = 0) -> Citation:
        lines = tuple((root / path).read_text().splitlines())
        region = git.region(lines, start, end)
        return Citation(
            path=path, repo=str(root), commit=head, start=start, end=end, fingerprint=git.fingerprint(region)
        )

    now = datetime.now(UTC)
    said = [
        ("m-login", "The login endpoint lives in api/auth.py (login() returns a JWT)", cite("api/auth.py", 21, 22)),
        ("m-retry", "HTTP retries are set in config/http.yaml line 2 (3 retries)", cite("config/http.yaml", 2, 2)),
        (
            "m-flaky",
            "The flaky clock test was fixed by pinning freezegun in tests/test_clock.py",
            cite("tests/test_clock.py"),
        ),
        ("m-style", "The team prefers small pull requests", None),
    ]
    memories = [
        Memory(
            id=mid, text=text, type="architecture", scope="project", scope_key="p", created_at=now, updated_at=now,
            content_hash=mid, embedding_model="e",
            sources=[Provenance(source_type="claude", citations=[c] if c else [])],
        )
        for mid, text, c in said
    ]  # fmt: skip
    hits = [HybridHit(m, round(0.9 - 0.1 * i, 2), None, None) for i, m in enumerate(memories)]

    def show(title: str) -> None:
        checker = Checker()
        block = build_block(memories, code=statuses(memories, checker)).text
        index = search_index(marked(hits, checker))
        print(f"--- {title}: block ---\n{block}\n--- {title}: search index rows (last column: code) ---")
        for row in index["hits"]:
            print(f"  {row}")

    show("before")
    (root / "services").mkdir()
    run(root, "mv", "api/auth.py", "services/login.py")
    (root / "config/http.yaml").write_text("timeout: 10\nretries: 5\nbackoff: 2\n")
    run(root, "rm", "-q", "tests/test_clock.py")
    run(root, "commit", "-q", "-am", "refactor: auth moves to services, retries 5, clock test dropped")
    show("after")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repo", default="", help="also run on this real repository's history")
    parser.add_argument("--samples", type=int, default=60, help="older commits cited in --repo")
    parser.add_argument(
        "--demo", action="store_true", help="only show a block and a search before and after a refactor"
    )
    args = parser.parse_args()
    if args.demo:
        with tempfile.TemporaryDirectory() as folder:
            demo(Path(folder))
        return
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        repo, cited = script(Path(folder) / "repo", args.commits, args.seed)
        built = time.perf_counter() - started
        commits = int(run(repo.root, "rev-list", "--count", "HEAD"))
        checker = Checker()
        got = checker.check_all([c.citation for c in cited])
        pairs = [(repo.truth(c), g.status) for c, g in zip(cited, got, strict=True)]
        print(f"scripted repository: {commits} commits (built in {built:.0f} s), {len(cited)} citations")
        print(f"{'status':8} {'labelled':>8} {'precision':>9} {'recall':>7}")
        for status, (precision, recall, real) in score(pairs).items():
            print(f"{status:8} {real:8d} {precision:9.1%} {recall:7.1%}")
        wrong: dict[tuple[str, str], int] = {}
        for truth, status in pairs:
            if truth != status:
                wrong[(truth, status)] = wrong.get((truth, status), 0) + 1
        if wrong:
            print("confusions (true -> said): " + ", ".join(f"{t}->{s} {n}" for (t, s), n in sorted(wrong.items())))
        rng = random.Random(args.seed)
        memories = memories_of([c.citation for c in cited], 2, rng)
        for name, size in (("search (10 hits)", 10), ("block (30 memories)", 30)):
            cold, p50, p95 = timed(memories, size, 200)
            cpu = cold_cpu(memories, size)
            print(f"per {name}: cold {cold:.1f} ms (CPU with git's, median of 5: {cpu:.1f} ms), ", end="")
            print(f"warm p50 {p50:.2f} ms, p95 {p95:.2f} ms")
    if args.repo:
        real_history(Path(args.repo), args.samples, args.seed)


if __name__ == "__main__":
    main()
