"""A doorbell that wakes an idle consumer at once when a record it may want was published.

Tansu (0.6) holds every fetch for its whole wait and is never woken by new data, and each fetch
of the worker's ~100 partitions costs it ~5 ms of CPU. So an idle worker on the embedded broker
waits between fetches on its own side (``memstream.kafka.fetch_wait.FetchWait``'s pause), for
seconds, and whoever publishes rings this doorbell to end the pause:

- the worker's own producer, when the broker acknowledged a record (every hop of a turn, and
  whatever the API and the MCP tools publish through it);
- any process that publishes through ``memstream.intake.publish``, the spool's flush (hooks, ingest,
  and ``memstream up``'s own drain) or ``memstream redrive``,
  with a UDP datagram to the broker's own address (:func:`ring`). The worker that started the
  embedded broker listens there (:func:`listen`); on a remote Kafka nobody does, and the datagram
  is lost, which costs nothing: Kafka answers a waiting fetch as soon as data arrives.

A datagram carries nothing and anyone local may send one: the worst it can do is one early fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import threading

log = logging.getLogger(__name__)


class Doorbell:
    """Rung from any thread; waited on by one or more event loops (the consumers' threads)."""

    def __init__(self) -> None:
        #: How many times it rang: a waiter that read it before its fetch went out knows whether
        #: anything was published since, even if the ring came before it began to wait.
        self.rings = 0
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def ring(self) -> None:
        with self._lock:
            self.rings += 1
            waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
                loop.call_soon_threadsafe(_wake, waiter)

    async def wait(self, seen: int, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a ring after the ``seen``-th; True if it rang."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        entry = (loop, waiter)
        with self._lock:
            if self.rings != seen:
                return True
            self._waiters.append(entry)
        try:
            await asyncio.wait({waiter}, timeout=timeout)
        finally:
            with self._lock, contextlib.suppress(ValueError):
                self._waiters.remove(entry)
            waiter.cancel()
        return self.rings != seen


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class _Listener(asyncio.DatagramProtocol):
    def __init__(self, doorbell: Doorbell) -> None:
        self.doorbell = doorbell

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        self.doorbell.ring()


async def listen(doorbell: Doorbell, host: str, port: int) -> asyncio.DatagramTransport | None:
    """Rings ``doorbell`` on every UDP datagram to ``host:port`` (the embedded broker's address);
    None if that port is taken (the worker then waits out its pauses, as on a remote broker)."""
    loop = asyncio.get_running_loop()
    try:
        transport, _ = await loop.create_datagram_endpoint(lambda: _Listener(doorbell), local_addr=(host, port))
    except OSError as exc:
        log.warning("no doorbell on udp %s:%d (%s): an idle worker wakes only on its own publishes", host, port, exc)
        return None
    return transport


def ring(bootstrap: str) -> None:
    """Tell a worker listening at a loopback broker's address that records were published there.

    Brokers not on loopback are skipped: no memstream worker listens beside a remote Kafka.
    """
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        host = host.strip("[]")
        if not port.isdigit() or not _loopback(host):
            continue
        host = "127.0.0.1" if host == "localhost" else host  # where the embedded broker listens
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as sock:
                sock.sendto(b"\x01", (host, int(port)))
        except OSError:  # nobody listens, or the network refuses: the worker's pause ends on its own
            log.debug("could not ring the doorbell at %s", server, exc_info=True)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
