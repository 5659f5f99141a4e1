"""Citations checked against a git work tree (issue 39): current, changed, moved, gone."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
