"""LLM calls, tokens and estimated cost per turn: memstream and mem0 on the same session.

    nice -n 10 .venv/bin/python -m bench.compare.llm_calls [--projects 3]

The session is the e2e one (``tests/e2e/session.py``): three exchanges in which auth moves from
JWT cookies to Redis sessions, the facts of the extraction spec's contradiction check and Pipeline v2's
decision stage. It runs in ``--projects`` projects at once (one session each). Both systems get
the same facts per turn from a scripted model, and the bundled e5 embedder; their fake servers
count a word as a token (system prompt and messages in, the answer out). The scripted model
decides as a careful one would: the Redis fact UPDATEs the JWT one, anything else is ADDed.
memstream runs its defaults (controlled mode: the UPDATE is blocked and the fact added beside
its target, so the contradiction check supersedes the JWT fact). Both are counted at their
fake model: memstream's calls by the stage whose system prompt asked, mem0's from its fake
server's log. Cost is estimated at claude-haiku-4-5's list prices for both.

The synthetic turns of ``bench.perf.pipeline`` are no use here: their facts differ by a number, so
dedup refreshes them and no decision is ever asked.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from memstream.bootstrap import build_providers
from memstream.embed.bundled import BundledEmbedder
from memstream.intake.publish import make_turn, publish
from memstream.kafka.broker import free_port
from memstream.rules import decision
from memstream.settings import Settings
from memstream.telemetry import metrics
from memstream.worker import runner
from tests.e2e import session
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.loopback import text_of_blocks, word_count

try:  # bench.perf.baseline runs this file in an old tree too, whose bench/ is flat
    pipeline = importlib.import_module("bench.perf.pipeline")
except ModuleNotFoundError:
    pipeline = importlib.import_module("bench.pipeline")

PRICE_IN, PRICE_OUT = metrics.PRICES_PER_MILLION["claude-haiku-4-5"]
#: The pipeline is done when nothing was processed for this long.
QUIET_SECONDS = 4.0


def cost(input_tokens: float, output_tokens: float) -> float:
    """US dollars at claude-haiku-4-5's list prices."""
    return (input_tokens * PRICE_IN + output_tokens * PRICE_OUT) / 1_000_000


def respond(request: dict[str, Any]) -> str:
    """The e2e session's model, answering the decision stage too."""
    if str(request.get("system", "")) != decision.SYSTEM:
        return session.respond(request)
    prompt = session._user_text(request)
    fact = re.search(r"^New fact \(type=[^)]*\): (.*)$", prompt, re.M)
    for target, text in re.findall(r"^\d+\. id=(\S+) type=\S+ content=(.*)$", prompt, re.M):
        if fact and "Redis" in fact.group(1) and "JWT" in text:
            return json.dumps({"action": "UPDATE", "targetId": target, "confidence": 0.9, "reason": "moved to Redis"})
    return json.dumps({"action": "ADD", "targetId": "", "confidence": 0.9, "reason": "new information"})


def exchanges() -> list[tuple[str, str]]:
    """The session's (user, assistant) pairs."""
    return [(session.TURNS[i][1], session.TURNS[i + 1][1]) for i in range(0, len(session.TURNS), 2)]


class Counted:
    """The scripted model, counting what each stage asks: calls, and words as tokens (as the fake does).

    Counting at the model rather than through memstream's metrics lets the same run measure
    the tree issue 18 was opened on (``bench.perf.baseline``), which had no per-stage metrics.
    """

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.input = self.output = 0
        self._stages = _stages()

    def __call__(self, request: dict[str, Any]) -> str:
        system = text_of_blocks(request.get("system", ""))
        stage = self._stages.get(system, "other")
        answer = respond(request)
        self.calls[stage] = self.calls.get(stage, 0) + 1
        messages = request.get("messages", [])
        self.input += word_count(system) + sum(
            word_count(text_of_blocks(m.get("content"))) for m in messages if isinstance(m, dict)
        )
        self.output += word_count(answer)
        return answer


