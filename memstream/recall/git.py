"""What memstream asks of a git work tree, with git's own plumbing run as a subprocess (issue 39).

Capture asks which repository a project folder is in, its remote, HEAD and whether the tree is dirty;
recall asks what became of a file since a commit (:mod:`memstream.recall.staleness`). Nothing here
imports a git library: ``git`` on the PATH is the one dependency, and every failure (no git, not a
repository, an unknown commit) is an empty answer, never an exception: citations are a hint, not a gate.
HEAD is read from the ``.git`` files themselves (no subprocess), so a warm recall pays no process start.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path

#: How long one git command may take before its answer is taken as "unknown".
GIT_TIMEOUT_S = 5.0
#: Hex digits kept of a cited region's SHA-256: 64 bits tell regions of one file apart.
FINGERPRINT_CHARS = 16


@dataclass(frozen=True, slots=True)
class RepoInfo:
    """A work tree as capture sees it: its root, remote (origin's URL, else ""), HEAD and dirtiness."""

    root: str
    remote: str
    head: str
    dirty: bool


def git(root: str, *args: str, stdin: str | None = None) -> str | None:
    """``git -C root args…``'s standard output (``stdin`` its input), or None if it failed or git is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", root, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def repo_root(folder: str) -> str:
    """The root of the work tree ``folder`` is in ("" if none), found by walking up to a ``.git``."""
    path = Path(folder)
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return ""


def repo_info(folder: str) -> RepoInfo | None:
    """The work tree ``folder`` is in, or None when it is in none (or git cannot say)."""
    root = repo_root(folder)
    if not root:
        return None
    head = read_head(root)
    status = git(root, "status", "--porcelain", "--untracked-files=no")
    remote = git(root, "config", "--get", "remote.origin.url") or ""
    return RepoInfo(root=root, remote=remote.strip(), head=head, dirty=bool(status and status.strip()))


def _git_dir(root: str) -> Path | None:
    dot = Path(root) / ".git"
    if dot.is_dir():
        return dot
    try:  # a linked work tree or submodule: ".git" is a file naming the real git directory
        text = dot.read_text()
    except OSError:
        return None
    if text.startswith("gitdir:"):
        target = Path(text.split(":", 1)[1].strip())
        return target if target.is_absolute() else (Path(root) / target).resolve()
    return None


def _common_dir(git_dir: Path) -> Path:
    try:
        text = (git_dir / "commondir").read_text().strip()
    except OSError:
        return git_dir
    target = Path(text)
    return target if target.is_absolute() else (git_dir / target).resolve()


def read_head(root: str) -> str:
    """The commit HEAD points at, read from the git directory's files ("" if it cannot be read)."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return ""
    try:
        head = (git_dir / "HEAD").read_text().strip()
    except OSError:
        return ""
    if not head.startswith("ref:"):
        return head
    ref = head.split(":", 1)[1].strip()
    for base in (git_dir, _common_dir(git_dir)):
        try:
            return (base / ref).read_text().strip()
        except OSError:
            continue
    try:
        packed = (_common_dir(git_dir) / "packed-refs").read_text()
    except OSError:
        packed = ""
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref:
            return sha
    answer = git(root, "rev-parse", "HEAD")  # a reftable, or something else this reader does not know
    return answer.strip() if answer else ""


@lru_cache(maxsize=1024)
def commit_time(root: str, commit: str) -> datetime | None:
    """When ``commit`` was committed (its committer date, timezone-aware), or None if git cannot say.
    A commit never changes, so its answer is kept for the process."""
    out = git(root, "show", "-s", "--format=%cI", commit)
    try:
        return datetime.fromisoformat(out.strip()) if out and out.strip() else None
    except ValueError:
        return None


def fingerprint(lines: list[str]) -> str:
    """The short fingerprint of a region: its lines, trailing white space and line endings ignored."""
    text = "\n".join(line.rstrip() for line in lines)
    return hashlib.sha256(text.encode()).hexdigest()[:FINGERPRINT_CHARS]


@lru_cache(maxsize=256)
def _file_lines(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    del mtime_ns, size  # the cache key: a file changed on disk is read again
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return tuple(handle.read().splitlines())
    except OSError:
        return ()


def file_lines(path: str) -> tuple[str, ...] | None:
    """The file's lines (read once per version on disk), or None if it is not a readable file."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    if not os.path.isfile(path):
        return None
    return _file_lines(path, stat.st_mtime_ns, stat.st_size)


def region(lines: tuple[str, ...], start: int, end: int) -> list[str]:
    """Lines ``start``…``end`` (1-based, inclusive); the whole file when ``start`` is 0."""
    if start <= 0:
        return list(lines)
    return list(lines[start - 1 : end if end >= start else start])
