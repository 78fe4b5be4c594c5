"""Iterable jobs on real ``wurk`` worker processes, stopped by real signals."""

from __future__ import annotations

import signal
import time

import wurk
from tests.helpers import job_log, wait_for, wait_until_fetching_ended
from tests.iterable.conftest import calls, events, seen
from tests.iterable.iterable_app import (
    AsyncPatient,
    AwaitsTheWalk,
    BesideAnAsyncJob,
    Cooperative,
    Endless,
    FailsOnce,
    Stuck,
    Walk,
)
from wurk.server.asyncjobs import is_async_job

ITEMS = 100_000


def private_lists(redis) -> list[bytes]:
    return list(redis.scan_iter("queue:default|*"))


def state(redis, jid) -> dict[str, str]:
    return {name.decode(): value.decode() for name, value in redis.hgetall(f"it-{jid}").items()}


class Progress:
    """Samples ``calls`` while waiting, to know how many items a worker got
    through in the five seconds before it was stopped."""

    def __init__(self, redis) -> None:
        self.redis = redis
        self.samples: list[tuple[float, int]] = []

    def wait(self, at_least: int, *, running_for: float = 0.0, timeout: float = 60.0) -> None:
        began = time.monotonic()

        def reached() -> bool:
            now = time.monotonic()
            self.samples.append((now, calls(self.redis)))
            return self.samples[-1][1] >= at_least and now - began >= running_for

        wait_for(reached, timeout=timeout, interval=0.05)

    def last_five_seconds(self) -> int:
        now, latest = self.samples[-1]
        earlier = [count for at, count in self.samples if at <= now - 5.2]
        return latest - (earlier[-1] if earlier else 0)


def test_a_hundred_thousand_items_survive_two_terms_and_a_kill(workers, redis):
    jid = Walk.perform_async(ITEMS, 0.0001)
    progress = Progress(redis)
    windows = []
    for target in (10_000, 20_000):
        worker = workers.start("-c", "1")
        progress.wait(target)
        worker.signal(signal.SIGTERM)
        assert worker.wait(30) == 0
        saved = state(redis, jid)
        # A stop at an iteration boundary saves the first item not done, and replays nothing.
        assert int(saved["c"]) == seen(redis) == calls(redis)
        assert redis.llen("queue:default") == 1
        windows.append(0)
    worker = workers.start("-c", "1")
    progress.wait(25_000, running_for=6.0)  # past its first timed checkpoint
    windows.append(progress.last_five_seconds())
    assert redis.exists(f"it-{jid}"), "the walk must still be running when it is killed"
    worker.signal(signal.SIGKILL)
    worker.wait(30)
    killed_at = calls(redis)
    checkpoint = int(state(redis, jid)["c"])
    assert checkpoint < killed_at
    last = workers.start("-c", "1")
    wait_for(lambda: "on_complete" in events(redis), timeout=60)
    wait_for(lambda: private_lists(redis) == [] and redis.llen("queue:default") == 0, timeout=10)
    last.signal(signal.SIGTERM)
    assert last.wait(30) == 0
    assert seen(redis) == ITEMS
    replays = calls(redis) - ITEMS
    assert replays == killed_at - checkpoint  # the items after the last timed checkpoint
    assert replays <= sum(window + 1 for window in windows)
    assert events(redis) == ["on_start", "on_stop", "on_resume", "on_stop", "on_resume", "on_resume", "on_complete"]
    assert not redis.exists(f"it-{jid}")


