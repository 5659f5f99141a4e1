"""Embeddings per stored exchange in raw mode: one real session through the pipeline, live and whole.

    nice -n 10 .venv/bin/python -m bench.perf.raw_refresh [--session spotter-4d5611e5] [--mode live whole]

Raw mode refreshes an exchange's one memory with every message of it (issue 37): each message makes a fact
of the whole exchange so far. The session (a labelled real fixture, ``tests/fixtures/capture/real``) is
written the way its CLI writes it, its hook's note taken after each write as ``up`` takes it
(``tests/support/live_capture.py``), and its spooled turns published to an in-process pipeline (embedded
broker, the bundled embedder, no LLM):

- ``live``: each hook's turns once the previous hook's are stored, as a person's session comes (the least
  a refresh can be taken together with the next);
- ``burst``: each hook's turns at once, one hook after the other, as the live bench replays them;
- ``whole``: the whole file's turns at once (``memstream ingest``).

It prints, per way, the texts the embedder embedded, the facts taken together with a newer one of their
exchange (``coalesced``), the embedder's CPU (process CPU while it ran), and the memories stored, which
must be the memories the pipeline's rules give for the whole session. The load average is printed beside.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memstream.capture.hook import capture
from memstream.capture.spool import make_turns
from memstream.capture.watch import release_quiet
from memstream.identity import project_key
from memstream.intake.publish import publish
from memstream.worker import runner
from tests.conftest import make_settings
from tests.support import live_capture as lc

#: The longest wait for one step's memories (s).
STEP_TIMEOUT_S = 900.0


def spooled_steps(name: str, home: Path, data: Path, chunks: int) -> list[list[dict[str, Any]]]:
    """The session's turns as its hooks spooled them, one list per hook call (and the quiet release)."""
    (recorded,) = lc.recorded_sessions(only=[name])
    settings = lc.in_process_settings(home, data)
    session = lc.replayed(recorded, home, chunks=chunks)
    steps: list[list[dict[str, Any]]] = []
    seen = 0

    def taken() -> None:
        nonlocal seen
        turns = lc.spooled_turns(data / "capture.db") if (data / "capture.db").exists() else []
        steps.append(turns[seen:])
        seen = len(turns)

    def fire(host: str, event: str, body: dict[str, Any], replayed: lc.Replayed, step: int) -> None:
        capture(host, body, settings, send=False)
        taken()

    lc.replay(session, fire)
    release_quiet(settings, quiet=0.0)
    taken()
    return [s for s in steps if s]


class Counting:
    """The pipeline's embedder, counted: texts and process CPU while it embeds."""

    def __init__(self, embedder: Any) -> None:
        self.real = embedder.embed_documents
        self.texts = 0
        self.cpu = 0.0
        embedder.embed_documents = self.embed_documents

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        began = time.process_time()
        try:
            return list(await self.real(texts))
        finally:
            self.cpu += time.process_time() - began
            self.texts += len(texts)


async def run(mode: str, steps: list[list[dict[str, Any]]], folder: Path) -> dict[str, Any]:
    running = await runner.start(make_settings(folder / "data"), loglevel="warning")
    try:
        await running.providers.embedder.embed_documents(["the model loaded before anything is counted"])
        counting = Counting(running.providers.embedder)
        projects = sorted({str(t["project"]) for step in steps for t in step})
        keys = [project_key(p) for p in projects]
        user = running.settings.user
        began, cpu = time.monotonic(), time.process_time()
        batches = [[t for step in steps for t in step]] if mode == "whole" else steps
        sent: list[dict[str, Any]] = []
        for batch in batches:
            await publish(running.bootstrap, running.settings.topic_prefix, make_turns(batch, user))
            sent.extend(batch)
            if mode == "live" or batch is batches[-1]:
                await stored(running, keys, sent)
                print(f"    {mode}: {len(sent)} turns stored at {time.monotonic() - began:.0f} s", flush=True)
        memories = await running.providers.store.list(keys)
        return {
            "texts embedded": counting.texts,
            "embedder cpu s": round(counting.cpu, 1),
            "pipeline cpu s": round(time.process_time() - cpu, 1),
            "wall s": round(time.monotonic() - began, 1),
            "memories": len([m for m in memories if m.type == "conversation" and m.active]),
        }
    finally:
        await running.stop()


async def stored(running: runner.Running, keys: list[str], sent: list[dict[str, Any]]) -> None:
    """Wait until the store holds the memories the pipeline's rules give for the turns ``sent``."""
    wanted = {lc.norm(m.text) for m in lc.raw_mode_memories(sent)}
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while True:
        have = {lc.norm(m.text) for m in await running.providers.store.list(keys) if m.active}
        if wanted <= have:
            return
        if time.monotonic() > deadline:
            missing = "\n".join(t[-300:] for t in wanted - have)
            raise SystemExit(
                f"not stored after {STEP_TIMEOUT_S:.0f} s, {len(wanted - have)} of {len(wanted)}:\n{missing}"
            )
        await asyncio.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--session", default="spotter-4d5611e5", help="a labelled real fixture's name")
    parser.add_argument("--mode", nargs="*", default=["live", "burst", "whole"], choices=["live", "burst", "whole"])
    parser.add_argument("--chunks", type=int, default=lc.CHUNKS)
    parser.add_argument(
        "--every-message", action="store_true", help="embed every fact of an exchange, as before issue 37's fix"
    )
    args = parser.parse_args()
    if args.every_message:
        from memstream.agents import embed

        embed.newest_of_each_exchange = lambda facts: [True] * len(facts)
    with tempfile.TemporaryDirectory(prefix="memstream-raw-refresh-") as tmp:
        folder = Path(tmp)
        (folder / "home").mkdir()
        steps = spooled_steps(args.session, folder / "home", folder / "spool", args.chunks)
        turns = [t for step in steps for t in step]
        memories = lc.raw_mode_memories(turns)
        replies = sum(1 for t in turns if t["role"] == "assistant")
        print(
            f"{args.session}: {len(turns)} turns ({replies} replies) in {len(steps)} hook calls, "
            f"{len(memories)} exchange memories by the rules"
        )
        for mode in args.mode:
            figures = asyncio.run(run(mode, steps, folder / mode))
            print(f"  {mode:5}: {figures} (load average {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
