"""bench.perf.turn_budget groups py-spy's sampled stacks into a turn's CPU budget."""

from __future__ import annotations

from bench.perf.turn_budget import budget, group

LOOP = "<module> (bench.py:1);run_until_complete (asyncio/base_events.py:640)"
THREAD = "_bootstrap (threading.py:995);_worker (concurrent/futures/thread.py:83)"


def test_each_sample_goes_to_the_first_group_that_claims_it() -> None:
    sdk = (
        f"{LOOP};handle (agents/extract.py:90);_complete_once (memstream/llm/anthropic.py:70);create (anthropic/x.py:1)"
    )
    assert group(sdk) == "extract: LLM call through the SDK"
    # An agent's own frames win over the framework code it calls (its sends, its table writes).
    assert group(f"{LOOP};guarded (agents/base.py:100);handle (agents/decide.py:390);send (faust/topics.py:190)") == (
        "stage code: decide"
    )
    assert group(f"{THREAD};<lambda> (memstream/store/edge.py:188)") == "store calls on the shard thread"
    assert group(f"{LOOP};_drive (bench/perf/pipeline.py:300);send (aiokafka/producer/producer.py:1)") == (
        "bench driver (publish, follow memory-updated)"
    )
    assert group(f"{LOOP};_fetcher (faust/transport/consumer.py:1200)") == (
        "Faust and aiokafka (fetch, dispatch, ack, produce)"
    )
    assert group(f"{LOOP};_run_once (asyncio/base_events.py:1900)") == "asyncio and the rest"


def test_start_up_and_other_threads_are_not_a_turns() -> None:
    assert group("<module> (cpu.py:1);<module> (memstream/llm/anthropic.py:1)") is None
    assert group(f"{LOOP};start (memstream/worker/runner.py:90)") is None
    assert group(f"{THREAD};_open_shard (memstream/store/edge.py:100)") is None


def test_budget_adds_the_counts_of_py_spy_raw_lines() -> None:
    raw = "\n".join(
        [
            f"{LOOP};handle (agents/store.py:1) 3",
            f"{LOOP};handle (agents/store.py:2) 2",
            f"{LOOP};_fetcher (faust/transport/consumer.py:1) 5",
            "<module> (cpu.py:1) 7",
            "",
        ]
    )
    assert budget(raw) == {"stage code: store": 5, "Faust and aiokafka (fetch, dispatch, ack, produce)": 5}
