"""The doorbell that ends an idle consumer's pause: rung in-process, from another thread, or by a datagram."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memstream.kafka import doorbell
from memstream.kafka.broker import free_port
from memstream.kafka.doorbell import Doorbell


def test_a_ring_since_the_count_was_read_ends_the_wait_at_once() -> None:
    bell = Doorbell()
    seen = bell.rings
    bell.ring()  # before the wait began: e.g. while the fetch was in flight
    assert asyncio.run(bell.wait(seen, 60)) is True


def test_without_a_ring_the_wait_times_out() -> None:
    bell = Doorbell()
    assert asyncio.run(bell.wait(bell.rings, 0.01)) is False
    assert not bell._waiters


def test_a_ring_from_another_thread_wakes_a_waiting_loop() -> None:
    bell = Doorbell()

    async def wait_for_the_other_thread() -> bool:
        waiting = asyncio.ensure_future(bell.wait(bell.rings, 60))
        await asyncio.sleep(0)  # the wait registers itself, then the other thread rings
        threading.Thread(target=bell.ring).start()
        return await asyncio.wait_for(waiting, 30)

    assert asyncio.run(wait_for_the_other_thread()) is True


def test_a_datagram_to_the_brokers_address_rings() -> None:
    port = free_port()
    bell = Doorbell()

    async def ring_from_a_publisher() -> tuple[bool, bool]:
        endpoint = await doorbell.listen(bell, "127.0.0.1", port)
        assert endpoint is not None
        try:
            seen = bell.rings
            doorbell.ring(f"127.0.0.1:{port}")
            first = await bell.wait(seen, 30)
            seen = bell.rings
            doorbell.ring(f"localhost:{port}")
            return first, await bell.wait(seen, 30)
        finally:
            endpoint.close()

    assert asyncio.run(ring_from_a_publisher()) == (True, True)


def test_a_taken_port_means_no_doorbell_rather_than_a_failed_start() -> None:
    port = free_port()

    async def twice() -> tuple[bool, bool]:
        first = await doorbell.listen(Doorbell(), "127.0.0.1", port)
        try:
            second = await doorbell.listen(Doorbell(), "127.0.0.1", port)
            return first is not None, second is not None
        finally:
            if first is not None:
                first.close()

    assert asyncio.run(twice()) == (True, False)


def test_only_loopback_brokers_are_rung(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[str, int]] = []

    class Recording:
        def __init__(self, *args: object) -> None:
            pass

        def __enter__(self) -> Recording:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def sendto(self, data: bytes, address: tuple[str, int]) -> None:
            sent.append(address)

    monkeypatch.setattr(doorbell.socket, "socket", Recording)
    doorbell.ring("kafka-1.example:9092,127.0.0.1:9093,[::1]:9094,localhost:9095,10.0.0.5:9092,nonsense")
    assert sent == [("127.0.0.1", 9093), ("::1", 9094), ("127.0.0.1", 9095)]
