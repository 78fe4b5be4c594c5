"""Unique locks across a SIGKILL: a real worker killed while its jobs are in
``perform`` holding their locks, and a new worker that recovers them at boot.

What docs/unique-jobs.md promises for a killed process must hold: a
``"success"`` lock stays with the killed job (a duplicate pushed meanwhile is
dropped) until that job, recovered and run again, succeeds and releases it,
or until its TTL; a ``"start"`` lock was already gone; a lock that expired
while its job was away belongs to the next push, and the recovered job's
release leaves it alone. Nothing is lost, only the jobs in flight run twice,
and a new push is accepted once the lock is released. A job that kills its
worker every time dies as a poison pill, and that death frees its lock.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest

import wurk
import wurk_unique
from tests.helpers import at_rest, claimed_jobs, wait_for

APP = "tests.unique.unique_app"
GATED = f"{APP}.Gated"
UNTIL_START = f"{APP}.GatedUntilStart"
CRASHER = f"{APP}.Crasher"
# The application's names, not imported: importing it would enable unique
# jobs in this process, for every later test.
HOLD = "hold"
EVENTS = "events"


def push(job_class: str, n: int, **options: Any) -> str | None:
    return wurk.Client(wurk.default_config()).push({"class": job_class, "args": [n], **options})


def holder(redis, job_class: str, n: int) -> str | None:
    value = redis.get(wurk_unique.lock_key(job_class, "default", [n]))
    return value.decode() if value is not None else None


def runs(redis, event: str) -> Counter[str]:
    """How many times each jid noted ``event`` ("start" or "done")."""
    return Counter(jid for name, _n, jid, _pid in map(json.loads, redis.lrange(EVENTS, 0, -1)) if name == event)


def claimed(redis) -> set[str]:
    return {json.loads(payload)["jid"] for payload in claimed_jobs(redis)}


@pytest.mark.timeout(120)
def test_locks_of_a_killed_worker_stay_until_the_recovered_jobs_release_them_or_expire(unique, redis, unique_workers):
    kept = push(GATED, 1, unique_for=600)
    freed = push(UNTIL_START, 2, unique_for=600, unique_until="start")
    brief = push(GATED, 3, unique_for=2)  # its TTL runs out while its worker is down
    assert None not in (kept, freed, brief)
    redis.sadd(HOLD, kept, freed, brief)
    first = unique_workers.start("-c", "3")
    wait_for(lambda: set(runs(redis, "start")) == {kept, freed, brief}, timeout=30)
    first.kill()

    assert claimed(redis) == {kept, freed, brief}, "the killed worker's jobs wait in its private list"
    assert holder(redis, GATED, 1) == kept
    assert holder(redis, UNTIL_START, 2) is None, "a start lock is released before perform"
    # While no worker runs: the kept lock drops a duplicate, the freed one does not.
    assert push(GATED, 1, unique_for=600) is None
    again = push(UNTIL_START, 2, unique_for=600, unique_until="start")
    assert again is not None
    wait_for(lambda: holder(redis, GATED, 3) is None, timeout=15)  # expired on its TTL
    later = push(GATED, 3, unique_for=600)
    assert later is not None
    assert holder(redis, GATED, 3) == later

    redis.sadd(HOLD, later)
    redis.srem(HOLD, kept, freed, brief)
    second = unique_workers.start("-c", "4")
    # Acknowledged means its middleware (and so its release) is over.
    wait_for(lambda: claimed(redis) == {later} and redis.llen("queue:default") == 0, timeout=30)
    assert set(runs(redis, "done")) == {kept, freed, brief, again}
    assert holder(redis, GATED, 1) is None, "the recovered job released its lock when it succeeded"
    assert holder(redis, GATED, 3) == later, "the recovered job's release left the next push's lock alone"
    assert holder(redis, UNTIL_START, 2) is None

    fresh = push(GATED, 1, unique_for=600)
    assert fresh is not None, "a push after the release is accepted"
    redis.srem(HOLD, later)
    wait_for(lambda: at_rest(redis, "default"), timeout=30)
    second.stop()
    assert second.wait() == 0

    # No worker is left and nothing waits anywhere: these counts are final.
    assert at_rest(redis, "default")
    assert runs(redis, "start") == {kept: 2, freed: 2, brief: 2, again: 1, later: 1, fresh: 1}
    assert runs(redis, "done") == {kept: 1, freed: 1, brief: 1, again: 1, later: 1, fresh: 1}
    assert redis.keys("unique:*") == []


@pytest.mark.timeout(120)
def test_a_unique_job_that_kills_its_worker_dies_as_a_poison_pill_and_frees_its_lock(unique, redis, unique_workers):
    pill = push(CRASHER, 1, unique_for=600)
    assert pill is not None
    worker = unique_workers.start("-c", "1")
    restarts = 0
    deadline = time.monotonic() + 60
    # The test is the supervisor: a worker that dies is replaced, as systemd would.
    while redis.zcard("dead") == 0:
        if worker.proc.poll() is not None:
            restarts += 1
            assert restarts <= 5, f"still crash-looping after {restarts - 1} restarts"
            worker = unique_workers.start("-c", "1")
        assert time.monotonic() < deadline, f"no poison pill yet; {restarts} restarts"
        time.sleep(0.05)

    [dead] = [json.loads(member) for member in redis.zrange("dead", 0, -1)]
    assert dead["jid"] == pill
    wait_for(lambda: holder(redis, CRASHER, 1) is None, timeout=10)  # by the death handler, after the dead set
    assert 1 <= runs(redis, "start")[pill] <= 3, "the documented threshold is three recoveries"
    worker.stop()
    assert worker.wait() == 0
    assert at_rest(redis, "default")
    assert push(CRASHER, 1, unique_for=600) is not None, "a push after the poison pill's death is accepted"
