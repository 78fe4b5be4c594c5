"""Batches on real worker processes and a real server: the issue's must-holds."""

from __future__ import annotations

import json
import signal

import pytest

from tests.batches.batch_app import (
    ASYNC_STARTS,
    AddsSibling,
    AsyncFailsUntilHealed,
    AsyncHeld,
    AsyncThrottled,
    AsyncWork,
    DiesUntilHealed,
    Recorder,
    Slow,
    Throttled,
    Work,
)
from tests.batches.conftest import callbacks, heard
from tests.helpers import Subprocess, wait_for
from wurk.api import DeadSet
from wurk_batches import Batch, Status
from wurk_limiter import Limiter

pytestmark = pytest.mark.slow

RECORDER = "tests.batches.batch_app.Recorder"


def settle(redis, *workers: Subprocess) -> None:
    """The end marker for "fired once": every worker stopped (TERM) and exited.

    Each job a worker took has finished by then, with every callback it
    pushed, and a callback pushed but not yet run would still be in its
    queue, so a second, wrong, firing shows up however slowly the workers ran.
    """
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(30) == 0
    assert redis.llen("queue:default") == 0, "a callback left unrun"


def test_ten_thousand_jobs_on_two_workers_fire_success_and_complete_once_after_the_last(workers, redis):
    batch = Batch()
    batch.on("success", Recorder, {"n": 10_000}).on("complete", Recorder)
    with batch.jobs():
        Work.perform_bulk([[n] for n in range(10_000)])
    assert Status(batch.bid).total == 10_000
    assert redis.llen("queue:default") == 10_000
    first, second = workers.start("-c", "5"), workers.start("-c", "5")
    wait_for(lambda: len(heard(redis, batch.bid)) >= 2, timeout=150)
    settle(redis, first, second)
    assert sorted(heard(redis, batch.bid)) == ["complete", "success"]
    for event, _bid, options, _order, seen in callbacks(redis):
        # Each callback ran after every job: none pending, all ten thousand run.
        assert seen == {"pending": 0, "jobs_run": 10_000, "complete": True}, event
        assert options == ({"n": 10_000} if event == "success" else {})
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures, status.complete) == (10_000, 0, 0, True)
    assert status.failed_jids() == []
    assert status.dead_jids() == []
    assert redis.llen("queue:default") == 0
    assert redis.hlen("executions") == 10_000
    assert not batch.include(redis.hkeys("executions")[0].decode())


def test_a_death_fires_death_once_and_success_follows_its_recovery_from_the_dead_set(workers, redis):
    batch = Batch()
    batch.on("death", Recorder).on("success", Recorder).on("complete", Recorder)
    with batch.jobs():
        Work.perform_async("a")
        Work.perform_async("b")
        doomed = DiesUntilHealed.perform_async("doomed")
    worker = workers.start("-c", "3")
    wait_for(lambda: sorted(heard(redis, batch.bid)) == ["complete", "death"], timeout=60)
    status = Status(batch.bid)
    # A death leaves pending alone: the batch is complete, not successful.
    assert (status.total, status.pending, status.failures, status.complete) == (3, 1, 0, True)
    assert status.dead_jids() == [doomed]
    assert status.death_at is not None
    assert status.success_at is None
    assert [entry.bid for entry in Batch.DeadSet()] == [batch.bid]

    redis.set("healed", "1")
    assert DeadSet().find_job(doomed).retry() is not None
    wait_for(lambda: "success" in heard(redis, batch.bid), timeout=60)
    settle(redis, worker)
    assert heard(redis, batch.bid) == ["complete", "death", "success"] or heard(redis, batch.bid) == [
        "death",
        "complete",
        "success",
    ]
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures) == (3, 0, 0)
    assert status.dead_jids() == []
    assert status.success_at is not None
    assert int(redis.hget("attempts", "doomed")) == 2


def nest_three_levels(doomed: bool = False) -> tuple[Batch, Batch, Batch]:
    top, middle, bottom = Batch(), Batch(), Batch()
    for level, batch in (("top", top), ("middle", middle), ("bottom", bottom)):
        for event in ("success", "complete", "death"):
            batch.on(event, Recorder, {"level": level})
    with top.jobs():
        Work.perform_async("top-1")
        with middle.jobs():
            Work.perform_async("middle-1")
            with bottom.jobs():
                for n in range(5):
                    Work.perform_async(f"bottom-{n}")
                if doomed:
                    DiesUntilHealed.perform_async("deep")
            Work.perform_async("middle-2")
        Work.perform_async("top-2")
    return top, middle, bottom


