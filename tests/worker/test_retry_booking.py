"""A failure is booked from the payload as fetched: what a server middleware
did to the job (decrypting its arguments, say) never reaches the retry set, the
dead set, ``retries_exhausted`` or the death handlers."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from tests.helpers import WorkerPool, wait_for
from tests.worker.booking_app import DiesAtOnce, FailsOnce


@pytest.fixture
def booking_workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.booking_app", {})
    yield pool
    pool.stop_all()


def only(redis, key) -> tuple[bytes, dict]:
    [member] = redis.zrange(key, 0, -1)
    return member, json.loads(member)


def listed(redis, key) -> list:
    return [json.loads(item) for item in redis.lrange(key, 0, -1)]


def test_retries_and_deaths_carry_the_enqueued_args(booking_workers, redis):
    jid = FailsOnce.perform_async("ciphertext")
    worker = booking_workers.start("-c", "1")
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    member, retried = only(redis, "retry")
    assert listed(redis, "seen") == [["plaintext"]]  # perform saw the middleware's args
    assert (retried["jid"], retried["args"], retried["retry_count"]) == (jid, ["ciphertext"], 0)
    assert "middleware_note" not in retried
    redis.zadd("retry", {member: time.time() - 1}, xx=True)  # due now
    wait_for(lambda: redis.llen("deaths") == 1, timeout=30)  # the death handlers run last
    _, dead = only(redis, "dead")
    assert (dead["jid"], dead["args"], dead["retry_count"]) == (jid, ["ciphertext"], 1)
    assert "middleware_note" not in dead
    [death] = listed(redis, "deaths")
    assert death["args"] == ["ciphertext"]
    worker.stop()


def test_a_mutated_job_does_not_leak_into_the_dead_set(booking_workers, redis):
    jid = DiesAtOnce.perform_async("ciphertext")
    worker = booking_workers.start("-c", "1")
    wait_for(lambda: redis.llen("deaths") == 1, timeout=30)  # the death handlers run last
    assert listed(redis, "seen") == [["ciphertext", "plaintext"]]
    _, dead = only(redis, "dead")
    assert (dead["jid"], dead["args"], dead["retry"], dead["retry_count"]) == (jid, ["ciphertext"], 0, 0)
    assert "middleware_note" not in dead
    assert redis.zcard("retry") == 0  # the middleware's retry=5 did not count either
    for booked in (*listed(redis, "exhausted"), *listed(redis, "deaths")):
        assert booked["args"] == ["ciphertext"]
        assert "middleware_note" not in booked
    worker.stop()
