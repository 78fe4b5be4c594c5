"""perform_bulk at volume: complete, in order, and halting exactly what middleware halts."""

from __future__ import annotations

import json

import wurk


class BulkJob(wurk.Job):
    def perform(self, n):
        pass


class DropMultiplesOfSeven(wurk.ClientMiddleware):
    def call(self, job_class, job, queue, redis_pool, call_next):
        if job["args"][0] % 7 == 0:
            return False
        return call_next()


def lpush_calls(redis) -> int:
    return int(redis.info("commandstats").get("cmdstat_lpush", {"calls": 0})["calls"])


def test_ten_thousand_jobs_arrive_complete_and_in_order(config, redis):
    before = lpush_calls(redis)
    jids = BulkJob.perform_bulk([[n] for n in range(10_000)])
    assert lpush_calls(redis) - before == 10  # slices of 1,000
    assert len(jids) == 10_000
    assert len(set(jids)) == 10_000
    # LPUSH puts the newest at the head; workers pop from the tail, oldest first.
    tail_first = [json.loads(item) for item in reversed(redis.lrange("queue:default", 0, -1))]
    assert [job["args"][0] for job in tail_first] == list(range(10_000))
    assert [job["jid"] for job in tail_first] == jids


def test_a_halting_middleware_drops_exactly_the_jobs_it_halts(config, redis):
    config.client_middleware.add(DropMultiplesOfSeven)
    jids = BulkJob.perform_bulk([[n] for n in range(10_000)], batch_size=333)
    halted = [n for n in range(10_000) if n % 7 == 0]
    assert [n for n, jid in enumerate(jids) if jid is None] == halted
    stored = [json.loads(item)["args"][0] for item in reversed(redis.lrange("queue:default", 0, -1))]
    assert stored == [n for n in range(10_000) if n % 7]
    assert {json.loads(item)["jid"] for item in redis.lrange("queue:default", 0, -1)} == {j for j in jids if j}
