"""A batch's writes through lost replies, for real: a proxy lets the server
apply a script call and then resets the client's connection before the reply
reaches it, and the pool sends the call again. Each write must be recognised
when it comes again: no job pushed or counted twice, no callback registered
twice, and no event that fires twice, never, or without a word in the log."""

from __future__ import annotations

import json
import logging
import signal

import pytest

from tests.batches.batch_app import DiesUntilHealed, Recorder, Work
from tests.batches.conftest import FAST, heard
from tests.batches.jobs import Done, Row
from tests.helpers import WorkerPool, wait_for
from wurk.testing.faults import FaultProxy, Matcher
from wurk_batches import Batch, Status
from wurk_batches.books import Books

LOGGER = "tests.batches.lost_replies"


def first_reply_lost(config, script: str) -> Matcher:
    """Every call of ``script`` loses its first reply; the call sent again gets through."""
    return FaultProxy.first_sending(FaultProxy.command(b"EVALSHA", config.scripts[script].sha.encode()))


def queued(redis, queue: str = "default") -> list[dict]:
    return [json.loads(raw) for raw in reversed(redis.lrange(f"queue:{queue}", 0, -1))]


def callback_events(redis, queue: str = "default") -> list[str]:
    return sorted(job["args"][1] for job in queued(redis, queue) if job["class"] == "wurk_batches.CallbackJob")


@pytest.fixture
def logged(lossy_config, caplog) -> pytest.LogCaptureFixture:
    """What the configuration logs at INFO and above (``logged.messages``)."""
    lossy_config.logger = logging.getLogger(LOGGER)
    caplog.set_level(logging.INFO, logger=LOGGER)
    return caplog


def test_a_batch_push_whose_reply_is_lost_pushes_and_counts_each_job_once(lossy_config, fault_proxy, redis):
    batch = Batch()
    with batch.jobs():
        fault_proxy.lose_reply(first_reply_lost(lossy_config, "batches.push"), times=2)
        jids = [Row.perform_async(n) for n in range(2)]
    assert len(fault_proxy.lost) == 2
    assert [job["jid"] for job in queued(redis) if job["class"] != "wurk_batches.CallbackJob"] == jids
    status = Status(batch.bid)
    assert (status.total, status.pending) == (2, 2)


def test_a_new_batch_whose_opening_reply_is_lost_opens(lossy_config, fault_proxy, redis):
    """Before: the open sent again found the batch it had just created and
    refused it as a bid taken already, so the block raised."""
    batch = Batch()
    fault_proxy.lose_reply(first_reply_lost(lossy_config, "batches.open"))
    with batch.jobs():
        jid = Row.perform_async(1)
    assert len(fault_proxy.lost) == 1
    assert Status(batch.bid).total == 1
    assert [job["jid"] for job in queued(redis)] == [jid]


def test_a_callback_whose_registration_reply_is_lost_is_registered_once(lossy_config, fault_proxy, redis):
    batch = Batch()
    with batch.jobs():
        (jid,) = [Row.perform_async(1)]
    fault_proxy.lose_reply(first_reply_lost(lossy_config, "batches.register"))
    Batch(batch.bid).on("success", Done)
    assert len(fault_proxy.lost) == 1
    assert len(json.loads(redis.hget(f"b-{batch.bid}", "cb-success"))) == 1
    Books.of(lossy_config).ack_success(batch.bid, jid)
    assert callback_events(redis) == ["success"]


def test_a_death_whose_ack_reply_is_lost_still_fires_death(lossy_config, fault_proxy, redis):
    """Before: the ack sent again found the jid dead already, answered "not
    booked now", and death never fired."""
    batch = Batch()
    batch.on("death", Done).on("complete", Done)
    with batch.jobs():
        ok, doomed = Row.perform_async(1), Row.perform_async(2)
    books = Books.of(lossy_config)
    books.ack_success(batch.bid, ok)
    fault_proxy.lose_reply(first_reply_lost(lossy_config, "batches.ack_death"))
    books.ack_death(batch.bid, doomed)
    assert len(fault_proxy.lost) == 1
    status = Status(batch.bid)
    assert (status.pending, status.dead_jids()) == (1, [doomed])
    assert status.death_at is not None
    assert callback_events(redis) == ["complete", "death"]


@pytest.mark.parametrize("script", ["batches.ack_success", "batches.ack_failure"])
def test_an_ack_whose_reply_is_lost_is_counted_once(lossy_config, fault_proxy, redis, script):
    batch = Batch()
    batch.on("success", Done)
    with batch.jobs():
        first, second = Row.perform_async(1), Row.perform_async(2)
    books = Books.of(lossy_config)
    fault_proxy.lose_reply(first_reply_lost(lossy_config, script))
    if script == "batches.ack_success":
        books.ack_success(batch.bid, first)
    else:
        books.ack_failure(batch.bid, first)
    assert len(fault_proxy.lost) == 1
    status = Status(batch.bid)
    expected = (1, 0) if script == "batches.ack_success" else (2, 1)
    assert (status.pending, status.failures) == expected
    books.ack_success(batch.bid, second)
    assert callback_events(redis) == ([] if script == "batches.ack_failure" else ["success"])


