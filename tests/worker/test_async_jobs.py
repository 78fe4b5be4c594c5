"""``async def perform`` jobs on a real worker: they await together on the
process's event loop without a thread each, ``async_concurrency`` bounds
them, and retries, shutdown, SIGKILL, claims and middleware keep their meaning."""

from __future__ import annotations

import json
import signal

import pytest

from tests.helpers import WorkerPool, wait_for
from tests.worker.async_app import AsyncBoom, Counted, Gathering, Sleeper, SyncMark
from wurk.redis import keys


@pytest.fixture
def workers(config, redis_url, tmp_path):
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.async_app", {})
    yield pool
    pool.stop_all()


def counts(redis, name: str) -> dict[str, int]:
    return {key.decode(): int(value) for key, value in redis.hgetall(name).items()}


def private_lists(redis) -> list[bytes]:
    return [key for key in redis.keys("queue:*") if b"|" in key]


def test_forty_async_jobs_await_at_once_on_a_worker_with_one_thread(workers, redis):
    Gathering.perform_bulk([[n, 40] for n in range(40)])
    worker = workers.start("-c", "1", env={"ASYNC_CONCURRENCY": "50"})
    wait_for(lambda: redis.hlen("gathered") == 40, timeout=60)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert counts(redis, "gathered") == {str(n): 1 for n in range(40)}
    # Every one ran on the loop's thread, none on the single processor thread.
    assert set(redis.lrange("threads", 0, -1)) == {b"wurk-asyncio"}
    assert redis.zcard("retry") == 0
    assert int(redis.get("stat:processed")) == 40
    assert private_lists(redis) == []


def test_async_concurrency_bounds_the_jobs_in_flight_and_the_claims(workers, redis):
    Counted.perform_bulk([[n, 0.3] for n in range(30)])
    worker = workers.start("-c", "1", env={"ASYNC_CONCURRENCY": "4"})
    held = []
    private = None

    def finished() -> bool:
        nonlocal private
        private = private or next(iter(private_lists(redis)), None)
        if private is not None:
            held.append(redis.llen(private))
        return redis.hlen("finished") == 30

    wait_for(finished, timeout=60, interval=0.01)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    (peak,) = (int(value) for value in redis.hgetall("peak").values())
    assert peak == 4
    # Twice the one thread, plus the four async jobs lent the room they hold.
    assert held
    assert max(held) <= 2 * 1 + 4
    assert counts(redis, "finished") == {str(n): 1 for n in range(30)}


def test_an_async_failure_is_booked_for_retry_with_its_error(workers, redis):
    jid = AsyncBoom.perform_async("x")
    worker = workers.start("-c", "1")
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    (entry,) = redis.zrange("retry", 0, -1)
    job = json.loads(entry)
    assert (job["jid"], job["error_class"], job["error_message"], job["retry_count"]) == (
        jid,
        "ValueError",
        "async boom x",
        0,
    )
    assert int(redis.get("stat:failed")) == 1
    assert redis.llen("queue:default") == 0
    assert private_lists(redis) == []


def test_term_past_the_timeout_gives_the_unfinished_async_jobs_back(workers, redis):
    Sleeper.perform_bulk([[n, 120] for n in range(10)])
    worker = workers.start("-c", "1", "-t", "1")
    wait_for(lambda: redis.hlen("started") == 10, timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert redis.hlen("finished") == 0
    back = sorted(json.loads(payload)["args"][0] for payload in redis.lrange("queue:default", 0, -1))
    assert back == list(range(10))
    assert redis.zcard("retry") == 0
    assert redis.zcard("dead") == 0
    assert private_lists(redis) == []
    assert redis.smembers(keys.PROCESSES) == set()
    log = worker.log.read_text()
    assert log.count("interrupted") == 10, log


def test_sigkill_mid_await_leaves_the_jobs_for_the_next_worker(workers, redis):
    Sleeper.perform_bulk([[n, 2] for n in range(8)])
    first = workers.start("-c", "1")
    wait_for(lambda: redis.hlen("started") == 8, timeout=30)
    first.signal(signal.SIGKILL)
    first.wait(10)
    assert redis.hlen("finished") == 0
    second = workers.start("-c", "1")
    wait_for(lambda: redis.hlen("finished") == 8, timeout=60)
    second.signal(signal.SIGTERM)
    assert second.wait(30) == 0
    assert counts(redis, "finished") == {str(n): 1 for n in range(8)}
    assert redis.llen("queue:default") == 0
    assert private_lists(redis) == []


def test_sync_and_async_jobs_share_a_worker_and_a_sync_only_middleware_wraps_both(workers, redis):
    Gathering.perform_bulk([[n, 5] for n in range(5)])
    SyncMark.perform_bulk([[n] for n in range(5)])
    worker = workers.start("-c", "2", env={"SYNC_ONLY_MIDDLEWARE": "1"})
    wait_for(lambda: redis.hlen("gathered") == 5 and redis.hlen("sync") == 5, timeout=60)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert all(name.startswith(b"wurk-processor") for name in redis.hvals("sync"))
    around = [line.decode().split() for line in redis.lrange("around", 0, -1)]
    assert sorted(word for word, _ in around) == ["after"] * 10 + ["before"] * 10
    # Each job's "after" comes after its "before".
    for word, jid in around:
        if word == "after":
            assert around.index(["before", jid]) < around.index(["after", jid])
