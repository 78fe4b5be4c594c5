"""Two real worker processes ticking through simulated minutes.

The poller's clock is the ``test:clock`` key (see ``cron_app``), so the test
moves the whole cluster from minute to minute and waits for evidence rather
than for time: a fire in the loop's history, then several more leader ticks
at the same simulated minute that must not fire again. Killing the leader
with SIGKILL hands the ticks to the survivor without a second fire.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from tests.helpers import WorkerPool, wait_for
from tests.worker.conftest import FAST

#: Fast elections, with a lease long enough that a loaded machine does not lose it by accident.
ELECTION = {"TEST_LEADER_TTL": "5", "TEST_LEADER_RENEW": "0.5", "TEST_LEADER_FOLLOWER": "0.5"}
#: The simulated start: an even minute plus 30 s.
T0 = int(datetime(2025, 6, 1, 12, 0, 30, tzinfo=UTC).timestamp())
EXTRA_TICKS = 5


@pytest.fixture
def cron_workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.cron.cron_app", {**FAST, **ELECTION, "TEST_CRON_TICK": "0.1"})
    yield pool
    pool.stop_all()


def holder_pid(redis) -> int | None:
    holder = redis.get("dear-leader")
    return int(holder.decode().split(":")[1]) if holder else None


def reads(redis, pid: int) -> int:
    return int(redis.get(f"clock-reads:{pid}") or 0)


def loop_of(redis, label: str) -> str:
    for lid in redis.smembers("periodic"):
        if json.loads(redis.hget(b"loops:" + lid, "options"))["args"] == [label]:
            return lid.decode()
    raise AssertionError(f"no loop with args [{label!r}]")


def history(redis, lid: str) -> list[tuple[int, str]]:
    return [tuple(json.loads(row)) for row in reversed(redis.lrange(f"loop-history:{lid}", 0, -1))]


def settle(redis, pid: int) -> None:
    """Wait until the leader ``pid`` has ticked several more times at the current minute."""
    seen = reads(redis, pid)
    wait_for(lambda: reads(redis, pid) >= seen + EXTRA_TICKS, timeout=30)


def test_two_workers_fire_each_due_loop_once_per_tick_and_hand_over_on_sigkill(cron_workers, redis):
    redis.set("test:clock", T0)
    first = cron_workers.start("-c", "2")
    wait_for(lambda: holder_pid(redis) == first.pid, timeout=30)
    second = cron_workers.start("-c", "2")
    wait_for(lambda: redis.scard("processes") == 2, timeout=30)
    wait_for(lambda: redis.scard("periodic") == 2, timeout=30)
    every, even = loop_of(redis, "every"), loop_of(redis, "even")
    settle(redis, first.pid)
    assert history(redis, every) == []  # nothing was due at 12:00:30
    assert reads(redis, second.pid) == 0  # a follower never even reads the clock

    for minute in (1, 2, 3):
        redis.set("test:clock", T0 + 60 * minute)
        wait_for(lambda minute=minute: len(history(redis, every)) == minute, timeout=30)
        settle(redis, first.pid)
        assert [fired for fired, _ in history(redis, every)] == [T0 + 60 * m for m in range(1, minute + 1)]
    assert [fired for fired, _ in history(redis, even)] == [T0 + 60 * 2]  # 12:02 only
    assert reads(redis, second.pid) == 0

    first.signal(signal.SIGKILL)
    assert first.wait(30) == -signal.SIGKILL
    wait_for(lambda: holder_pid(redis) == second.pid, timeout=30)
    settle(redis, second.pid)  # the new leader ticks at minute 3, which the old one fired
    assert len(history(redis, every)) == 3

    for minute in (4, 5):
        redis.set("test:clock", T0 + 60 * minute)
        wait_for(lambda minute=minute: len(history(redis, every)) == minute, timeout=30)
        settle(redis, second.pid)
    assert [fired for fired, _ in history(redis, every)] == [T0 + 60 * m for m in range(1, 6)]
    assert [fired for fired, _ in history(redis, even)] == [T0 + 120, T0 + 240]

    pushed = {jid for _, jid in history(redis, every)} | {jid for _, jid in history(redis, even)}
    assert len(pushed) == 7

    def ran() -> set[str]:
        return {row.decode().split(" ")[1] for row in redis.lrange("ran", 0, -1)}

    wait_for(lambda: ran() == pushed, timeout=60)  # the survivor recovers what the killed one held
    second.signal(signal.SIGTERM)
    assert second.wait(30) == 0
