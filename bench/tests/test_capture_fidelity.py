"""The fidelity benchmark's data and scoring: real recorded sessions, labelled by hand, read as ingest reads."""

from __future__ import annotations

import json

from bench.perf.capture import FIDELITY_TARGET, REAL, fidelity, labelled_files, score


def test_every_real_file_has_its_labels_and_its_origin() -> None:
    files = labelled_files()
    sources = (REAL / "SOURCES.md").read_text(encoding="utf-8")
    assert {path.relative_to(REAL).parts[0] for path, _ in files} == {"claude", "codex", "gemini", "kimi"}
    for path, labels in files:
        assert path.is_file(), path
        assert labels["turns"] and labels["project"]
        # SOURCES.md names each file (long names shortened with an ellipsis after their first characters)
        assert path.name[:20] in sources or f"{path.stem[:9]}…" in sources, path.name
        json.dumps(labels)  # plain JSON, reviewable by hand


def test_score_counts_a_turn_only_when_role_text_and_project_all_match() -> None:
    expected = {("user", "fix it", "/p"), ("assistant", "done", "/p")}
    printed = {("user", "fix it", "/p"), ("assistant", "done", "/elsewhere"), ("assistant", "extra", "/p")}
    assert score(expected, printed) == (1, 2, 3)


def test_each_cli_meets_the_target_on_its_real_files_once_their_project_is_named() -> None:
    for cli, (matched, expected, printed) in fidelity(named=True).items():
        assert matched / expected >= FIDELITY_TARGET, (cli, matched, expected)
        assert matched / printed >= FIDELITY_TARGET, (cli, matched, printed)


def test_as_found_nothing_is_printed_that_was_not_expected() -> None:
    # Files that cannot know their project give fewer turns until --project names it, never wrong ones.
    for cli, (matched, _, printed) in fidelity(named=False).items():
        assert matched == printed, cli
