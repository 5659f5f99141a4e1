"""Init mode (the extraction spec): the project's describing files, read within Pipeline v2's input cap."""

from __future__ import annotations

from pathlib import Path

from memstream.intake.project_files import FILE_MAX_CHARS, PROJECT_FILES, TOTAL_MAX_CHARS, read_project_files
from memstream.rules.prompts import extraction_prompt


def test_sections_come_in_project_files_order(tmp_path: Path) -> None:
    # Written in a different order from PROJECT_FILES.
    (tmp_path / "package.json").write_text('{"name": "demo-shop"}\n')
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo-shop"\n')
    (tmp_path / "README.md").write_text("# Demo shop\n\nAn online shop API.\n")
    text = read_project_files(tmp_path)
    assert text == (
        "=== README.md ===\n# Demo shop\n\nAn online shop API."
        '\n\n=== pyproject.toml ===\n[project]\nname = "demo-shop"'
        '\n\n=== package.json ===\n{"name": "demo-shop"}'
    )
    positions = [text.index(f"=== {name} ===") for name in ("README.md", "pyproject.toml", "package.json")]
    assert positions == sorted(positions)
    assert [PROJECT_FILES.index(n) for n in ("README.md", "pyproject.toml", "package.json")] == sorted(
        PROJECT_FILES.index(n) for n in ("README.md", "pyproject.toml", "package.json")
    )


def test_other_files_and_directories_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text("print('hi')\n")
    (tmp_path / "README.md").mkdir()  # a directory with a describing name is not a file
    (tmp_path / "go.mod").write_text("module example.com/demo\n")
    assert read_project_files(tmp_path) == "=== go.mod ===\nmodule example.com/demo"


def test_a_long_file_is_cut(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("r" * (FILE_MAX_CHARS + 1_000) + "TAIL")
    text = read_project_files(tmp_path)
    assert text.startswith("=== README.md ===\n")
    body = text.removeprefix("=== README.md ===\n")
    assert body == "r" * FILE_MAX_CHARS
    assert "TAIL" not in text


def _fill(directory: Path, names: tuple[str, ...], chars: int) -> None:
    for name in names:
        (directory / name).write_text("x" * chars)


def test_sections_stay_within_the_cap(tmp_path: Path) -> None:
    _fill(tmp_path, (*PROJECT_FILES[:4], "pyproject.toml", "package.json", "Cargo.toml"), FILE_MAX_CHARS * 2)
    text = read_project_files(tmp_path)
    sections = text.split("\n\n")
    assert sum(len(s) for s in sections) <= TOTAL_MAX_CHARS
    assert sections[0].startswith("=== README.md ===\n")
    # README.md, README.rst and README.txt fill the cap; the rest are not read.
    assert [s.split(" ===")[0] for s in sections] == ["=== README.md", "=== README.rst", "=== README.txt"]


def test_total_stays_within_the_cap(tmp_path: Path) -> None:
    _fill(tmp_path, (*PROJECT_FILES[:4], "pyproject.toml", "package.json", "Cargo.toml"), FILE_MAX_CHARS * 2)
    assert len(read_project_files(tmp_path)) <= TOTAL_MAX_CHARS


def test_total_cap_with_separators(tmp_path: Path) -> None:
    # Sections just under the file cap each, so the separators between them matter.
    _fill(tmp_path, ("README.md", "pyproject.toml", "package.json", "Cargo.toml"), FILE_MAX_CHARS - 30)
    assert len(read_project_files(tmp_path)) <= TOTAL_MAX_CHARS


def test_full_project_files_keep_their_first_header_in_the_init_prompt(tmp_path: Path) -> None:
    # extraction_prompt keeps the newest MAX_INPUT_CHARS; an over-long text loses its first header.
    _fill(tmp_path, ("README.md", "pyproject.toml", "package.json", "Cargo.toml"), FILE_MAX_CHARS)
    assert "=== README.md ===" in extraction_prompt(read_project_files(tmp_path), "init")


def test_small_files_are_all_kept(tmp_path: Path) -> None:
    for name in PROJECT_FILES:
        (tmp_path / name).write_text(f"about {name}")
    text = read_project_files(tmp_path)
    assert [line for line in text.splitlines() if line.startswith("===")] == [f"=== {n} ===" for n in PROJECT_FILES]


def test_undecodable_bytes_are_replaced(tmp_path: Path) -> None:
    (tmp_path / "README").write_bytes(b"caf\xff shop")
    assert read_project_files(tmp_path) == "=== README ===\ncaf\ufffd shop"


def test_empty_directory_is_empty_text(tmp_path: Path) -> None:
    assert read_project_files(tmp_path) == ""


def test_missing_directory_is_empty_text(tmp_path: Path) -> None:
    assert read_project_files(tmp_path / "nowhere") == ""
