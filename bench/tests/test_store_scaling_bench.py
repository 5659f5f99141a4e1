"""The store scaling bench runs end to end at a toy size (no timing thresholds)."""

from __future__ import annotations

from bench.perf.store_scaling import format_index, format_table, measure, measure_index

TIMED = ("upsert_per_s", "upsert_p50_ms", "upsert_p95_ms", "search_p50_ms", "search_p95_ms", "search_p99_ms")


async def test_measure_small() -> None:
    rows = await measure(sizes=(300,), searches=20)

    assert len(rows) == 1
    row = rows[0]
    assert row["size"] == 300
    for key in TIMED:
        assert row[key] > 0, key
    assert row["peak_rss_mb"] > 0
    # The load plus the timed single upserts all landed.
    assert row["points"] == 300 + 500
    assert "300" in format_table(rows)


async def test_index_run_small() -> None:
    row = await measure_index(2000, 4, dim=16, searches=10)

    assert row["points"] == 2000 + row["written_during_build"]
    assert row["hnsw_segments"] >= 1
    for when in ("before", "after"):
        for key in ("search", "hybrid", "hybrid_old"):
            assert row[f"{when}_{key}_p95_ms"] > 0, (when, key)
    assert row["disk_mb_per_million_after"] > 0 and row["rss_mb_per_million_after"] > 0
    assert "2,000 / 4 proj." in format_index([row])
