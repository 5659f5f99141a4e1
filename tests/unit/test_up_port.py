"""`memstream up` on an API port another process listens on says so in one line, at once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path


def test_up_refuses_a_taken_port_in_one_line_before_starting_anything(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSTREAM_", "ANTHROPIC_", "VOYAGE_", "XAI_"))}
        env.update(HOME=str(tmp_path), MEMSTREAM_DATA_DIR=str(tmp_path / "data"), MEMSTREAM_HTTP_PORT=str(port))
        done = subprocess.run(
            [sys.executable, "-m", "memstream.cli", "up"], env=env, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"memstream: the API's address 127.0.0.1:{port} is not free (Address already in use): another memstream "
        "up, or another program, listens there; stop it or set MEMSTREAM_HTTP_PORT"
    ]
    assert not (tmp_path / "data" / "runtime.json").exists()  # no broker, no worker was started
