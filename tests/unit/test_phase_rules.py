"""The consolidation spec's two phases as pure rules: Phase 1 claims and parsing, Phase 2 selection,
diff and watermark, and the workspace on disk."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memstream.rules import phase1, phase2
from memstream.schemas import Phase2Input, RolloutOutput, RolloutState, SelectedRollout
from memstream.store import artifacts

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
IDLE = timedelta(minutes=15)
MAX_AGE = timedelta(days=30)


def rollout(**changes: object) -> RolloutState:
    values: dict[str, object] = {
        "exchanges": ["[user] fix the build\n[assistant] fixed"],
        "turns": 1,
        "last_ts": NOW - timedelta(hours=1),
        "scope_key": "p_1",
    }
    values.update(changes)
    return RolloutState(**values)  # type: ignore[arg-type]


# --- Phase 1 -------------------------------------------------------------------------------


def test_an_idle_session_with_new_turns_is_due() -> None:
    assert phase1.is_due(rollout(), NOW, idle=IDLE, max_age=MAX_AGE)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"last_ts": NOW - timedelta(minutes=5)}, "still active"),
        ({"last_ts": NOW - timedelta(days=31)}, "outside the age window"),
        ({"distilled_turns": 1}, "nothing new since the last distillation"),
        ({"retry_at": NOW + timedelta(seconds=1)}, "waiting out its backoff"),
        ({"exchanges": []}, "nothing to distil"),
        ({"last_ts": None}, "never active"),
    ],
)
def test_a_session_is_not_due(changes: dict[str, object], why: str) -> None:
    assert not phase1.is_due(rollout(**changes), NOW, idle=IDLE, max_age=MAX_AGE), why


def test_a_failed_job_is_due_again_after_its_backoff() -> None:
    assert phase1.is_due(rollout(retry_at=NOW), NOW, idle=IDLE, max_age=MAX_AGE)


def test_retry_backoff_doubles_up_to_its_cap() -> None:
    delays = [(phase1.retry_at(NOW, n, base=60, cap=300) - NOW).total_seconds() for n in (1, 2, 3, 4)]
    assert delays == [60, 120, 240, 300]


def test_exchanges_are_bounded_oldest_first() -> None:
    kept: list[str] = []
    for i in range(10):
        kept = phase1.add_exchange(kept, f"exchange {i} " + "x" * 90, max_chars=350)
    assert [e.split()[1] for e in kept] == ["7", "8", "9"]
    # A single exchange longer than the bound is still kept: it is all there is.
    assert phase1.add_exchange([], "y" * 1000, max_chars=350) == ["y" * 1000]


def test_an_exchange_that_goes_on_replaces_the_shorter_copy() -> None:
    """Issue 25.3: a reply in several messages is one exchange in the rollout, not a prefix beside it."""
    kept = phase1.add_exchange([], "[user] Q1\n[assistant] A1", max_chars=1000)
    kept = phase1.add_exchange(kept, "[user] Q1\n[assistant] A1\n[assistant] A2", max_chars=1000)
    kept = phase1.add_exchange(kept, "[user] Q2\n[assistant] B", max_chars=1000)
    assert kept == ["[user] Q1\n[assistant] A1\n[assistant] A2", "[user] Q2\n[assistant] B"]


def test_the_reply_is_parsed_redacted_and_slugged() -> None:
    secret = "ghp_" + "A" * 36
    raw = (
        '```json\n{"raw_memory": "Deployed with token ' + secret + '", '
        '"rollout_summary": "Set up CI.", "rollout_slug": "Set up CI / deploy!"}\n```'
    )
    distilled = phase1.parse(raw)
    assert secret not in distilled.raw_memory and "REDACTED" in distilled.raw_memory
    assert distilled.rollout_summary == "Set up CI."
    assert distilled.slug == "set-up-ci-deploy"
    assert not distilled.empty


def test_an_empty_reply_is_no_output_not_a_failure() -> None:
    assert phase1.parse('{"raw_memory": "", "rollout_summary": ""}').empty


@pytest.mark.parametrize("raw", ["not json at all", "[1, 2]", '{"raw_memory": 3}'])
def test_an_unusable_reply_fails_the_job(raw: str) -> None:
    with pytest.raises(ValueError):
        phase1.parse(raw)


def test_raw_mode_distils_without_a_model() -> None:
    state = rollout(exchanges=["[user] set up the build\n[assistant] done", "[user] add CI\n[assistant] added"])
    distilled = phase1.without_model(state)
    assert "set up the build" in distilled.raw_memory and "add CI" in distilled.raw_memory
    assert distilled.rollout_summary.startswith("[user] set up the build") and "add CI" in distilled.rollout_summary
    assert distilled.slug == "set-up-the-build"


# --- Phase 2 -------------------------------------------------------------------------------


def output(
    rollout_id: str, *, scope: str = "p_1", generated: datetime = NOW, outcome: str = "succeeded"
) -> RolloutOutput:
    return RolloutOutput(
        rollout_id=rollout_id,
        scope_key=scope,
        outcome=outcome,  # type: ignore[arg-type]
        raw_memory=f"notes of {rollout_id}",
        rollout_summary=f"summary of {rollout_id}",
        slug=rollout_id,
        source_updated_at=generated,
        generated_at=generated,
    )


def item(
    rollout_id: str, offset: int, *, usage: int = 0, last_usage: datetime | None = None, **kw: object
) -> Phase2Input:
    return Phase2Input(output=output(rollout_id, **kw), offset=offset, usage_count=usage, last_usage=last_usage)  # type: ignore[arg-type]


def ids(selection: list[Phase2Input]) -> list[str]:
    return [i.output.rollout_id for i in selection if i.output]


def test_selection_ranks_by_usage_then_recency_and_keeps_the_top_n() -> None:
    inputs = [
        item("old-unused", 0, generated=NOW - timedelta(days=2)),
        item("fresh-unused", 1, generated=NOW - timedelta(hours=1)),
        item("used-once", 2, usage=1, last_usage=NOW - timedelta(days=3), generated=NOW - timedelta(days=9)),
        item("used-twice", 3, usage=2, last_usage=NOW - timedelta(days=5), generated=NOW - timedelta(days=9)),
    ]
    assert ids(phase2.select(inputs, NOW, max_unused_days=30, top_n=10)) == [
        "used-twice",
        "used-once",
        "fresh-unused",
        "old-unused",
    ]
    assert ids(phase2.select(inputs, NOW, max_unused_days=30, top_n=2)) == ["used-twice", "used-once"]


def test_selection_ignores_what_went_unused_too_long() -> None:
    inputs = [
        # Used, but last used 40 days ago: out, however fresh its generation.
        item("stale-use", 0, usage=9, last_usage=NOW - timedelta(days=40), generated=NOW),
        # Never used: its generation time decides.
        item("never-used-old", 1, generated=NOW - timedelta(days=31)),
        item("never-used-new", 2, generated=NOW - timedelta(days=29)),
        # Produced nothing worth keeping.
        item("empty", 3, outcome="succeeded_no_output"),
    ]
    assert ids(phase2.select(inputs, NOW, max_unused_days=30, top_n=10)) == ["never-used-new"]


def test_the_diff_labels_added_retained_and_removed() -> None:
    known = {r: item(r, o) for r, o in (("a", 0), ("b", 5), ("c", 2), ("gone", 3))}
    previous = [
        SelectedRollout(rollout_id="a", offset=0),  # same output: retained
        SelectedRollout(rollout_id="b", offset=1),  # refreshed since (offset 5): added again
        SelectedRollout(rollout_id="c", offset=2),  # not selected now, still known: removed
        SelectedRollout(rollout_id="vanished", offset=4),  # no longer known at all: not surfaced
    ]
    diff = phase2.diff([known["a"], known["b"], known["gone"]], previous, known)
    assert diff == phase2.Diff(added=["b", "gone"], retained=["a"], removed=["c"])
    assert diff.changed
    assert not phase2.Diff(retained=["a"]).changed


def test_the_baseline_is_each_selected_output_by_offset() -> None:
    assert phase2.baseline([item("a", 7)]) == [SelectedRollout(rollout_id="a", offset=7)]


def test_the_watermark_never_moves_backwards() -> None:
    assert phase2.completion_watermark(10, [item("a", 3), item("b", 12)]) == 12
    assert phase2.completion_watermark(10, [item("a", 3)]) == 10
    assert phase2.completion_watermark(-1, []) == -1


def test_dirty_means_output_newer_than_the_watermark() -> None:
    inputs = [item("a", 3), item("b", 7)]
    assert phase2.is_dirty(inputs, 6)
    assert not phase2.is_dirty(inputs, 7)
    # Usage alone (no output yet) is not new input.
    assert not phase2.is_dirty([Phase2Input(offset=-1, usage_count=3)], -1)


def test_the_prompt_carries_the_diff_and_details_only_new_evidence() -> None:
    outputs = {r: output(r) for r in ("a", "b", "c")}
    text = phase2.prompt("shop", "- uses JWT", phase2.Diff(added=["a"], retained=["b"], removed=["c"]), outputs)
    assert "Previous consolidated memory:\n- uses JWT" in text
    assert "ADDED sessions:\n### a\nSummary: summary of a\nNotes:\nnotes of a" in text
    assert "RETAINED sessions:\n### b\nSummary: summary of b" in text and "notes of b" not in text
    assert "REMOVED sessions:\n### c" in text


def test_the_summary_reply_is_parsed_and_redacted() -> None:
    secret = "sk-ant-api03-" + "Z" * 40
    assert phase2.parse_summary('{"summary": "- auth uses Redis"}') == "- auth uses Redis"
    assert secret not in phase2.parse_summary(f'{{"summary": "- key {secret}"}}')
    assert phase2.parse_summary("- plain markdown answer") == "- plain markdown answer"
    with pytest.raises(ValueError):
        phase2.parse_summary('{"summary": ""}')


# --- the workspace ---------------------------------------------------------------------------


def test_sync_writes_latest_first_one_file_each_and_prunes(tmp_path: Path) -> None:
    older = output("s-old", generated=NOW - timedelta(days=1))
    newer = output("s-new", generated=NOW)
    first = artifacts.sync(tmp_path, [older, newer])
    assert first.written == 3 and first.pruned == 0
    raw = (tmp_path / artifacts.RAW_MEMORIES).read_text()
    assert raw.index("## s-new") < raw.index("## s-old")
    files = sorted(p.name for p in (tmp_path / artifacts.SUMMARIES).iterdir())
    assert files == sorted(artifacts.summary_file_name(o) for o in (older, newer))

    # The same content again writes nothing; dropping one prunes its file.
    assert artifacts.sync(tmp_path, [older, newer]).written == 0
    second = artifacts.sync(tmp_path, [newer])
    assert second.pruned == 1
    assert [p.name for p in (tmp_path / artifacts.SUMMARIES).iterdir()] == [artifacts.summary_file_name(newer)]
    assert "s-old" not in (tmp_path / artifacts.RAW_MEMORIES).read_text()
    assert not list(tmp_path.rglob(".*.tmp"))


def test_summary_file_names_are_stable_and_unique() -> None:
    a, b = output("session-a"), output("session-b")
    assert artifacts.summary_file_name(a) == artifacts.summary_file_name(output("session-a"))
    assert artifacts.summary_file_name(a) != artifacts.summary_file_name(b)