def test_three_levels_fire_children_first_and_each_parent_after_every_descendant(workers, redis):
    top, middle, bottom = nest_three_levels()
    assert (middle.parent_bid, bottom.parent_bid, top.parent_bid) == (top.bid, middle.bid, None)
    assert Status(top.bid).child_count() == 1
    assert Status(middle.bid).child_count() == 1
    worker = workers.start("-c", "5")
    wait_for(lambda: len(heard(redis, top.bid)) == 2, timeout=60)
    settle(redis, worker)
    for batch in (top, middle, bottom):
        assert sorted(heard(redis, batch.bid)) == ["complete", "success"]
    done = {key.decode(): int(value) for key, value in redis.hgetall("callbacks_done").items()}
    started = {(event, bid): order for event, bid, _options, order, _seen in callbacks(redis)}
    finished_jobs = [int(value) for value in redis.hvals("finished")]
    for parent, child in ((top, middle), (middle, bottom)):
        # A parent's callbacks start only once each of its child's callbacks is done.
        last_child = max(done[f"{event}:{child.bid}"] for event in ("complete", "success"))
        assert all(started[(event, parent.bid)] > last_child for event in ("complete", "success"))
    assert min(started.values()) > max(finished_jobs)  # and every job ran first


def test_a_death_deep_in_the_tree_reaches_every_ancestor(workers, redis):
    top, middle, bottom = nest_three_levels(doomed=True)
    worker = workers.start("-c", "5")
    wait_for(lambda: len(heard(redis, top.bid)) == 2, timeout=60)
    settle(redis, worker)
    for batch in (top, middle, bottom):
        # Each one: death once, complete once, never success.
        assert sorted(heard(redis, batch.bid)) == ["complete", "death"], batch
        assert Status(batch.bid).death_at is not None
    assert {status.bid for status in Batch.DeadSet()} == {top.bid, middle.bid, bottom.bid}
    assert Status(bottom.bid).dead_jids() != []
    assert Status(top.bid).dead_jids() == []


def test_a_worker_killed_mid_batch_still_completes_it_and_callbacks_fire_once(workers, redis):
    batch = Batch()
    batch.on("success", Recorder).on("complete", Recorder)
    with batch.jobs():
        for n in range(6):
            Slow.perform_async(f"slow-{n}", 1.5)
        Work.perform_bulk([[n] for n in range(50)])
    first = workers.start("-c", "3")
    wait_for(lambda: redis.llen("started") >= 3, timeout=30)
    first.signal(signal.SIGKILL)
    first.wait(10)
    assert heard(redis, batch.bid) == []
    second = workers.start("-c", "3")
    wait_for(lambda: len(heard(redis, batch.bid)) == 2, timeout=90)
    settle(redis, second)
    assert sorted(heard(redis, batch.bid)) == ["complete", "success"]
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures, status.complete) == (56, 0, 0, True)
    assert all(int(count) >= 1 for count in redis.hvals("executions"))
    assert redis.hlen("executions") == 56


def test_a_callback_opens_its_parent_to_start_the_next_stage(workers, redis):
    workflow = Batch()
    workflow.on("success", Recorder, {"workflow": True})
    with workflow.jobs():
        stage_one = Batch()
        stage_one.on("success", "tests.batches.batch_app.Workflow#stage_one_done", {"oid": 7})
        with stage_one.jobs():
            Work.perform_async("pick")
    worker = workers.start("-c", "3")
    wait_for(lambda: "success" in heard(redis, workflow.bid), timeout=60)
    settle(redis, worker)
    events = [(entry[0], entry[2]) for entry in callbacks(redis)]
    assert events == [("stage_one_done", {"oid": 7}), ("finished", {"stage": 2}), ("success", {"workflow": True})]
    assert Status(workflow.bid).child_count() == 2
    assert {key.decode() for key in redis.hkeys("executions")} == {"pick", "pack", "label"}


