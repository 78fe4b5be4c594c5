"""The bookkeeping as jobs end, in this process on a real server: the
"Failure handling" table, the at-most-once firing, expiry, the callback
queue's fetching end, and the server middleware around a run."""

from __future__ import annotations

import json
import time

import pytest

from tests.batches.jobs import Done, Row
from wurk.errors import Interrupted, Shutdown
from wurk.plugins import outcomes
from wurk.plugins.outcomes import Outcome
from wurk.server.retry import Skip
from wurk_batches import Batch, Status
from wurk_batches.books import Books

DAY = 24 * 3600


def batch_of(config, count=2, **callbacks):
    batch = Batch()
    for event, target in callbacks.items():
        batch.on(event, target, {"event": event})
    with batch.jobs():
        jids = [Row.perform_async(n) for n in range(count)]
    return batch, jids


def callback_jobs(redis, queue="default"):
    return [
        job
        for job in (json.loads(raw) for raw in redis.lrange(f"queue:{queue}", 0, -1))
        if job["class"] == "wurk_batches.CallbackJob"
    ]


def events(redis):
    return sorted(job["args"][1] for job in callback_jobs(redis))


def run(config, job, body):
    """``body`` run as a worker runs a job: through the server chain."""
    return config.server_middleware.invoke(Row(), job, job["queue"], final=body)


def test_failures_is_a_gauge_and_a_death_leaves_pending_alone(config, redis):
    batch, (ok, flaky) = batch_of(config, success=Done, complete=Done, death=Done)
    books = Books.of(config)
    books.ack_failure(batch.bid, flaky)
    books.ack_failure(batch.bid, flaky)  # the same jid failing again: counted once
    assert (Status(batch.bid).failures, Status(batch.bid).failed_jids()) == (1, [flaky])
    books.ack_success(batch.bid, ok)
    books.ack_death(batch.bid, flaky)
    books.ack_death(batch.bid, flaky)  # told twice: booked once
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures) == (2, 1, 0)
    assert (status.failed_jids(), status.dead_jids()) == ([], [flaky])
    assert status.complete
    assert status.complete_at
    assert status.death_at
    assert status.success_at is None
    assert events(redis) == ["complete", "death"]
    assert [entry.bid for entry in Batch.DeadSet()] == [batch.bid]


def test_a_retry_that_succeeds_clears_the_failure(config, redis):
    batch, (jid,) = batch_of(config, 1, success=Done)
    books = Books.of(config)
    books.ack_failure(batch.bid, jid)
    books.ack_success(batch.bid, jid)
    status = Status(batch.bid)
    assert (status.pending, status.failures, status.failed_jids()) == (0, 0, [])
    assert events(redis) == ["success"]


def test_a_dead_job_retried_rejoins_uncounted_and_its_success_lets_success_fire(config, redis):
    batch, (ok, doomed) = batch_of(config, success=Done, death=Done)
    books = Books.of(config)
    books.ack_success(batch.bid, ok)
    books.ack_failure(batch.bid, doomed)
    books.ack_death(batch.bid, doomed)
    [dead] = [job for job in (json.loads(raw) for raw in redis.lrange("queue:default", 0, -1)) if job["jid"] == doomed]
    Row.client_push(dead)  # what a retry from the dead set does: the payload, bid and all, pushed again
    status = Status(batch.bid)
    assert (status.total, status.pending, status.dead_jids()) == (2, 1, [])
    assert batch.include(doomed)
    books.ack_success(batch.bid, doomed)
    assert events(redis) == ["death", "success"]
    books.ack_failure(batch.bid, doomed)
    books.ack_death(batch.bid, doomed)  # not live any more: nothing happens, death never fires twice
    assert events(redis) == ["death", "success"]


