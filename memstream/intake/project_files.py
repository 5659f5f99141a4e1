"""Init mode (the extraction spec): the files that say what a project is, read for extraction."""

from __future__ import annotations

from pathlib import Path

#: Files that describe a project, in the order they are read.
PROJECT_FILES: tuple[str, ...] = (
    "README.md",
    "README.rst",
    "README.txt",
    "README",
    "pyproject.toml",
    "package.json",
    "Cargo.toml",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "Gemfile",
    "composer.json",
    "requirements.txt",
    "setup.cfg",
    "Makefile",
    "docker-compose.yml",
    "compose.yaml",
    "CONTRIBUTING.md",
    "AGENTS.md",
    "CLAUDE.md",
)
#: Most characters taken from one file, and from all of them (Pipeline v2's input cap).
FILE_MAX_CHARS = 4_000
TOTAL_MAX_CHARS = 12_000


def read_project_files(directory: Path) -> str:
    """``=== name ===`` sections of the project's describing files; "" when there are none."""
    sections: list[str] = []
    separator = "\n\n"
    total = 0
    for name in PROJECT_FILES:
        path = directory / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(errors="replace")[:FILE_MAX_CHARS]
        except OSError:
            continue
        section = f"=== {name} ===\n{text.strip()}"
        joint = len(separator) if sections else 0
        if total + joint + len(section) > TOTAL_MAX_CHARS:
            section = section[: max(0, TOTAL_MAX_CHARS - total - joint)]
        if section:
            sections.append(section)
            total += joint + len(section)
        if total >= TOTAL_MAX_CHARS:
            break
    return separator.join(sections)
