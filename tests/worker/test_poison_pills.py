"""Poison pills on real workers: which crashes count against a job.

A job that ends its process (``os._exit``, a signal it sends itself) soon
after it starts is dead after three crashes, and the death handlers hear of
it. A job whose worker is killed from outside after it has run past its
``poison_pill_window`` is not blamed: it runs again until it finishes, however
often that happens. The test is the supervisor that restarts a worker that
died, as systemd or Kubernetes would.
"""

from __future__ import annotations

import json
import signal

import pytest

from tests.helpers import wait_for
from tests.worker.worker_app import Exits, Slow

pytestmark = pytest.mark.timeout(120)

#: The window the tests give their workers, so a run can outlive it quickly.
WINDOW = {"TEST_POISON_WINDOW": "1"}


def executions(redis) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in redis.hgetall("executions").items()}


def marked(redis, jid: str) -> bool:
    """Whether any process has ``jid`` marked as a young running suspect."""
    return any(redis.sismember(key, jid) for key in redis.scan_iter("super_fetch:running:*"))


def test_a_long_job_whose_worker_is_killed_four_times_past_its_window_finishes(workers, redis):
    jid = Slow.perform_async("long", 6)
    for kill in range(1, 5):
        worker = workers.start("-c", "2", env=WINDOW)
        wait_for(lambda kill=kill: redis.llen("started") == kill, timeout=30)
        # Recovered, it runs as a suspect, marked until it has run a second.
        wait_for(lambda: not marked(redis, jid), timeout=30)
        assert "long" not in executions(redis), "the kill must land while the job runs"
        worker.signal(signal.SIGKILL)
        worker.wait(30)
    last = workers.start("-c", "2", env=WINDOW)
    wait_for(lambda: executions(redis).get("long") == 1, timeout=60)
    last.signal(signal.SIGTERM)
    assert last.wait(30) == 0
    assert redis.llen("started") == 5
    # Only the first crash counted (nobody could tell then whether it was running).
    assert redis.get(f"super_fetch:recovered:{jid}") == b"1"
    assert redis.zcard("dead") == 0
    assert redis.llen("deaths") == redis.llen("poisoned") == 0
    assert redis.lrange("recoveries", 0, -1) == [b"recovered"] * 4


def test_a_job_that_exits_its_process_is_dead_after_three_crashes_and_its_death_handlers_run(workers, redis):
    jid = Exits.perform_async("exit")
    for _crash in range(3):
        victim = workers.start("-c", "2", env=WINDOW)
        assert victim.wait(60) == 3, "the job's os._exit ended the worker"
    survivor = workers.start("-c", "2", env=WINDOW)
    wait_for(lambda: redis.llen("deaths") == 1, timeout=30)
    assert [json.loads(item) for item in redis.lrange("deaths", 0, -1)] == [[jid, "RuntimeError"]]
    assert [json.loads(member)["jid"] for member in redis.zrange("dead", 0, -1)] == [jid]
    assert redis.get(f"super_fetch:recovered:{jid}") == b"3"
    [pill] = [json.loads(item) for item in redis.lrange("poisoned", 0, -1)]
    assert (pill["jid"], pill["count"]) == (jid, 3)
    assert redis.llen("queue:default") == 0
    survivor.signal(signal.SIGTERM)
    assert survivor.wait(30) == 0
    assert executions(redis) == {"exit": 3}  # it never ran a fourth time
