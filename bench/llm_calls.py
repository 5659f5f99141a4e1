"""LLM calls, tokens and estimated cost per turn: memstream and mem0 on the same session.

    nice -n 10 .venv/bin/python -m bench.llm_calls [--sessions 2] [--turns 4] [--skip-mem0]

Both systems get the turns of ``bench.pipeline`` (``question t`` / ``answer bench-turn s.t done``),
the bundled e5 embedder and an instant fake LLM that answers one fact per turn; both fakes count
a word as a token (system prompt and messages in, the answer out). The facts of one session are
near each other in e5 (they differ by a number), so memstream's decision stage (seed 003) and
contradiction check (seed 000) find candidates: the expensive case, not the cheap one. memstream's
calls come from ``memstream_llm_stage_calls`` by stage, mem0's from its fake server's log. Cost is
estimated at claude-haiku-4-5's prices for both (``metrics.PRICES_PER_MILLION``).
"""

from __future__ import annotations

import argparse
import asyncio
import os

from bench import pipeline
from memstream.metrics import PRICES_PER_MILLION

PRICE_IN, PRICE_OUT = PRICES_PER_MILLION["claude-haiku-4-5"]


def cost(input_tokens: float, output_tokens: float) -> float:
    """US dollars at claude-haiku-4-5's list prices."""
    return (input_tokens * PRICE_IN + output_tokens * PRICE_OUT) / 1_000_000


async def measure(sessions: int, turns: int, skip_mem0: bool) -> None:
    ours = await pipeline.run(sessions=sessions, turns_per_session=turns, llm_latency=0.0, embedder="bundled")
    stages = ", ".join(f"{stage} {n:.2f}" for stage, n in sorted(ours.llm_calls_by_stage.items()))
    print(f"load {os.getloadavg()} on {os.cpu_count()} cores; {sessions} sessions × {turns} turns")
    print(
        f"memstream: {ours.llm_calls_per_turn:.2f} calls/turn ({stages}), tokens in {ours.input_tokens_per_turn:.0f} "
        f"/ out {ours.output_tokens_per_turn:.0f} per turn, "
        f"${cost(ours.input_tokens_per_turn, ours.output_tokens_per_turn) * 1000:.3f} per 1,000 turns"
    )
    if skip_mem0:
        return
    from bench import mem0_side_by_side as mem0

    theirs = await mem0.run_mem0(mem0.synthetic_turns(sessions, turns), llm_latency=0.0, concurrency=sessions)
    print(
        f"mem0 {theirs['mem0_version']}: {theirs['llm_calls_per_add']:.2f} calls/turn, tokens in "
        f"{theirs['input_tokens_per_add']:.0f} / out {theirs['output_tokens_per_add']:.0f} per turn, "
        f"${cost(theirs['input_tokens_per_add'], theirs['output_tokens_per_add']) * 1000:.3f} per 1,000 turns"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--skip-mem0", action="store_true")
    args = parser.parse_args()
    asyncio.run(measure(args.sessions, args.turns, args.skip_mem0))


if __name__ == "__main__":
    main()