def test_removing_the_last_jobs_when_the_reply_is_lost_counts_them_and_completes(lossy_config, fault_proxy, redis):
    """Before: the removal sent again removed nothing, answered 0, and the
    batch, with nothing left to ack, never completed."""
    batch = Batch()
    batch.on("complete", Done)
    with batch.jobs():
        jids = [Row.perform_async(n) for n in range(2)]
    fault_proxy.lose_reply(first_reply_lost(lossy_config, "batches.remove_jobs"))
    assert Batch(batch.bid).remove_jobs(*jids) == 2
    assert len(fault_proxy.lost) == 1
    status = Status(batch.bid)
    assert (status.total, status.pending, status.complete) == (0, 0, True)
    assert callback_events(redis) == ["complete"]


def test_a_firing_whose_reply_is_lost_pushes_its_callbacks_once_and_says_so(lossy_config, fault_proxy, redis, logged):
    batch = Batch()
    batch.on("complete", Done).on("success", Done)
    with batch.jobs():
        (jid,) = [Row.perform_async(1)]
    fault_proxy.lose_reply(first_reply_lost(lossy_config, "batches.fire"))
    Books.of(lossy_config).ack_success(batch.bid, jid)
    assert len(fault_proxy.lost) == 1
    assert callback_events(redis) == ["complete", "success"]
    assert f"batch {batch.bid}: complete and success" in logged.messages


def test_a_death_firing_whose_reply_is_lost_pushes_its_callbacks_once_and_says_so(
    lossy_config, fault_proxy, redis, logged
):
    batch = Batch()
    batch.on("death", Done)
    with batch.jobs():
        (jid,) = [Row.perform_async(1)]
    fault_proxy.lose_reply(first_reply_lost(lossy_config, "batches.fire_death"))
    Books.of(lossy_config).ack_death(batch.bid, jid)
    assert len(fault_proxy.lost) == 1
    assert callback_events(redis) == ["death"]
    assert f"batch {batch.bid}: death" in logged.messages
    assert [entry.bid for entry in Batch.DeadSet()] == [batch.bid]


def test_a_closing_whose_reply_is_lost_still_completes_the_batch(lossy_config, fault_proxy, redis):
    batch = Batch()
    batch.on("complete", Done)
    fault_proxy.lose_reply(first_reply_lost(lossy_config, "batches.close"))
    with batch.jobs():
        pass  # an empty block: the empty marker job is its only job
    assert len(fault_proxy.lost) == 1
    [empty] = queued(redis)
    Books.of(lossy_config).ack_success(batch.bid, empty["jid"])
    assert callback_events(redis) == ["complete"]


def test_callbacks_handed_to_a_testing_mode_after_a_lost_reply_still_run(
    lossy_config, fault_proxy, redis, wurk_testing_middleware
):
    """Under a testing mode that counts batches, a fired callback is taken
    back out of the real queue and run inline. Before: the removal sent again
    found nothing, and the callback ran nowhere."""
    from tests.batches import jobs
    from wurk import testing
    from wurk_batches import ServerMiddleware

    wurk_testing_middleware.add(ServerMiddleware)
    jobs.heard.clear()
    batch = Batch()
    batch.on("success", jobs.Heard).on("complete", jobs.Heard)
    fault_proxy.lose_reply(FaultProxy.command(b"LREM", b"queue:default"), times=2)
    with testing.inline(), batch.jobs():
        Row.perform_async(1)
    assert len(fault_proxy.lost) == 2
    assert sorted(jobs.heard) == [("complete", batch.bid, 0), ("success", batch.bid, 0)]
    assert redis.keys("queue:*") == []


@pytest.mark.slow
def test_a_worker_whose_acks_lose_their_replies_books_and_fires_each_event_once(config, fault_proxy, redis, tmp_path):
    """A real worker talking through the proxy: the success and death acks it
    sends after each run lose their first reply, and the batch still ends
    with complete and death, each heard once, and its counters exact."""
    batch = Batch()
    batch.on("death", Recorder).on("complete", Recorder).on("success", Recorder)
    with batch.jobs():
        Work.perform_async("a")
        doomed = DiesUntilHealed.perform_async("doomed")
    for script in ("batches.ack_success", "batches.ack_death"):
        fault_proxy.lose_reply(first_reply_lost(config, script))
    pool = WorkerPool(fault_proxy.url(), tmp_path, "tests.batches.batch_app", FAST)
    try:
        worker = pool.start("-c", "2")
        wait_for(lambda: sorted(heard(redis, batch.bid)) == ["complete", "death"], timeout=60)
        # The end marker: a job pushed after both callbacks ran, and run after them.
        Work.perform_async("end")
        wait_for(lambda: redis.hexists("executions", "end"), timeout=30)
        worker.signal(signal.SIGTERM)
        assert worker.wait(30) == 0
    finally:
        pool.stop_all()
    assert sorted(heard(redis, batch.bid)) == ["complete", "death"]
    assert len(fault_proxy.lost) == 2
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures) == (2, 1, 0)
    assert status.dead_jids() == [doomed]
