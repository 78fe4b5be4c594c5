"""Stats and Stats.History against a real server."""

from __future__ import annotations

import json
import time
from datetime import UTC, date, datetime

import pytest

from wurk.api import History, Queue, QueueSummary, Stats

from .jobs import HardJob, OtherJob


def reads_processed(redis) -> int:
    """Read events the server has processed: one per round trip of a client."""
    return int(redis.info("stats")["total_reads_processed"])


def test_construction_is_one_pipeline(config, redis):
    config.redis_pool.client.ping()  # open the connection first: connecting is not the snapshot
    redis.config_resetstat()
    before = reads_processed(redis)
    Stats()
    after = reads_processed(redis)
    assert after - before == 2  # the snapshot, plus the second INFO itself
    calls = {name: stat["calls"] for name, stat in redis.info("commandstats").items()}
    calls.pop("cmdstat_info")
    calls.pop("cmdstat_config|resetstat")
    assert calls == {"cmdstat_get": 4, "cmdstat_zcard": 3, "cmdstat_scard": 1, "cmdstat_lindex": 1}


def test_snapshot_fields(config, redis):
    redis.set("stat:processed", 10)
    redis.set("stat:failed", 5)
    redis.set("stat:expired", 2)
    redis.set("stat:rescheduled", 4)
    redis.zadd("schedule", {"a": 1.0, "b": 2.0})
    redis.zadd("retry", {"c": 1.0})
    redis.zadd("dead", {"d": 1.0, "e": 2.0, "f": 3.0})
    redis.sadd("processes", "host:1:abc")
    redis.lpush("queue:default", json.dumps({"class": "X", "args": [], "enqueued_at": int(time.time() * 1000) - 3000}))
    stats = Stats()
    assert (stats.processed, stats.failed, stats.expired, stats.rescheduled) == (10, 5, 2, 4)
    assert (stats.scheduled_size, stats.retry_size, stats.dead_size, stats.processes_size) == (2, 1, 3, 1)
    assert 2.5 < stats.default_queue_latency < 6
    redis.set("stat:processed", 11)
    assert stats.processed == 10  # a snapshot
    assert "processed=10" in repr(stats)


def test_an_empty_server_reads_as_zeros(config):
    stats = Stats()
    assert (stats.processed, stats.failed, stats.expired, stats.rescheduled, stats.dead_size) == (0, 0, 0, 0, 0)
    assert stats.default_queue_latency == 0.0
    assert stats.enqueued == 0
    assert stats.workers_size == 0
    assert stats.queues == {}
    assert stats.queue_summaries == []


def test_re_querying_readers(config, redis):
    HardJob.perform_bulk([[1], [2], [3]])
    OtherJob.perform_async(1)
    HardJob.set(queue="zeta").perform_bulk([[1], [2], [3]])
    redis.sadd("processes", "h:1:00000000000a", "h:2:00000000000b", "h:3:00000000gone")
    redis.hset("h:1:00000000000a", "busy", 3)
    redis.hset("h:2:00000000000b", "busy", 2)
    stats = Stats()
    assert stats.enqueued == 7
    assert list(stats.queues.items()) == [("default", 3), ("zeta", 3), ("other", 1)]
    assert stats.workers_size == 5
    OtherJob.perform_async(2)
    assert stats.enqueued == 8  # asks again


def test_queue_summaries_are_largest_first_and_unpack(config, redis):
    HardJob.perform_bulk([[1], [2]])
    OtherJob.perform_async(1)
    Queue("other").pause()
    summaries = Stats().queue_summaries
    assert [summary.name for summary in summaries] == ["default", "other"]
    name, size, latency, paused = summaries[1]
    assert (name, size, paused) == ("other", 1, True)
    assert 0.0 <= latency < 5
    assert isinstance(summaries[0], QueueSummary)
    assert summaries[0].paused is False
    with pytest.raises(AttributeError):
        summaries[0].size = 9  # type: ignore[misc]


def test_reset_sets_counters_to_zero(config, redis):
    for name in ("processed", "failed", "expired", "rescheduled"):
        redis.set(f"stat:{name}", 7)
    assert Stats().reset("failed", "bogus") == ["failed"]
    assert redis.get("stat:failed") == b"0"
    assert redis.get("stat:processed") == b"7"
    assert Stats().reset(["processed"]) == ["processed"]
    assert redis.get("stat:processed") == b"0"
    assert Stats().reset() == ["processed", "failed", "expired", "rescheduled"]
    assert redis.mget("stat:processed", "stat:failed", "stat:expired", "stat:rescheduled") == [b"0"] * 4
    assert Stats().reset("nothing") == []


def test_history_is_zero_filled_newest_first_in_utc(config, redis):
    redis.set("stat:processed:2026-11-30", 10)
    redis.set("stat:processed:2026-11-28", 4)
    redis.set("stat:failed:2026-11-29", 1)
    redis.set("stat:expired:2026-11-30", 2)
    redis.set("stat:rescheduled:2026-11-29", 3)
    history = Stats.History(3, date(2026, 11, 30))
    assert list(history.processed.items()) == [("2026-11-30", 10), ("2026-11-29", 0), ("2026-11-28", 4)]
    assert history.failed == {"2026-11-30": 0, "2026-11-29": 1, "2026-11-28": 0}
    assert history.expired == {"2026-11-30": 2, "2026-11-29": 0, "2026-11-28": 0}
    assert history.rescheduled == {"2026-11-30": 0, "2026-11-29": 3, "2026-11-28": 0}
    late_evening_in_new_york = datetime.fromisoformat("2026-11-29T21:00:00-05:00")  # 02:00 UTC on the 30th
    assert History(1, late_evening_in_new_york).dates == ["2026-11-30"]
    assert History(1).dates == [datetime.now(UTC).date().isoformat()]
    assert len(History(1825).dates) == 1825


@pytest.mark.parametrize("days", [0, -1, 1826])
def test_history_refuses_out_of_range_days(config, days):
    with pytest.raises(ValueError, match=r"1\.\.1825"):
        History(days)


def test_history_refuses_a_non_number(config):
    with pytest.raises(TypeError):
        History("30")  # type: ignore[arg-type]