def test_a_job_adds_a_sibling_to_its_own_batch_and_the_batch_waits_for_it(workers, redis):
    batch = Batch()
    batch.on("success", Recorder)
    with batch.jobs():
        AddsSibling.perform_async("parent-job")
    worker = workers.start("-c", "2")
    wait_for(lambda: heard(redis, batch.bid) == ["success"], timeout=60)
    settle(redis, worker)
    [(_event, _bid, _options, _order, seen)] = callbacks(redis)
    assert seen["jobs_run"] == 2
    assert Status(batch.bid).total == 2


def test_an_unresolvable_callback_goes_to_the_dead_set_on_its_first_attempt(workers, redis):
    batch = Batch()
    batch.on("success", "tests.batches.batch_app.NoSuchCallback", {"k": [1, {"x": None}]})
    batch.on("success", Recorder, {"k": [1, {"x": None}]})
    with batch.jobs():
        Work.perform_async("only")
    worker = workers.start("-c", "2")
    wait_for(lambda: redis.zcard("dead") == 1 and heard(redis, batch.bid) == ["success"], timeout=60)
    dead = json.loads(redis.zrange("dead", 0, -1)[0])
    assert dead["class"] == "wurk_batches.CallbackJob"
    assert dead["retry_count"] == 0
    assert dead["error_class"] == "wurk_batches.callbacks.UnresolvableTarget"
    assert "NoSuchCallback" in dead["error_message"]
    # The other callback ran, with its options as JSON gives them back.
    assert callbacks(redis)[0][2] == {"k": [1, {"x": None}]}
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_a_rate_limited_job_acks_nothing_until_it_runs_within_its_limit(workers, redis):
    with Limiter.window("batch-gate", 1, 3600).within_limit():
        pass  # the one admission the gate has in an hour, spent
    batch = Batch()
    batch.on("success", Recorder).on("complete", Recorder)
    with batch.jobs():
        throttled = Throttled.perform_async("throttled")
        Work.perform_async("free")
    worker = workers.start("-c", "2")

    def rescheduled_twice() -> bool:
        entries = [json.loads(member) for member in redis.zrange("schedule", 0, -1)]
        return any(entry["jid"] == throttled and entry.get("overrated", 0) >= 2 for entry in entries)

    wait_for(rescheduled_twice, timeout=30)
    status = Status(batch.bid)
    # Each reschedule booked nothing: the job is live, neither failed nor done.
    assert (status.total, status.pending, status.failures, status.complete) == (2, 1, 0, False)
    assert status.failed_jids() == []
    assert batch.include(throttled)
    assert heard(redis, batch.bid) == []
    assert redis.zcard("retry") == 0

    Limiter.window("batch-gate", 1, 3600).reset()
    wait_for(lambda: sorted(heard(redis, batch.bid)) == ["complete", "success"], timeout=30)
    settle(redis, worker)
    assert sorted(heard(redis, batch.bid)) == ["complete", "success"]
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures) == (2, 0, 0)
    assert redis.hget("executions", "throttled") == b"1"


def test_a_batch_of_async_jobs_on_one_thread_fires_success_and_complete_once(workers, redis):
    batch = Batch()
    batch.on("success", Recorder, {"kind": "async"}).on("complete", Recorder)
    with batch.jobs():
        AsyncWork.perform_bulk([[n, 6] for n in range(6)])
    # One thread: the six finish only if they await together on the loop.
    worker = workers.start("-c", "1")
    wait_for(lambda: len(heard(redis, batch.bid)) >= 2, timeout=60)
    settle(redis, worker)
    assert sorted(heard(redis, batch.bid)) == ["complete", "success"]
    for event, _bid, options, _order, seen in callbacks(redis):
        assert seen == {"pending": 0, "jobs_run": 6, "complete": True}, event
        assert options == ({"kind": "async"} if event == "success" else {})
    assert set(redis.hvals("threads")) == {b"wurk-asyncio"}
    assert {key: int(count) for key, count in redis.hgetall("executions").items()} == {
        str(n).encode(): 1 for n in range(6)
    }
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures, status.complete) == (6, 0, 0, True)
    assert status.failed_jids() == []


