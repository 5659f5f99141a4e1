"""Ctrl-C during a backlog (issues 42.3 and 35.4): SIGINT to `memstream up`'s process group while the
pipeline works ends every memstream process within the drain bound and a grace, the embedded broker
serving the drain until the worker is done, and the exit status says that not everything was drained.
One run of `python -m bench.faults.stop_under_load` (run as a command: tests import nothing from bench/),
which runs ten in a row when asked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memstream.worker.drain import EXIT_NOT_DRAINED

pytestmark = [pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]


def run_stopping_on_timeout(command: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` whose timeout sends SIGTERM, not SIGKILL: the bench then stops the `up` it started
    (in a session of its own, out of reach of a kill of the bench) before it exits. A loaded CI's timeout
    had left that `up` running for 40 minutes."""
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as bench:
        try:
            out, err = bench.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            bench.terminate()
            out, err = bench.communicate(timeout=60)
            pytest.fail(f"the bench did not end within {timeout:.0f} s\n{out}\n{err}")
        return subprocess.CompletedProcess(command, bench.returncode, out, err)


def test_sigint_to_the_group_during_a_backlog_ends_every_process_within_the_bound() -> None:
    command = [sys.executable, "-m", "bench.faults.stop_under_load", "--runs", "1", "--exchanges", "300"]
    ran = run_stopping_on_timeout([*command, "--drain", "3", "--json"], timeout=280)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    outcome = json.loads([line for line in ran.stdout.splitlines() if line.startswith("{")][-1])  # --json's line
    said = f"{ran.stdout}\n{outcome['output']}"
    assert not outcome["left"], f"still running after {outcome['seconds']:.0f}s: {outcome['left']}\n{said}"
    assert outcome["seconds"] <= outcome["bound"], said
    assert outcome["broker_alive_during_drain"], "the broker died before the worker had drained\n" + said
    # 300 exchanges take minutes: the bound cuts the drain short, and the status says so.
    assert outcome["code"] == EXIT_NOT_DRAINED, said
    assert "memstream: draining " in outcome["output"] and "Ctrl-C again to stop now" in outcome["output"]
