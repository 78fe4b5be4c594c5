"""Unique jobs across real processes: pushers racing each other, and a real
``wurk`` worker releasing (or keeping) the lock as the job ends."""

from __future__ import annotations

import json

import pytest

from tests.helpers import Subprocess, wait_for
from tests.unique.pusher import BARRIER

ONCE = "tests.unique.unique_app.Once"
PUSHES = 1_000


def pusher(redis_url: str, count: int) -> Subprocess:
    return Subprocess.python("-m", "tests.unique.pusher", str(count), env={"REDIS_URL": redis_url})


def waiting(redis) -> int:
    """How many pushers are blocked at the barrier."""
    return sum(client.get("cmd") == "blpop" for client in redis.client_list())


def lock_holders(redis) -> list[bytes]:
    return [redis.get(key) for key in redis.keys("unique:*")]


@pytest.mark.timeout(120)
def test_two_processes_racing_enqueue_exactly_one_until_it_succeeds(config, redis, redis_url, unique_workers):
    racers = [pusher(redis_url, PUSHES), pusher(redis_url, PUSHES)]
    wait_for(lambda: waiting(redis) == 2, timeout=30)  # both at the barrier: they start together
    redis.rpush(BARRIER, "go", "go")
    pushed = [int(racer.output().strip().splitlines()[-1]) for racer in racers]
    assert sum(pushed) == 1, pushed
    [payload] = redis.lrange("queue:default", 0, -1)
    jid = json.loads(payload)["jid"]
    assert lock_holders(redis) == [jid.encode()]

    worker = unique_workers.start("-c", "2")
    wait_for(lambda: redis.lrange("ran", 0, -1) == [b"once:1"], timeout=30)
    wait_for(lambda: lock_holders(redis) == [], timeout=10)  # released after success
    again = pusher(redis_url, 1)
    wait_for(lambda: waiting(redis) == 1, timeout=30)
    redis.rpush(BARRIER, "go")
    assert again.output().strip().splitlines()[-1] == "1"
    wait_for(lambda: redis.lrange("ran", 0, -1) == [b"once:1", b"once:1"], timeout=30)
    worker.stop()


def push(job_class: str, *args: object, **options: object) -> str:
    import wurk

    client = wurk.Client(wurk.default_config())
    jid = client.push({"class": f"tests.unique.unique_app.{job_class}", "args": list(args), **options})
    assert jid is not None
    return jid


@pytest.mark.timeout(120)
def test_a_worker_releases_at_start_keeps_through_retries_and_frees_on_death(unique, redis, unique_workers):
    started = push("ReleasedAtStart", 1, unique_for=600, unique_until="start")
    retried = push("HeldThroughRetries", 2, unique_for=600, retry=3)
    dead = push("DiesAtOnce", 3, unique_for=600, retry=0)
    holders = set(lock_holders(redis))
    assert holders == {started.encode(), retried.encode(), dead.encode()}

    worker = unique_workers.start("-c", "3")
    wait_for(lambda: sorted(redis.lrange("ran", 0, -1)) == [b"free", b"held"], timeout=30)
    wait_for(lambda: redis.zcard("retry") == 1 and redis.zcard("dead") == 1, timeout=30)
    # Released before perform; still held by the failed job waiting to retry;
    # freed by the death handler for the job that died on its own.
    wait_for(lambda: set(lock_holders(redis)) == {retried.encode()}, timeout=10)
    # The retry's promotion is its own re-push: it reaches the queue again.
    [(member, _)] = redis.zrange("retry", 0, -1, withscores=True)
    redis.zadd("retry", {member: 1.0})
    wait_for(lambda: redis.lrange("ran", 0, -1).count(b"held") == 2, timeout=30)
    assert set(lock_holders(redis)) == {retried.encode()}
    worker.stop()


def duplicate(job_class: str, *args: object) -> str | None:
    """Push a copy of a unique job: its jid, or ``None`` when its lock refused it."""
    import wurk

    client = wurk.Client(wurk.default_config())
    return client.push({"class": f"tests.unique.unique_app.{job_class}", "args": list(args), "unique_for": 600})


@pytest.mark.timeout(120)
def test_an_async_job_releases_its_lock_after_success(unique, redis, unique_workers):
    first = push("AsyncOnce", 1, 2, unique_for=600)
    second = push("AsyncOnce", 2, 2, unique_for=600)
    assert duplicate("AsyncOnce", 1, 2) is None  # locked while it waits
    assert set(lock_holders(redis)) == {first.encode(), second.encode()}
    # One thread: the two finish only if they await together on the loop.
    worker = unique_workers.start("-c", "1")
    wait_for(lambda: redis.llen("ran") == 2, timeout=30)
    assert sorted(redis.lrange("ran", 0, -1)) == [b"async-once:1:wurk-asyncio", b"async-once:2:wurk-asyncio"]
    wait_for(lambda: lock_holders(redis) == [], timeout=10)  # released after success
    again = duplicate("AsyncOnce", 1, 2)
    assert again is not None  # the lock was free: the copy is accepted, and the idle worker may run it at once
    wait_for(lambda: redis.llen("ran") == 3 and lock_holders(redis) == [], timeout=30)
    worker.stop()
    assert redis.lrange("ran", 0, -1)[-1] == b"async-once:1:wurk-asyncio"


@pytest.mark.timeout(120)
def test_an_async_job_keeps_its_lock_through_a_failure_until_its_retry_succeeds(unique, redis, unique_workers):
    jids = {n: push("AsyncFailsUntilHealed", n, 2, unique_for=600, retry=3) for n in (1, 2)}
    worker = unique_workers.start("-c", "1")
    wait_for(lambda: redis.zcard("retry") == 2, timeout=30)
    # Each ran, still holding its lock, failed, and holds it while it waits to retry.
    assert sorted(redis.lrange("ran", 0, -1)) == [b"1:held", b"2:held"]
    assert set(lock_holders(redis)) == {jid.encode() for jid in jids.values()}
    assert duplicate("AsyncFailsUntilHealed", 1, 2) is None

    redis.set("healed", "1")
    redis.zadd("retry", dict.fromkeys(redis.zrange("retry", 0, -1), 1.0))  # due now
    wait_for(lambda: redis.llen("ran") == 4 and lock_holders(redis) == [], timeout=30)
    worker.stop()
    assert sorted(redis.lrange("ran", 0, -1)) == [b"1:held", b"1:held", b"2:held", b"2:held"]
    assert redis.zcard("retry") == 0
    assert duplicate("AsyncFailsUntilHealed", 1, 2) is not None  # free again