def test_racing_acks_of_the_last_job_fire_each_event_once(config, redis):
    import threading

    batch, jids = batch_of(config, 40, success=Done, complete=Done)
    books = Books.of(config)
    threads = [threading.Thread(target=books.ack_success, args=(batch.bid, jid)) for jid in jids * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert events(redis) == ["complete", "success"]
    for jid in jids:  # a worker killed after its ack runs the job again: nothing fires twice
        books.ack_success(batch.bid, jid)
    assert events(redis) == ["complete", "success"]
    assert Status(batch.bid).pending == 0


def test_callback_jobs_are_ordinary_jobs_taken_next_from_their_queue(config, redis):
    Row.set(queue="callbacks").perform_bulk([[n] for n in range(100)])
    batch = Batch()
    batch.callback_queue = "callbacks"
    batch.on("success", Done, {"nested": {"a": [1, 2]}})
    with batch.jobs():
        jid = Row.perform_async("work")
    Books.of(config).ack_success(batch.bid, jid)
    # The fetch takes from the tail (LMOVE ... RIGHT): the callback is there.
    tail = json.loads(redis.lindex("queue:callbacks", -1))
    assert tail["class"] == "wurk_batches.CallbackJob"
    assert tail["args"] == [batch.bid, "success", "tests.batches.jobs.Done", {"nested": {"a": [1, 2]}}]
    assert (tail["queue"], tail["retry"], len(tail["jid"])) == ("callbacks", True, 24)
    assert redis.sismember("queues", "callbacks")


def test_callbacks_queue_last_when_told_to(config, redis):
    config["batch_callbacks_first"] = False
    Row.perform_bulk([[n] for n in range(10)])
    batch, (jid,) = batch_of(config, 1, success=Done)
    Books.of(config).ack_success(batch.bid, jid)
    assert json.loads(redis.lindex("queue:default", 0))["class"] == "wurk_batches.CallbackJob"


def test_a_class_less_callback_resolves_against_callback_class_at_firing(config, redis):
    batch = Batch()
    batch.callback_class = Done
    batch.on("success", "#finished")
    unresolved = Batch()
    unresolved.on("success", "#finished")
    with batch.jobs():
        jid = Row.perform_async(1)
    with unresolved.jobs():
        other = Row.perform_async(2)
    Books.of(config).ack_success(batch.bid, jid)
    Books.of(config).ack_success(unresolved.bid, other)
    targets = {job["args"][0]: job["args"][2] for job in callback_jobs(redis)}
    assert targets == {batch.bid: "tests.batches.jobs.Done#finished", unresolved.bid: "#finished"}


def test_the_server_middleware_books_a_return_as_success_and_a_raise_as_failure(config, redis):
    batch, (_ok, bad) = batch_of(config)
    [job_ok, job_bad] = [json.loads(raw) for raw in reversed(redis.lrange("queue:default", 0, -1))]
    assert run(config, job_ok, lambda: "done") == "done"
    with pytest.raises(ValueError):
        run(config, job_bad, lambda: (_ for _ in ()).throw(ValueError("boom")))
    status = Status(batch.bid)
    assert (status.pending, status.failures, status.failed_jids()) == (1, 1, [bad])


@pytest.mark.parametrize("exit_", [Skip(), Interrupted(), Shutdown(), RuntimeError("during shutdown")])
def test_clean_handled_exits_book_nothing(config, redis, exit_):
    batch, (jid,) = batch_of(config, 1)
    [job] = [json.loads(raw) for raw in redis.lrange("queue:default", 0, -1)]

    def body():
        if isinstance(exit_, RuntimeError):
            try:
                raise Shutdown()
            except Shutdown:
                raise exit_ from None
        raise exit_

    with pytest.raises(BaseException):  # noqa: B017 - each kind propagates as it is
        run(config, job, body)
    status = Status(batch.bid)
    assert (status.pending, status.failures) == (1, 0)
    assert batch.include(jid)


def test_an_expired_job_counts_as_a_success(config, redis):
    batch, (_jid,) = batch_of(config, 1, success=Done)
    [job] = [json.loads(raw) for raw in redis.lrange("queue:default", 0, -1)]
    job["expiry"] = time.time() - 60
    ran = []
    assert run(config, job, lambda: ran.append(1)) is None
    assert ran == []
    # The Expiry middleware tells "died/expired"; the batch saw a return already.
    outcomes.report(config, Outcome.of("died", job, reason="expired"))
    status = Status(batch.bid)
    assert (status.pending, status.dead_jids()) == (0, [])
    assert events(redis) == ["success"]


def test_a_death_told_by_core_is_booked(config, redis):
    batch, (jid,) = batch_of(config, 1, death=Done)
    [job] = [json.loads(raw) for raw in redis.lrange("queue:default", 0, -1)]
    outcomes.report(config, Outcome.of("died", job, reason="retries_exhausted"))
    assert Status(batch.bid).dead_jids() == [jid]
    assert events(redis) == ["death"]  # the only callback registered
    assert Status(batch.bid).complete_at is not None


def test_an_invalidated_batch_acks_its_jobs_as_successes_without_running_them(config, redis):
    batch, _jids = batch_of(config, 2, success=Done)
    batch.invalidate_all()
    ran = []
    for raw in list(redis.lrange("queue:default", 0, -1)):
        assert run(config, json.loads(raw), lambda: ran.append(1)) is None
    assert ran == []
    assert Status(batch.bid).pending == 0
    assert events(redis) == ["success"]


def test_expiry_pending_then_after_success_then_the_markers(config, redis):
    batch, (jid,) = batch_of(config, 1, success=Done)
    Books.of(config).ack_failure(batch.bid, "f" * 24)  # a stray failing jid: the set gets the batch's clock
    assert 29 * DAY < redis.ttl(f"b-{batch.bid}-failed") <= 30 * DAY
    Books.of(config).ack_success(batch.bid, jid)
    assert 23 * 3600 < redis.ttl(f"b-{batch.bid}") <= DAY
    assert 29 * DAY < redis.ttl(f"b-{batch.bid}-success") <= 30 * DAY
    assert 29 * DAY < redis.ttl(f"b-{batch.bid}-complete") <= 30 * DAY
    lingering = Batch()
    lingering.linger = 120
    lingering.expires_in(3600)
    with lingering.jobs():
        other = Row.perform_async(2)
    assert 3500 < redis.ttl(f"b-{lingering.bid}") <= 3600
    Books.of(config).ack_success(lingering.bid, other)
    assert 100 < redis.ttl(f"b-{lingering.bid}") <= 120


def test_a_death_after_the_batch_expired_gets_a_clock_and_fires_nothing(config, redis):
    batch, (jid,) = batch_of(config, 1, death=Done)
    redis.delete(f"b-{batch.bid}", f"b-{batch.bid}-jids")  # what expiry does
    Books.of(config).ack_death(batch.bid, jid)
    assert redis.smembers(f"b-{batch.bid}-died") == {jid.encode()}
    assert 29 * DAY < redis.ttl(f"b-{batch.bid}-died") <= 30 * DAY
    assert not redis.exists(f"b-{batch.bid}")
    assert callback_jobs(redis) == []


def test_a_job_reads_its_bid_and_batch_in_inline_and_fake_modes(config, redis):
    from tests.batches import jobs
    from wurk import testing

    jobs.seen.clear()
    inline = Batch()
    with testing.inline(), inline.jobs():
        jobs.SeesItsBatch.perform_async()
    faked = Batch()
    with testing.fake():
        with faked.jobs():
            jobs.SeesItsBatch.perform_async()
        jobs.SeesItsBatch.drain()
    jobs.SeesItsBatch.perform_inline()  # outside any batch
    assert jobs.seen == [(inline.bid, inline.bid), (faked.bid, faked.bid), (None, None)]


def test_testing_modes_create_the_batch_but_count_and_fire_nothing(config, redis):
    from wurk import testing

    batch = Batch()
    batch.on("success", Done)
    with testing.fake():
        with batch.jobs():
            Row.perform_async(1)
            Row.perform_async(2)
        assert [job["bid"] for job in Row.jobs] == [batch.bid, batch.bid]
        from wurk_batches import Empty

        assert [job["bid"] for job in Empty.jobs] == [batch.bid]
    status = Status(batch.bid)
    assert status.exists
    assert redis.zscore("batches", batch.bid) is not None
    assert (status.total, status.pending) == (0, 0)
    assert redis.llen("queue:default") == 0
    assert not status.complete
    with testing.inline():
        inline = Batch()
        inline.on("success", Done)
        with inline.jobs():
            Row.perform_async(3)
    assert Status(inline.bid).total == 0
    assert redis.keys("queue:*") == []


def opted_in_batch(config):
    from tests.batches import jobs

    jobs.heard.clear()
    batch = Batch()
    batch.on("success", jobs.Heard).on("complete", jobs.Heard)
    return batch


def test_opting_the_middleware_in_makes_inline_runs_ack_and_fire_the_callbacks(config, redis, wurk_testing_middleware):
    from tests.batches import jobs
    from wurk import testing
    from wurk_batches import ServerMiddleware

    wurk_testing_middleware.add(ServerMiddleware)
    batch = opted_in_batch(config)
    with testing.inline(), batch.jobs():
        Row.perform_async(1)
        Row.perform_async(2)
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures, status.complete) == (2, 0, 0, True)
    assert sorted(jobs.heard) == [("complete", batch.bid, 0), ("success", batch.bid, 0)]
    assert redis.keys("queue:*") == []  # counted, never queued


