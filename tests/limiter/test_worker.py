"""A real worker: a job over its limit is rescheduled with ``overrated``
incremented, on its own queue, and lands in the dead set at the cap."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator

import pytest

from tests.helpers import WorkerPool, job_log, wait_for
from tests.limiter.limited_app import ASYNC_SEATS, SAT_WITH, AsyncSeated, AsyncThrottled, Paced, Steady, Throttled
from wurk.api import Stats
from wurk_limiter import Limiter


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.limiter.limited_app", {})
    yield pool
    pool.stop_all()


def test_over_limit_job_is_rescheduled_then_dead_at_the_cap(workers, redis):
    with Limiter.window("always-full", 1, 3600).within_limit():
        pass  # the one admission it has in an hour, spent
    jid = Throttled.perform_async()
    steady = Steady.perform_async()
    worker = workers.start("-c", "2", "-q", "crawl", "-q", "default")
    wait_for(lambda: redis.llen("deaths") == 1, timeout=60)
    runs = [json.loads(entry) for entry in redis.lrange("runs", 0, -1)]
    assert [(overrated, queue) for run_jid, overrated, queue in runs if run_jid == jid] == [
        (None, "crawl"),
        (1, "crawl"),
        (2, "crawl"),
    ]
    (member,) = redis.zrange("dead", 0, -1)
    dead = json.loads(member)
    assert dead["jid"] == jid
    assert dead["overrated"] == 3
    assert dead["error_message"] == "rate_limited: limit 'always-full' (window) reached"
    assert redis.lrange("deaths", 0, -1) == [jid.encode()]

    # The poison brake is counted once, right after the death handlers ran.
    # (Each over-limit run is also a jobs.failure: statsd sits inside the
    # limiter, so it sees OverLimit.)
    def metrics() -> list[str]:
        return [metric.decode() for metric in redis.lrange("metrics", 0, -1)]

    wait_for(lambda: "jobs.rate_limited" in metrics(), timeout=10)
    wait_for(lambda: redis.lrange("performed", 0, -1) == [steady.encode()], timeout=30)
    # The end marker: the worker's exit. A second count would be sent by then.
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert metrics().count("jobs.rate_limited") == 1
    assert redis.zcard("retry") == 0  # no run was booked as a failure
    assert redis.zcard("schedule") == 0
    assert int(redis.get("stat:failed") or 0) == 0


def test_an_async_job_over_its_limit_is_rescheduled_then_dead_at_the_cap(workers, redis):
    with Limiter.window("always-full", 1, 3600).within_limit():
        pass  # the one admission it has in an hour, spent
    jid = AsyncThrottled.perform_async()
    steady = Steady.perform_async()
    worker = workers.start("-c", "1", "-q", "crawl", "-q", "default")
    wait_for(lambda: redis.llen("deaths") == 1, timeout=60)
    runs = [json.loads(entry) for entry in redis.lrange("runs", 0, -1)]
    assert [(overrated, queue) for run_jid, overrated, queue in runs if run_jid == jid] == [
        (None, "crawl"),
        (1, "crawl"),
        (2, "crawl"),
    ]
    (member,) = redis.zrange("dead", 0, -1)
    dead = json.loads(member)
    assert (dead["jid"], dead["class"], dead["overrated"]) == (jid, "tests.limiter.limited_app.AsyncThrottled", 3)
    assert dead["error_message"] == "rate_limited: limit 'always-full' (window) reached"
    assert redis.lrange("deaths", 0, -1) == [jid.encode()]
    wait_for(lambda: redis.lrange("performed", 0, -1) == [steady.encode()], timeout=30)
    # The end marker: the worker's exit. A late count would be sent by then.
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert [metric for metric in redis.lrange("metrics", 0, -1) if metric == b"jobs.rate_limited"] == [
        b"jobs.rate_limited"
    ]
    assert redis.zcard("retry") == 0  # no run was booked as a failure
    assert redis.zcard("schedule") == 0
    assert int(redis.get("stat:failed") or 0) == 0


def test_the_job_log_says_a_run_was_rescheduled_and_stats_count_it_apart(workers, redis):
    with Limiter.window("always-full", 1, 3600).within_limit():
        pass  # the one admission it has in an hour, spent
    paced = Paced.perform_async()
    throttled = AsyncThrottled.perform_async()
    steady = Steady.perform_async()
    worker = workers.start("-c", "2", "-q", "crawl", "-q", "default")
    wait_for(lambda: redis.llen("deaths") == 2, timeout=60)
    wait_for(lambda: redis.lrange("performed", 0, -1) == [steady.encode()], timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0  # its last flush of the counters is done
    log = worker.output()

    rescheduled, dead = "rescheduled by limiter always-full in {} s", "rate limited 3 times by limiter always-full"
    assert job_log(log, paced) == [
        "start",
        rescheduled.format(1),  # the limiter's backoff
        "start",
        rescheduled.format(1),
        "start",
        f"{dead}, moved to the dead set",
    ]
    assert job_log(log, throttled) == [  # async def perform: the same lines
        "start",
        rescheduled.format(0),
        "start",
        rescheduled.format(0),
        "start",
        f"{dead}, moved to the dead set",
    ]
    assert job_log(log, steady) == ["start", "done"]

    # Four runs were put back: not processed, counted apart. The two deaths
    # at the cap and the success ended, so they are processed.
    stats = Stats()
    assert (stats.processed, stats.failed, stats.rescheduled) == (3, 0, 4)
    today = Stats.History(1)
    assert (list(today.processed.values()), list(today.rescheduled.values())) == ([3], [4])


def test_a_concurrent_limiter_holds_as_many_async_jobs_as_its_size_never_more(workers, redis):
    AsyncSeated.perform_bulk([[n] for n in range(8)])
    # One thread: the seats fill together only with the jobs awaiting on the loop.
    worker = workers.start("-c", "1")
    wait_for(lambda: redis.hlen("seated") == 8, timeout=60)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    sat_with = [int(count) for count in redis.lrange(SAT_WITH, 0, -1)]
    assert len(sat_with) == 8
    assert max(sat_with) == ASYNC_SEATS
    assert set(redis.hvals("seated")) == {b"wurk-asyncio"}
    assert redis.zcard("retry") == 0
    assert Limiter.concurrent("async-seats", ASYNC_SEATS).size == 0  # every seat given back