def _stages() -> dict[str, str]:
    """Each stage's system prompt, naming the stage (the tree's own table where it has one)."""
    try:
        from memstream.telemetry.metrics import _prompt_stages
    except ImportError:  # the tree before per-stage metrics: its three per-turn stages
        from memstream.rules import contradiction, prompts

        return {prompts.NORMAL_SYSTEM: "extract", decision.SYSTEM: "decide", contradiction.SYSTEM: "contradiction"}
    return _prompt_stages()


async def memstream_run(projects: int) -> dict[str, float]:
    """Calls per turn by stage, and tokens in and out per turn, of the e2e session in ``projects`` projects."""
    turns = [
        make_turn(session_id=f"s{p}", project=f"/bench/shop-{p}", role=role, content=content)
        for p in range(projects)
        for role, content in session.TURNS
    ]
    model = Counted()
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic(model, api_key="sk-bench") as fake:
        settings = Settings.from_env(
            {},
            data_dir=Path(tmp),
            topic_prefix=f"calls{os.getpid()}",
            http_port=free_port(),
            anthropic_api_key="sk-bench",
            anthropic_base_url=fake.base_url,
            llm_retries=0,
        )
        running = await runner.start(settings, build_providers(settings, embedder=BundledEmbedder()), web=False)
        try:
            await publish(running.bootstrap, settings.topic_prefix, turns)
            last, quiet_since = -1.0, time.monotonic()
            while time.monotonic() - quiet_since < QUIET_SECONDS:
                await asyncio.sleep(0.5)
                now = pipeline._total(metrics.EVENTS_PROCESSED)
                if now != last:
                    last, quiet_since = now, time.monotonic()
        finally:
            await running.stop()
    n = projects * len(exchanges())
    result = {stage: calls / n for stage, calls in model.calls.items()}
    result["input"] = model.input / n
    result["output"] = model.output / n
    return result


async def mem0_run(projects: int) -> dict[str, Any]:
    from bench.compare import mem0_side_by_side as mem0

    def facts_for(request: dict[str, Any]) -> str:
        user = next(
            (str(m.get("content", "")) for m in reversed(request.get("messages", [])) if m.get("role") == "user"), ""
        )
        new = user.split("## New Messages\n", 1)[-1]
        for key, facts in session.FACTS.items():
            if key in new:
                items = [{"id": str(i), "text": f["memory"], "attributed_to": "assistant"} for i, f in enumerate(facts)]
                return json.dumps({"memory": items})
        return json.dumps({"memory": []})

    mem0.mem0_responder = facts_for  # the same facts memstream's model extracts, per turn
    turns = [{"session": f"s{p}", "user": u, "assistant": a} for p in range(projects) for u, a in exchanges()]
    return await mem0.run_mem0(turns, llm_latency=0.0, concurrency=projects)


async def measure(projects: int, skip_mem0: bool) -> None:
    ours = await memstream_run(projects)
    stages = {k: v for k, v in ours.items() if k not in ("input", "output")}
    print(f"load {os.getloadavg()} on {os.cpu_count()} cores; the e2e session in {projects} projects")
    print(
        f"memstream: {sum(stages.values()):.2f} calls/turn ("
        + ", ".join(f"{k} {v:.2f}" for k, v in sorted(stages.items()))
        + f"), tokens in {ours['input']:.0f} / out {ours['output']:.0f} per turn, "
        f"${cost(ours['input'], ours['output']) * 1000:.3f} per 1,000 turns"
    )
    if skip_mem0:
        return
    theirs = await mem0_run(projects)
    print(
        f"mem0 {theirs['mem0_version']}: {theirs['llm_calls_per_add']:.2f} calls/turn, tokens in "
        f"{theirs['input_tokens_per_add']:.0f} / out {theirs['output_tokens_per_add']:.0f} per turn, "
        f"${cost(theirs['input_tokens_per_add'], theirs['output_tokens_per_add']) * 1000:.3f} per 1,000 turns"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=int, default=3)
    parser.add_argument("--skip-mem0", action="store_true")
    args = parser.parse_args()
    asyncio.run(measure(args.projects, args.skip_mem0))


if __name__ == "__main__":
    main()
