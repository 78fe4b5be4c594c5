"""A batch across a SIGKILL: its worker killed while jobs of the batch are
running and more wait, then a new worker that recovers them at boot.

docs/batches.md promises that a job run twice is booked once and that each
callback fires at most once, and reliable fetch that nothing is lost: every
job runs, pending reaches zero, success and complete each run exactly once,
and only the jobs the killed worker held ran twice. The sharpest moment is
killed too: right after the last job's success fired the callbacks, before
that job is acknowledged, so it runs again and acks the batch again. And a
job that kills every worker that runs it dies as a poison pill: its batch
hears death and complete once each, and never success.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.batches.batch_app import KILL_AFTER_LAST_ENV, KILLED_AFTER, Crasher, Paced, Recorder, Work
from tests.batches.conftest import callbacks, heard
from tests.helpers import at_rest, claimed_jobs, wait_for
from wurk_batches import Batch, Status, keys

JOBS = 40

pytestmark = pytest.mark.timeout(120)


def counts(redis, name: str) -> dict[str, int]:
    return {key.decode(): int(value) for key, value in redis.hgetall(name).items()}


def test_a_batch_whose_worker_is_killed_mid_batch_runs_every_job_and_each_callback_once(workers, redis):
    batch = Batch()
    batch.on("success", Recorder, {"n": JOBS}).on("complete", Recorder)
    with batch.jobs():
        Paced.perform_bulk([[n, 0.3] for n in range(JOBS)])
    first = workers.start("-c", "4")
    wait_for(lambda: int(redis.hget(keys.batch(batch.bid), "pending")) <= JOBS - 4, timeout=30)  # 4 booked
    first.kill()

    in_flight = {str(json.loads(job)["args"][0]) for job in claimed_jobs(redis)}
    finished = set(counts(redis, "executions"))
    assert in_flight, "the kill caught jobs claimed"
    pending = Status(batch.bid).pending
    assert 0 < pending < JOBS, "the kill landed mid-batch"
    # Booked after it finished, acknowledged after it was booked: a finished
    # job no longer claimed is booked, an unfinished one is not.
    assert JOBS - len(finished) <= pending <= JOBS - len(finished - in_flight)
    assert heard(redis, batch.bid) == []

    second = workers.start("-c", "4")
    wait_for(lambda: sorted(heard(redis, batch.bid)) == ["complete", "success"], timeout=60)
    wait_for(lambda: at_rest(redis, "default"), timeout=30)
    second.stop()
    assert second.wait() == 0

    # No worker is left and nothing waits anywhere: what was heard is final.
    assert at_rest(redis, "default")
    assert sorted(heard(redis, batch.bid)) == ["complete", "success"]
    for event, _bid, options, _order, seen in callbacks(redis):
        assert seen == {"pending": 0, "jobs_run": JOBS, "complete": True}, event
        assert options == ({"n": JOBS} if event == "success" else {})
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures, status.complete) == (JOBS, 0, 0, True)
    assert status.success_at is not None
    done = counts(redis, "executions")
    assert set(done) == {str(n) for n in range(JOBS)}, "every job ran"
    twice = {key for key, runs in counts(redis, "starts").items() if runs > 1}
    assert twice <= in_flight, "only the jobs the killed worker held ran again"
    assert {key for key, runs in done.items() if runs > 1} <= in_flight
    assert max(counts(redis, "starts").values()) <= 2


def test_a_worker_killed_after_the_last_job_fired_the_callbacks_fires_nothing_twice(workers, redis):
    batch = Batch()
    batch.on("success", Recorder).on("complete", Recorder)
    with batch.jobs():
        Work.perform_bulk([[n] for n in range(6)])
    first = workers.start("-c", "1", env={KILL_AFTER_LAST_ENV: "1"})
    assert first.wait(60) == -9, "killed by the app once the batch's pending reached zero"
    last = redis.get(KILLED_AFTER).decode()
    assert {json.loads(job)["jid"] for job in claimed_jobs(redis)} >= {last}
    assert Status(batch.bid).pending == 0
    # The callback jobs were pushed by the same script that marked them fired.
    assert redis.exists(keys.marker(batch.bid, "success"), keys.marker(batch.bid, "complete")) == 2

    second = workers.start("-c", "2")
    wait_for(lambda: sorted(heard(redis, batch.bid)) == ["complete", "success"], timeout=60)
    wait_for(lambda: at_rest(redis, "default"), timeout=30)
    second.stop()
    assert second.wait() == 0

    # No worker is left and nothing waits anywhere: what was heard is final.
    assert at_rest(redis, "default")
    assert sorted(heard(redis, batch.bid)) == ["complete", "success"]
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures, status.complete) == (6, 0, 0, True)
    runs = counts(redis, "executions")
    assert set(runs) == {str(n) for n in range(6)}
    assert sum(runs.values()) == 7, f"only the job killed before its ack ran twice: {runs}"


def test_a_batch_job_that_kills_its_workers_dies_as_a_poison_pill_and_the_batch_hears_it_once(workers, redis):
    batch = Batch()
    batch.on("death", Recorder).on("complete", Recorder).on("success", Recorder)
    with batch.jobs():
        healthy = Work.perform_bulk([[n] for n in range(4)])
        pill = Crasher.perform_async("pill")
    worker = workers.start("-c", "1")
    restarts = 0
    deadline = time.monotonic() + 60
    # The test is the supervisor: a worker that dies is replaced, as systemd would.
    while sorted(heard(redis, batch.bid)) != ["complete", "death"]:
        if worker.proc.poll() is not None:
            restarts += 1
            assert restarts <= 5, f"still crash-looping after {restarts - 1} restarts"
            worker = workers.start("-c", "1")
        assert time.monotonic() < deadline, f"heard {heard(redis, batch.bid)} after {restarts} restarts"
        time.sleep(0.05)
    wait_for(lambda: at_rest(redis, "default"), timeout=30)
    worker.stop()
    assert worker.wait() == 0

    # No worker is left and nothing waits anywhere: what was heard is final.
    assert at_rest(redis, "default")
    assert sorted(heard(redis, batch.bid)) == ["complete", "death"]
    [dead] = [json.loads(member) for member in redis.zrange("dead", 0, -1)]
    assert dead["jid"] == pill
    assert 1 <= int(redis.hget("attempts", "pill")) <= 3, "the documented threshold is three recoveries"
    status = Status(batch.bid)
    assert (status.total, status.pending, status.failures, status.complete) == (5, 1, 0, True)
    assert status.dead_jids() == [pill]
    assert status.success_at is None
    assert set(counts(redis, "executions")) == {str(n) for n in range(4)}
    assert len(healthy) == 4
