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
