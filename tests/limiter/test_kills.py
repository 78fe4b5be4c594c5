"""A concurrent limiter's slot across a SIGKILL: a real worker killed while its
job is inside ``within_limit``, another worker's job waiting for that slot,
and the killed worker restarted.

docs/rate-limiting.md promises that ``lock_timeout`` is the safety net for a
crashed holder: its slot is taken again once the lease ends, not before, and
counted as ``reclaimed``. Measured here on Redis's clock against the lease,
with a real holder that died in its block (no context manager left open in
the test process), and the killed job recovered and run to the end.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

import wurk
from tests.helpers import WorkerPool, at_rest, claimed_jobs, wait_for
from tests.limiter.limited_app import HOLD, SEAT_LEASE, SEATS, Seated
from wurk.client.payload import new_jid

#: How late a waiter may get a reclaimed slot after its lease ended: it polls
#: every 50 ms, on a loaded machine.
SLACK = 2.0

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.limiter.limited_app", {})
    yield pool
    pool.stop_all()


def push(queue: str, jid: str | None = None) -> str:
    item: dict[str, Any] = {"class": Seated, "args": [], "queue": queue}
    if jid is not None:
        item["jid"] = jid
    pushed = wurk.Client(wurk.default_config()).push(item)
    assert pushed is not None
    return pushed


def seats(redis) -> list[list[Any]]:
    return [json.loads(entry) for entry in redis.lrange(SEATS, 0, -1)]


def seen(redis, event: str, jid: str) -> float | None:
    """When ``jid`` first noted ``event``, on Redis's clock."""
    return next((at for name, who, at in seats(redis) if (name, who) == (event, jid)), None)


def noted(redis, event: str, jid: str) -> bool:
    return any((name, who) == (event, jid) for name, who, _at in seats(redis))


def server_now(redis) -> float:
    seconds, micros = redis.time()
    return seconds + micros / 1e6


def test_a_killed_holders_slot_is_taken_again_when_its_lease_ends_and_its_job_runs_again(redis, workers):
    first = workers.start("-c", "1", "-q", "held")
    other = workers.start("-c", "1", "-q", "waiting")
    wait_for(lambda: redis.scard("processes") == 2, timeout=30)
    # Held before it is pushed: a worker is already waiting on its queue, and
    # a job that started before its jid was in the set would leave at once.
    holder = new_jid()
    redis.sadd(HOLD, holder)
    assert push("held", holder) == holder
    admitted = wait_for(lambda: seen(redis, "in", holder), timeout=30)
    [(_token, expiry)] = redis.zrange("lmtr-cs:seat", 0, -1, withscores=True)
    assert expiry == pytest.approx(admitted + SEAT_LEASE, abs=0.001)

    waiter = push("waiting")
    waiting_since = wait_for(lambda: seen(redis, "waiting", waiter), timeout=30)
    killed_at = server_now(redis)
    first.kill()
    assert killed_at < expiry, "the holder must die inside its lease"
    assert waiting_since < expiry, "the waiter must be waiting before the lease ends"
    assert {json.loads(job)["jid"] for job in claimed_jobs(redis, "held")} == {holder}

    # The dead holder's slot is not given away before its lease ends, and is
    # given to the waiter within a poll or two after.
    taken = wait_for(lambda: seen(redis, "in", waiter), timeout=30)
    assert taken >= expiry - 1e-6
    assert taken - expiry < SLACK
    assert admitted + SEAT_LEASE <= taken + 1e-6 < admitted + SEAT_LEASE + SLACK
    wait_for(lambda: noted(redis, "out", waiter), timeout=30)
    assert int(redis.hget("lmtr-stats:seat", "reclaimed")) == 1

    redis.srem(HOLD, holder)
    second = workers.start("-c", "1", "-q", "held")
    wait_for(lambda: noted(redis, "out", holder), timeout=30)
    wait_for(lambda: at_rest(redis, "held", "waiting"), timeout=30)
    for worker in (second, other):
        worker.stop()
        assert worker.wait() == 0

    # No worker is left and nothing waits anywhere: these counts are final.
    assert at_rest(redis, "held", "waiting")
    runs = Counter((name, jid) for name, jid, _at in seats(redis))
    assert runs == {
        ("waiting", holder): 2,  # its first run was killed in the slot
        ("in", holder): 2,
        ("out", holder): 1,
        ("waiting", waiter): 1,
        ("in", waiter): 1,
        ("out", waiter): 1,
    }
    assert redis.zcard("lmtr-cs:seat") == 0
    stats = {field.decode(): value.decode() for field, value in redis.hgetall("lmtr-stats:seat").items()}
    assert (stats["reclaimed"], stats["held"]) == ("1", "2")  # the killed holder's slot was never given back
