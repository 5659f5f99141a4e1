"""Citations checked against a git work tree (issue 39): current, changed, moved, gone."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from memstream.recall import git
from memstream.recall.staleness import Checked, Checker, memory_status
from memstream.schemas import Citation
from tests.unit.test_citations_capture import commit_all, make_repo

BODY = "".join(f"line {n}\n" for n in range(1, 41))


def cite(repo: Path, path: str, commit: str, start: int = 0, end: int = 0) -> Citation:
    lines = (repo / path).read_text().splitlines()
    return Citation(
        path=path, repo=str(repo), commit=commit, start=start, end=end,
        fingerprint=git.fingerprint(git.region(tuple(lines), start, end)),
    )  # fmt: skip


def repo_with(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "r"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.py").write_text(BODY)
    (repo / "src" / "b.py").write_text(BODY.replace("line", "bee"))
    make_repo(repo)
    return repo, commit_all(repo, "first")


def test_an_untouched_file_is_current_and_an_edit_outside_the_region_keeps_it_current(tmp_path: Path) -> None:
    repo, first = repo_with(tmp_path)
    citation = cite(repo, "src/a.py", first, 10, 14)
    checker = Checker()
    assert checker.check(citation).status == "current"
    (repo / "src" / "a.py").write_text("new top line\n" + BODY.replace("line 30", "line thirty"))
    commit_all(repo, "edit elsewhere")
    checked = checker.check(citation)
    assert (checked.status, checked.start) == ("current", 11)  # shifted one line down


def test_an_edit_inside_the_region_is_changed_with_how_much(tmp_path: Path) -> None:
    repo, first = repo_with(tmp_path)
    citation = cite(repo, "src/a.py", first, 10, 14)
    (repo / "src" / "a.py").write_text(BODY.replace("line 12\n", "line twelve\nand more\n"))
    checked = Checker().check(citation)  # not even committed: the work tree is what counts
    assert (checked.status, checked.added, checked.removed) == ("changed", 2, 1)
    assert checked.note == "changed (+2 −1 lines)"


def test_a_rename_is_moved_with_the_new_path(tmp_path: Path) -> None:
    repo, first = repo_with(tmp_path)
    citation = cite(repo, "src/a.py", first)
    (repo / "lib").mkdir()
    subprocess.run(["git", "-C", str(repo), "mv", "src/a.py", "lib/alpha.py"], check=True)
    commit_all(repo, "move")
    checked = Checker().check(citation)
    assert (checked.status, checked.path, checked.note) == ("moved", "lib/alpha.py", "moved to lib/alpha.py")


def test_a_deletion_is_gone_with_the_deleting_commit_and_a_revert_brings_it_back(tmp_path: Path) -> None:
    repo, first = repo_with(tmp_path)
    citation = cite(repo, "src/b.py", first, 1, 3)
    (repo / "src" / "b.py").unlink()
    deleting = commit_all(repo, "delete b")
    checker = Checker()
    checked = checker.check(citation)
    assert (checked.status, checked.commit) == ("gone", deleting)
    subprocess.run(["git", "-C", str(repo), "revert", "--no-edit", "HEAD"], check=True, capture_output=True)
    assert checker.check(citation).status == "current"


def test_a_repository_not_on_this_machine_is_unknown_and_a_memory_takes_the_worst_known_status(tmp_path: Path) -> None:
    far = Citation(path="x.py", repo=str(tmp_path / "elsewhere"), commit="0" * 40)
    assert Checker().check(far).status == "unknown"
    c = Citation(path="x.py")

    def of(*statuses: str) -> str:
        return memory_status([Checked(c, s) for s in statuses])  # type: ignore[arg-type]

    assert of("unknown") == ""
    assert of("gone", "gone", "unknown") == "gone"
    assert of("gone", "current") == "changed"
    assert of("moved", "current") == "moved"
    assert of("current") == "current"


def test_head_is_read_from_the_git_files_for_branches_and_packed_refs(tmp_path: Path) -> None:
    repo, first = repo_with(tmp_path)
    assert git.read_head(str(repo)) == first
    subprocess.run(["git", "-C", str(repo), "pack-refs", "--all"], check=True)
    assert git.read_head(str(repo)) == first
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "--detach"], check=True)
    assert git.read_head(str(repo)) == first
    info = git.repo_info(str(repo / "src"))
    assert info is not None and (info.root, info.head, info.dirty) == (str(repo), first, False)


def test_a_cold_check_asks_git_once_per_question_not_once_per_file(tmp_path: Path, monkeypatch: Any) -> None:
    """After a new HEAD every changed, moved or gone file needs git; a search's citations at many commits
    cost one process for all renames, one for all deleting commits and one numstat per cited commit."""
    repo = tmp_path / "r"
    (repo / "src").mkdir(parents=True)
    names = [f"f{n}.py" for n in range(9)]
    for name in names:
        (repo / "src" / name).write_text(BODY.replace("line", name))
    make_repo(repo)
    commits = [commit_all(repo, "first")]
    for n in range(1, 4):  # three more commits, so the citations are at four different commits
        (repo / f"touch{n}").write_text(str(n))
        commits.append(commit_all(repo, f"touch {n}"))
    cited = [cite(repo, f"src/{name}", commits[n % 4], 5, 8) for n, name in enumerate(names)]
    (repo / "lib").mkdir()
    for name in names[:3]:
        subprocess.run(["git", "-C", str(repo), "mv", f"src/{name}", f"lib/{name}"], check=True)
    for name in names[3:6]:
        (repo / "src" / name).unlink()
    deleting = commit_all(repo, "refactor")
    for name in names[6:]:  # edited inside the cited lines (not committed: the work tree counts)
        (repo / "src" / name).write_text(BODY.replace("line", name).replace(f"{name} 6\n", "six\n"))
    asked: list[tuple[str, ...]] = []
    real = git.git

    def counted(root: str, *args: str, **kwargs: Any) -> str | None:
        asked.append(args)
        return real(root, *args, **kwargs)

    monkeypatch.setattr(git, "git", counted)
    checked = Checker().check_all(cited)
    assert [c.status for c in checked] == ["moved"] * 3 + ["gone"] * 3 + ["changed"] * 3
    assert [c.path for c in checked[:3]] == [f"lib/{name}" for name in names[:3]]
    assert {c.commit for c in checked[3:6]} == {deleting}
    assert {(c.added, c.removed) for c in checked[6:]} == {(1, 1)}
    kinds = [" ".join(a for a in args if not a.startswith("-"))[:8] for args in asked]
    # renames: one diff-tree for the four commits; deletions: one log; numstat: one per commit of a changed file
    assert len(asked) <= 1 + 1 + 3, kinds