def test_an_async_failure_counts_in_its_batch_and_its_retry_brings_complete_and_success(workers, redis):
    batch = Batch()
    batch.on("success", Recorder).on("complete", Recorder)
    with batch.jobs():
        AsyncWork.perform_bulk([["a", 3], ["b", 3]])
        failing = AsyncFailsUntilHealed.perform_async("failing", 3)
    worker = workers.start("-c", "1")
    # The two that succeeded have been acknowledged once pending is down to one.
    wait_for(lambda: redis.zcard("retry") == 1 and Status(batch.bid).pending == 1, timeout=60)
    status = Status(batch.bid)
    # The failure is counted and keeps the batch pending: a job waiting for
    # its retry is still live, so neither complete nor success is due.
    assert (status.total, status.pending, status.failures, status.complete) == (3, 1, 1, False)
    assert status.failed_jids() == [failing]
    assert (status.complete_at, status.success_at) == (None, None)
    (member,) = redis.zrange("retry", 0, -1)
    entry = json.loads(member)
    assert (entry["jid"], entry["bid"], entry["error_class"]) == (failing, batch.bid, "RuntimeError")

    redis.set("healed", "1")
    redis.zadd("retry", {member: 1.0})  # due now
    wait_for(lambda: len(heard(redis, batch.bid)) >= 2, timeout=60)
    settle(redis, worker)
    assert sorted(heard(redis, batch.bid)) == ["complete", "success"]
    # Each fired once, after the retry: none pending by then, every job run.
    for event, _bid, _options, _order, seen in callbacks(redis):
        assert seen == {"pending": 0, "jobs_run": 3, "complete": True}, event
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures) == (3, 0, 0)
    assert status.failed_jids() == []
    assert redis.hget("attempts", "failing") == b"2"
    assert redis.hget("threads", "failing") == b"wurk-asyncio"
    assert redis.zcard("retry") == 0


def test_async_jobs_cancelled_by_a_shutdown_count_no_failure_and_their_batch_succeeds_after(workers, redis):
    batch = Batch()
    batch.on("success", Recorder).on("complete", Recorder)
    redis.set("hold", "1")
    with batch.jobs():
        AsyncHeld.perform_bulk([[n] for n in range(4)])
    first = workers.start("-c", "1", "-t", "1")
    wait_for(lambda: redis.hlen(ASYNC_STARTS) == 4, timeout=30)
    # Past its timeout the stop cancels the four where they await: given back
    # to the queue, neither failures nor successes of their batch.
    first.signal(signal.SIGTERM)
    assert first.wait(30) == 0
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures, status.complete) == (4, 4, 0, False)
    assert status.failed_jids() == []
    assert heard(redis, batch.bid) == []
    assert redis.llen("queue:default") == 4
    assert redis.zcard("retry") == 0

    redis.delete("hold")
    second = workers.start("-c", "1")
    wait_for(lambda: len(heard(redis, batch.bid)) >= 2, timeout=60)
    settle(redis, second)
    assert sorted(heard(redis, batch.bid)) == ["complete", "success"]
    assert {key: int(count) for key, count in redis.hgetall("executions").items()} == {
        str(n).encode(): 1 for n in range(4)
    }
    assert {key: int(count) for key, count in redis.hgetall(ASYNC_STARTS).items()} == {
        str(n).encode(): 2 for n in range(4)
    }
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures) == (4, 0, 0)


def test_a_rate_limited_async_job_acks_nothing_until_it_runs_within_its_limit(workers, redis):
    with Limiter.window("batch-gate", 1, 3600).within_limit():
        pass  # the one admission the gate has in an hour, spent
    batch = Batch()
    batch.on("success", Recorder).on("complete", Recorder)
    with batch.jobs():
        throttled = AsyncThrottled.perform_async("throttled")
        AsyncWork.perform_async("free", 1)
    worker = workers.start("-c", "1")

    def rescheduled_twice() -> bool:
        entries = [json.loads(member) for member in redis.zrange("schedule", 0, -1)]
        return any(entry["jid"] == throttled and entry.get("overrated", 0) >= 2 for entry in entries)

    wait_for(rescheduled_twice, timeout=30)
    status = Status(batch.bid)
    # Each reschedule booked nothing: the job is live, neither failed nor done.
    assert (status.total, status.pending, status.failures, status.complete) == (2, 1, 0, False)
    assert status.failed_jids() == []
    assert heard(redis, batch.bid) == []
    assert redis.zcard("retry") == 0

    Limiter.window("batch-gate", 1, 3600).reset()
    wait_for(lambda: sorted(heard(redis, batch.bid)) == ["complete", "success"], timeout=30)
    settle(redis, worker)
    assert sorted(heard(redis, batch.bid)) == ["complete", "success"]
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures) == (2, 0, 0)
    assert redis.hget("executions", "throttled") == b"1"
