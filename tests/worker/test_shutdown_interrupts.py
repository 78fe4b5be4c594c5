"""A shutdown's interrupt never lands inside a critical section.

An in-process manager runs one processor thread against the real server;
``tests.worker.shutdown_app`` parks that thread inside the acknowledgement,
inside the booking of a failure before its write and after it, or in the
job's own code. ``stop`` is then called with its deadline already past. Each
time the job must end in exactly one place: booked (retry or dead set) and
acknowledged, or acknowledged after success, or given back to its queue —
never booked and given back, never lost — and the thread must end.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import claimed_jobs, wait_for
from tests.worker import shutdown_app
from tests.worker.shutdown_app import DiesAtOnce, ParkingFetcher, RetriesLater, Spins, Succeeds
from wurk.errors import Shutdown
from wurk.server import manager as manager_module
from wurk.server.identity import ProcessIdentity
from wurk.server.interrupts import Shield
from wurk.server.loop import LoopRunner
from wurk.server.manager import Manager
from wurk.server.processor import ProcessStats


@pytest.fixture
def manager(config, monkeypatch) -> Iterator[Manager]:
    """One processor thread on ``default``, with the parking fetcher and
    death handler; the booking grace long enough for any loaded machine."""
    monkeypatch.setattr(manager_module, "BOOKING_GRACE", 60.0)
    shutdown_app.reset()
    config.concurrency = 1
    config.queues = ["default"]
    config["fetch_poll_interval"] = 0.2
    config["fetch_class"] = ParkingFetcher
    config.death_handlers.append(shutdown_app.park_in_death_handler)
    config.default_capsule.prepare()
    loop = LoopRunner()
    made = Manager(config.default_capsule, ProcessIdentity.current(), ProcessStats(), {}, loop)
    made.start()
    yield made
    shutdown_app.RELEASE.set()
    made.quiet()
    for processor in made.processors:
        processor.thread.join(30)
    if not made.fetcher.ledger.stopping.is_set() or made.fetcher.ledger.outstanding:
        made.fetcher.requeue_all()
    loop.stop()


def stop_in_background(manager: Manager) -> tuple[threading.Thread, list[int]]:
    """``stop`` with its deadline already past, from another thread (the test
    thread lets the parked processor go meanwhile); what it returned."""
    returned: list[int] = []
    thread = threading.Thread(target=lambda: returned.append(manager.stop(time.monotonic() - 1)))
    thread.start()
    return thread, returned


def jids(redis, key: str) -> list[str]:
    kind = redis.type(key)
    members = redis.lrange(key, 0, -1) if kind == b"list" else redis.zrange(key, 0, -1)
    return [json.loads(member)["jid"] for member in members]


def placement(redis, jid: str) -> dict[str, int]:
    """Where the job is, in every place a job can be."""
    places: dict[str, Any] = {
        "queue": jids(redis, "queue:default"),
        "retry": jids(redis, "retry"),
        "dead": jids(redis, "dead"),
        "private": [json.loads(job)["jid"] for job in claimed_jobs(redis)],
    }
    return {place: found.count(jid) for place, found in places.items() if jid in found}


def assert_ledger_at_rest(manager: Manager) -> None:
    """The fetcher's books hold nothing and owe nothing once stop returned."""
    ledger = manager.fetcher.ledger
    with ledger.lock:
        assert (ledger.in_flight, ledger.acks, list(ledger.local), ledger.outstanding) == (0, [], [], {})
        assert not ledger.reconciling


def interrupt_inside_a_section(manager: Manager, redis, jid: str) -> list[int]:
    """Stop while the processor is parked in a section: the interrupt waits,
    and so does the requeue, until the section ends. What stop returned."""
    assert shutdown_app.PARKED.wait(30), "the processor never reached the section"
    [processor] = manager.processors
    stopper, returned = stop_in_background(manager)
    wait_for(lambda: processor.shield.pending, timeout=30)
    assert processor.thread.is_alive()
    assert stopper.is_alive()
    assert not processor.shield.interrupted  # held off, not raised
    assert placement(redis, jid).get("private") == 1  # and not given back meanwhile
    assert "queue" not in placement(redis, jid)
    shutdown_app.RELEASE.set()
    stopper.join(60)
    assert not stopper.is_alive()
    processor.thread.join(30)
    assert not processor.thread.is_alive()
    assert processor.shield.interrupted  # raised where the section ended
    assert not processor.shield.pending
    return returned


def test_an_interrupt_during_a_dead_set_booking_waits_for_the_acknowledgement(manager, redis):
    jid = DiesAtOnce.perform_async()
    returned = interrupt_inside_a_section(manager, redis, jid)
    assert placement(redis, jid) == {"dead": 1}  # booked, acknowledged, not given back
    assert returned == [0]
    assert_ledger_at_rest(manager)


def test_an_interrupt_before_the_retry_write_lets_the_booking_finish(manager, redis):
    jid = RetriesLater.perform_async()
    returned = interrupt_inside_a_section(manager, redis, jid)
    assert placement(redis, jid) == {"retry": 1}
    [member] = redis.zrange("retry", 0, -1)
    assert json.loads(member)["retry_count"] == 0
    assert returned == [0]
    assert_ledger_at_rest(manager)


def test_an_interrupt_during_the_acknowledgement_waits_for_it(manager, redis):
    jid = Succeeds.perform_async()
    returned = interrupt_inside_a_section(manager, redis, jid)
    assert placement(redis, jid) == {}  # done: acknowledged, in no queue, in no set
    assert returned == [0]
    assert manager.stats.swap()[:2] == (1, 0)
    assert_ledger_at_rest(manager)


def test_an_interrupt_outside_every_section_lands_at_once(manager, redis):
    jid = Spins.perform_async()
    assert shutdown_app.STARTED.wait(30)
    [processor] = manager.processors
    started = time.monotonic()
    returned = manager.stop(time.monotonic() - 1)  # RELEASE is never set: only the interrupt ends the job
    processor.thread.join(30)
    assert not processor.thread.is_alive()
    assert time.monotonic() - started < 15
    assert processor.shield.interrupted
    assert returned == 1
    assert placement(redis, jid) == {"queue": 1}  # given back once, booked nowhere
    assert_ledger_at_rest(manager)


def test_a_settle_waiting_on_a_section_wakes_when_it_ends() -> None:
    """The end of a section is told only to a waiting ``settle``: one that
    waits while the acknowledgement runs returns once it ends, and a deferred
    interrupt is raised there, in the thread that held it."""
    shield = Shield(threading.current_thread())
    settled: list[bool] = []
    section = shield.critical()
    section.__enter__()
    assert shield.interrupt() is False
    assert shield.pending
    waiter = threading.Thread(target=lambda: settled.append(shield.settle(60.0)))
    waiter.start()
    wait_for(lambda: shield._settling == 1, timeout=30)
    with pytest.raises(Shutdown):
        section.__exit__(None, None, None)
    waiter.join(30)
    assert settled == [True]
    assert shield.interrupted
    assert not shield.inside


def test_a_job_that_booked_nothing_releases_nothing() -> None:
    """``release`` after a job that entered no booking leaves the shield as it
    was: an interrupt asked for next is raised at once."""
    shield = Shield(threading.Thread(target=lambda: None))
    with shield.critical():
        assert shield.inside
    shield.release()
    assert not shield.inside
    assert not shield.pending
    assert not shield.interrupted