def test_the_job_log_says_where_a_stopped_walk_was_interrupted_and_that_it_was_requeued(workers, redis):
    jid = Walk.perform_async(ITEMS, 0.0001)
    worker = workers.start("-c", "1")
    wait_for(lambda: calls(redis) > 500, timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    saved = state(redis, jid)["c"]
    assert redis.llen("queue:default") == 1
    # The run did not end "done": it stopped where its next run starts.
    assert job_log(worker.output(), jid) == ["start", f"interrupted at cursor {saved}, requeued"]

    again = workers.start("-c", "1")
    wait_for(lambda: "on_complete" in events(redis), timeout=60)
    again.signal(signal.SIGTERM)
    assert again.wait(30) == 0
    assert job_log(again.output(), jid) == ["start", "done"]


def test_an_external_cancel_stops_the_job_within_a_checkpoint_interval(workers, redis):
    jid = Endless.perform_async(0.002)
    worker = workers.start("-c", "1")
    wait_for(lambda: calls(redis) > 50, timeout=30)
    cancelled_at = time.time()
    stamp = wurk.Client().cancel(jid)
    assert abs(stamp - cancelled_at) <= 1
    wait_for(lambda: "on_complete" in events(redis), timeout=20)
    stopped_at = float(redis.get("last-iteration"))
    assert stopped_at - cancelled_at <= wurk.IterableJob.STATE_FLUSH_INTERVAL + 1.0
    assert events(redis) == ["on_start", "on_cancel", "on_stop", "on_complete"]
    assert not redis.exists(f"it-{jid}")
    ran = calls(redis)
    # The end marker is the worker's exit: a run of the job after the cancel,
    # or the job given back to a queue, has happened by then.
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert calls(redis) == ran, "a cancelled job does not come back"
    assert redis.llen("queue:default") == 0
    assert redis.zcard("retry") == redis.zcard("schedule") == 0


def test_a_retry_resumes_from_the_last_checkpoint_under_the_same_jid(workers, redis):
    jid = FailsOnce.perform_async(3500, 3000)
    worker = workers.start("-c", "1")
    wait_for(lambda: "on_complete" in events(redis), timeout=60)
    first, second = [entry.decode() for entry in redis.lrange("runs", 0, -1)]
    assert first == f"{jid}:None"
    resumed_jid, cursor = second.split(":")
    assert resumed_jid == jid
    assert 0 < int(cursor) <= 3000
    assert seen(redis) == 3500
    assert calls(redis) - 3500 == 3000 - int(cursor) + 1  # from the checkpoint to the failed item
    assert events(redis) == ["on_start", "on_resume", "on_complete"]
    assert not redis.exists(f"it-{jid}")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_quiet_interrupts_at_the_next_iteration_boundary(workers, redis):
    jid = Walk.perform_async(ITEMS, 0)
    worker = workers.start("-c", "1")
    wait_for(lambda: calls(redis) > 2000, timeout=30)
    worker.signal(signal.SIGTSTP)
    wait_for(lambda: "on_stop" in events(redis), timeout=10)
    wait_for(lambda: redis.llen("queue:default") == 1, timeout=10)
    # Once no processor thread is left, no iteration can follow the saved one.
    wait_until_fetching_ended(worker.log, worker.pid, lambda: worker.signal(signal.SIGTTIN))
    assert int(state(redis, jid)["c"]) == seen(redis) == calls(redis)
    assert worker.proc.poll() is None, "quiet does not stop the process"
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_a_job_raising_interrupted_itself_goes_back_and_resumes(workers, redis):
    jid = Cooperative.perform_async()
    worker = workers.start("-c", "1")
    wait_for(lambda: "in-long-iteration" in events(redis), timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert events(redis) == ["on_start", "in-long-iteration", "bailing-out", "on_stop"]
    assert state(redis, jid)["c"] == "0"  # the item it gave up on runs again
    assert job_log(worker.output(), jid) == ["start", "interrupted at cursor 0, requeued"]
    assert redis.llen("queue:default") == 1
    again = workers.start("-c", "1")
    wait_for(lambda: "on_complete" in events(redis), timeout=30)
    assert events(redis)[4:] == ["on_resume", "on_complete"]
    again.signal(signal.SIGTERM)
    assert again.wait(30) == 0


def test_an_iteration_outliving_the_shutdown_timeout_resumes_from_the_last_checkpoint(workers, redis):
    jid = Stuck.perform_async(6000, 4000)
    worker = workers.start("-c", "1", "-t", "1")
    wait_for(lambda: "stuck" in events(redis), timeout=60)
    checkpoint = int(state(redis, jid)["c"])
    assert 0 < checkpoint < 6000
    worker.signal(signal.SIGTERM)
    worker.wait(30)
    assert "on_stop" not in events(redis)  # cut off inside an iteration: no final checkpoint
    assert redis.llen("queue:default") == 1
    again = workers.start("-c", "1")
    wait_for(lambda: "on_complete" in events(redis), timeout=60)
    runs = [entry.decode() for entry in redis.lrange("runs", 0, -1)]
    assert runs == [f"{jid}:None", f"{jid}:{checkpoint}"]
    assert seen(redis) == 6000
    again.signal(signal.SIGTERM)
    assert again.wait(30) == 0


def test_an_async_job_sees_its_worker_stopping_too(workers, redis):
    jid = AsyncPatient.perform_async()
    worker = workers.start("-c", "1")
    wait_for(lambda: "async-started" in events(redis), timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert events(redis) == ["async-started", "async-saw-stop"]
    assert redis.llen("queue:default") == 1  # given back by the Interrupted it raised
    assert job_log(worker.output(), jid) == ["start", "interrupted, requeued"]  # no cursor: not an iterable job


def test_an_iterable_job_walks_on_its_thread_while_an_async_job_awaits_on_the_loop(workers, redis):
    # An iterable job's methods are plain defs (async ones are refused when
    # the class is made), so its perform is too: it runs on a processor
    # thread, as before async jobs, and the loop goes on beside it.
    assert not is_async_job(BesideAnAsyncJob)
    AwaitsTheWalk.perform_async()  # first in, handed to the loop
    jid = BesideAnAsyncJob.perform_async(50)  # then walked on the one thread
    worker = workers.start("-c", "1")
    wait_for(lambda: "on_complete" in events(redis), timeout=60)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert redis.get("walking").startswith(b"wurk-processor")
    assert redis.get("awaiting") == b"wurk-asyncio"
    assert events(redis) == ["on_start", "on_complete"]
    assert seen(redis) == 50
    assert not redis.exists(f"it-{jid}")
    assert redis.zcard("retry") == 0
    assert int(redis.get("stat:processed")) == 2
    assert redis.llen("queue:default") == 0
