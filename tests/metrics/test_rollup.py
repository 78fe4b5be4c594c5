"""The leader's rollup: history samples, day totals, and the leadership gate."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

from tests.helpers import wait_for
from wurk.metrics import ExecutionTracker, MetricsRollup, Query
from wurk.metrics.rollup import SETTLE_SECONDS
from wurk.server.leader import SERVICE, Leader

NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


def leading(config) -> Leader:
    leader = Leader(config, "host:1:aaaaaaaaaaaa")
    config.register(SERVICE, leader)  # what the launcher does
    assert leader.campaign()
    return leader


def flush_at(config, when: datetime, **counts: int) -> None:
    tracker = ExecutionTracker(config)
    for klass, count in counts.items():
        for _ in range(count):
            tracker.record(klass, 10)
    tracker.flush(now=when)


def test_finished_minutes_are_added_to_the_day_totals_once(config, redis):
    flush_at(config, NOW - timedelta(minutes=10), Report=2)
    flush_at(config, NOW - timedelta(minutes=5), Report=1, Export=4)
    flush_at(config, NOW - timedelta(seconds=40), Report=7)  # not settled yet
    leading(config)
    rollup = MetricsRollup(config)
    # Every minute of the last 8 hours that ended SETTLE_SECONDS ago, once; 11:59 is too recent.
    assert rollup.roll_up(NOW.timestamp()) == 8 * 60
    assert int(redis.get("wurk:history:rolled")) == int(NOW.timestamp()) // 60 * 60 - 60 - SETTLE_SECONDS
    day = {k.decode(): int(v) for k, v in redis.hgetall("wurk:history:jobs:20261130").items()}
    assert day == {"Report|p": 3, "Report|ms": 30, "Export|p": 4, "Export|ms": 40}
    assert 90 * 86_400 - 5 <= redis.ttl("wurk:history:jobs:20261130") <= 90 * 86_400
    assert rollup.roll_up(NOW.timestamp()) == 0  # nothing new: nothing added twice
    later = NOW + timedelta(seconds=60)  # 11:59 has now settled
    assert rollup.roll_up(later.timestamp()) == 1
    assert redis.hget("wurk:history:jobs:20261130", "Report|p") == b"10"
    assert Query(now=later).daily(days=2) == {
        "2026-11-30": {"Report": {"p": 10, "ms": 100}, "Export": {"p": 4, "ms": 40}},
        "2026-11-29": {},
    }


def test_two_leaders_cannot_count_a_minute_twice(config, redis):
    minute = NOW - timedelta(minutes=5, seconds=30)
    flush_at(config, minute, Report=1)
    leading(config)
    first, second = MetricsRollup(config), MetricsRollup(config)
    assert first.roll_up(NOW.timestamp()) > 0
    assert second.roll_up(NOW.timestamp()) == 0
    # A rival that read the cursor before the first one moved it still sends the
    # minute; the script compares it with the cursor inside Redis and refuses.
    start = int(minute.timestamp()) // 60 * 60
    args = ["wurk:history:rolled", "j|261130|11:55", "wurk:history:jobs:20261130"]
    assert config.scripts.call("core.metrics_rollup", config.redis_pool.client, args, [start, 60]) == -1
    assert redis.hget("wurk:history:jobs:20261130", "Report|p") == b"1"


def test_a_sample_holds_the_cluster_gauges_and_each_queues_depth_and_latency(config, redis):
    now = time.time()
    redis.sadd("queues", "default", "empty")
    redis.lpush("queue:default", json.dumps({"class": "A", "enqueued_at": int((now - 30) * 1000)}))
    redis.lpush("queue:default", json.dumps({"class": "B", "enqueued_at": int(now * 1000)}))
    redis.set("stat:processed", 120)
    redis.set("stat:failed", 7)
    redis.zadd("retry", {"r1": 1, "r2": 2})
    redis.zadd("dead", {"d": 1})
    redis.sadd("processes", "p:1:000000000001", "p:2:000000000002")
    redis.hset("p:1:000000000001", "busy", 3)
    redis.hset("p:2:000000000002", "busy", 1)
    leading(config)
    rollup = MetricsRollup(config)
    entry = rollup.record_sample(now)
    assert int(entry.split("-")[0]) / 1000 - now < 5
    [sample] = Query().gauges()
    assert (sample.processed, sample.failed, sample.enqueued, sample.busy) == (120, 7, 2, 4)
    assert (sample.retry, sample.scheduled, sample.dead, sample.processes) == (2, 0, 1, 2)
    assert set(sample.queues) == {"default", "empty"}
    assert sample.queues["default"].size == 2
    assert 29 < sample.queues["default"].latency < 31  # the tail is the oldest
    assert sample.queues["empty"].size == 0
    assert sample.queues["empty"].latency == 0.0


def test_the_stream_is_capped(config, redis):
    config["history_stream_cap"] = 100
    leading(config)
    rollup = MetricsRollup(config)
    for _ in range(1_000):
        rollup.record_sample(time.time())
    assert 100 <= redis.xlen("wurk:history") < 300  # MAXLEN ~ trims whole stream nodes
    assert len(Query().gauges(count=50)) == 50


class CountedRollup(MetricsRollup):
    """The real rollup, counting its ticks: the end marker of "wrote nothing"
    is a number of ticks gone by, not a number of seconds."""

    def __init__(self, config) -> None:
        super().__init__(config)
        self.ticks = 0

    def tick(self) -> None:
        super().tick()
        self.ticks += 1


def test_the_loop_acts_only_while_this_process_leads(config, redis):
    config["metrics_rollup_interval"] = 0.1
    leader = Leader(config, "host:1:bbbbbbbbbbbb")
    config.register(SERVICE, leader)
    redis.set("dear-leader", "someone-else")
    rollup = CountedRollup(config)
    rollup.start()
    try:
        assert leader.campaign() is False
        ticked = rollup.ticks
        wait_for(lambda: rollup.ticks >= ticked + 3, timeout=30)  # three whole ticks as a follower
        assert redis.exists("wurk:history") == 0
        redis.delete("dear-leader")
        assert leader.campaign() is True
        wait_for(lambda: redis.xlen("wurk:history") >= 2, timeout=30)
    finally:
        stopped = rollup.stop()
    assert stopped, "the rollup's thread ended"
    count, ticks = redis.xlen("wurk:history"), rollup.ticks
    assert rollup.running is False
    assert (redis.xlen("wurk:history"), rollup.ticks) == (count, ticks)  # stopped means stopped
