"""Issue 18's "before", measured in the same run as its "after".

This machine varies by ±20% between runs, so a figure recorded weeks ago is no comparison.
The harness instead runs the pipeline as it was when issue 18 was opened (``BASELINE``, read
from this clone's history) beside the current one, turn for turn on the same inputs:

    .venv/bin/python -m bench.perf.baseline [--rev a1adcc9]     # both trees, the overhead run and LLM calls

The old tree is unpacked with ``git archive`` into a temporary directory and run in a
subprocess of this virtualenv with that directory first on ``sys.path``: its ``memstream``,
``bench`` and ``tests`` are imported from there, ahead of the installed ones, and so are its
``agents``, ``topics`` and ``schemas`` (``memstream.agents`` and the others: the script adds the
tree to ``memstream``'s own path, since the editable install maps those names to this clone with a
finder that runs only when the path finds nothing -- before 2026-11-26 it did not, and an old
tree's "before" ran this clone's stages on the old core). Its own ``bench.perf.pipeline.run``
measures it; LLM calls are counted by ``bench.compare.llm_calls.memstream_run``, this tree's file,
loaded by path into the old tree's process, because it counts at the fake model rather than
through metrics the old tree lacks.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The tree issue 18 was opened on (2026-11-22): the figures it quotes were measured there.
BASELINE = "a1adcc9"
#: Seconds one measurement in the old tree may take.
TIMEOUT_S = 1200
ROOT = Path(__file__).resolve().parents[2]

#: Runs in the old tree: ``<function> <json kwargs>``; prints one JSON line, the result.
_SCRIPT = """
import asyncio, importlib.util, json, logging, os, sys
import memstream
# The editable install maps memstream.agents, .topics and .schemas to this clone's folders with a
# finder that runs only when the path finds nothing; the old tree keeps them beside its memstream/,
# not in it, so without this they would be this clone's, not the old tree's.
memstream.__path__.append(os.getcwd())
logging.basicConfig(level=logging.ERROR)
function, kwargs = sys.argv[1], json.loads(sys.argv[2])
if function == "pipeline":
    from bench import pipeline
    r = asyncio.run(pipeline.run(**kwargs))
    result = {k: getattr(r, k) for k in ("turns_per_s", "cpu_ms_per_turn", "events_per_turn", "order_kept")}
elif function == "llm_calls":
    spec = importlib.util.spec_from_file_location("current_llm_calls", kwargs.pop("path"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = asyncio.run(module.memstream_run(**kwargs))
elif function == "light":
    spec = importlib.util.spec_from_file_location("current_light", kwargs.pop("path"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = asyncio.run(getattr(module, kwargs.pop("call"))(**kwargs))
else:
    raise SystemExit(f"unknown function {function!r}")
print(json.dumps(result))
"""


class BaselineError(RuntimeError):
    """The old tree could not be unpacked or its measurement failed."""


@contextmanager
def checkout(rev: str = BASELINE) -> Iterator[Path]:
    """The tree at ``rev``, unpacked from this clone's history into a temporary directory."""
    try:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = exc.stderr.decode(errors="replace").strip() if isinstance(exc, subprocess.CalledProcessError) else exc
        raise BaselineError(f"cannot read {rev} from the git history at {ROOT}: {detail}") from exc
    with tempfile.TemporaryDirectory(prefix=f"memstream-{rev}-") as tmp:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp)


def run(tree: Path, function: str, **kwargs: Any) -> dict[str, Any]:
    """``function`` (``pipeline``, ``llm_calls``, or ``light``: a function of this tree's ``bench.perf.light``
    named by ``call``) measured in ``tree``, in a process of its own."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT, function, json.dumps(kwargs)],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise BaselineError(f"{function} in {tree.name} took over {TIMEOUT_S} s") from exc
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise BaselineError(f"{function} in {tree.name} exited {done.returncode}: {tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def pipeline(tree: Path, *, sessions: int, turns_per_session: int) -> dict[str, Any]:
    """The old tree's overhead run: instant fake LLM, fake embedder (``bench.perf.pipeline.run``)."""
    return run(
        tree, "pipeline", sessions=sessions, turns_per_session=turns_per_session, llm_latency=0.0, embedder="fake"
    )


def llm_calls(tree: Path, *, projects: int) -> dict[str, float]:
    """LLM calls by stage and tokens per turn of the e2e session in the old tree."""
    return run(tree, "llm_calls", path=str(ROOT / "bench" / "compare" / "llm_calls.py"), projects=projects)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default=BASELINE, help=f"the old tree (default {BASELINE})")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=5)
    args = parser.parse_args()
    with checkout(args.rev) as tree:
        print(f"{args.rev}: overhead run", pipeline(tree, sessions=args.sessions, turns_per_session=args.turns))
        print(f"{args.rev}: LLM calls per turn, e2e session", llm_calls(tree, projects=3))


if __name__ == "__main__":
    main()