def test_opting_the_middleware_in_makes_drained_runs_ack_and_queue_callbacks(config, redis, wurk_testing_middleware):
    from tests.batches import jobs
    from wurk import testing
    from wurk_batches import ServerMiddleware

    wurk_testing_middleware.add(ServerMiddleware)
    batch = opted_in_batch(config)
    with testing.fake():
        with batch.jobs():
            Row.perform_async(1)
            Row.perform_async(2)
        assert (Status(batch.bid).total, Status(batch.bid).pending) == (2, 2)
        assert Row.drain() == 2
        assert Status(batch.bid).pending == 0
        assert jobs.heard == []  # the callbacks are jobs, in the fake store
        testing.drain_all()
    assert sorted(jobs.heard) == [("complete", batch.bid, 0), ("success", batch.bid, 0)]
    assert redis.keys("queue:*") == []


def test_an_opted_in_inline_failure_is_booked_and_fires_no_success(config, redis, wurk_testing_middleware):
    from tests.batches import jobs
    from wurk import testing
    from wurk_batches import ServerMiddleware

    wurk_testing_middleware.add(ServerMiddleware)
    batch = opted_in_batch(config)
    with testing.inline(), batch.jobs():
        Row.perform_async(1)
        with pytest.raises(ValueError, match="this row is bad"):
            jobs.Fails.perform_async()
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures) == (2, 1, 1)
    assert len(status.failed_jids()) == 1
    assert [event for event, _bid, _pending in jobs.heard if event == "success"] == []
