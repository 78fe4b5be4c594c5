"""A real worker profiles a job pushed with ``profile``: what lands in Redis."""

from __future__ import annotations

import signal
import time

import pytest

from tests.helpers import WorkerPool, wait_for
from tests.profiles.profile_app import AlwaysProfiled, Crunch, Fails
from wurk.api import ProfileSet
from wurk.server import profiler

FIELDS = {b"started_at", b"token", b"type", b"jid", b"filename", b"elapsed", b"data", b"size", b"format"}


@pytest.fixture
def workers(config, redis_url, tmp_path):
    pool = WorkerPool(redis_url, tmp_path, "tests.profiles.profile_app", {})
    yield pool
    pool.stop_all()


def run_worker(workers, redis, done: int, concurrency: int = 2) -> None:
    worker = workers.start("-c", str(concurrency))
    wait_for(lambda: redis.llen("done") >= done, timeout=60)
    wait_for(lambda: redis.llen("queue:default") == 0 and int(redis.get("stat:processed") or 0) >= done)
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def test_a_profiled_job_leaves_sidekiqs_keys_and_a_pstats_table(workers, redis):
    before = time.time()
    jid = Crunch.set(profile="alice").perform_async(18)
    plain = Crunch.perform_async(5)
    run_worker(workers, redis, 2)
    key = f"alice-{jid}"
    assert redis.zrange("profiles", 0, -1) == [key.encode()]
    score = redis.zscore("profiles", key)
    assert before + profiler.EXPIRY - 1 <= score <= time.time() + profiler.EXPIRY
    assert 0 < redis.ttl(key) <= profiler.EXPIRY
    stored = redis.hgetall(key)
    assert set(stored) == FIELDS
    assert stored[b"token"] == b"alice"
    assert stored[b"jid"] == jid.encode()
    assert stored[b"type"] == b"tests.profiles.profile_app.Crunch"
    assert stored[b"format"] == b"pstats"
    assert int(stored[b"size"]) == len(stored[b"data"]) > 0
    assert before - 1 <= int(stored[b"started_at"]) <= time.time()
    assert 0 < float(stored[b"elapsed"]) < 60
    assert stored[b"filename"].startswith(f"alice-tests.profiles.profile_app.Crunch-{jid}-".encode())
    stats = profiler.decode(stored[b"data"])
    names = {name for _path, _line, name in stats.stats}  # type: ignore[attr-defined]
    assert {"fibonacci", "perform"} <= names
    top = profiler.top_functions(stats, len(stats.stats))  # type: ignore[attr-defined]
    [fib] = [row for row in top if row.function.endswith("(fibonacci)")]
    assert fib.calls == 8361
    assert fib.primitive_calls == 1
    assert top[0].cumulative_time >= fib.cumulative_time
    # The plain job ran too, and left nothing.
    assert not redis.keys(f"*{plain}*")


def test_class_options_profile_and_a_failed_job_stores_nothing(workers, redis):
    jid = AlwaysProfiled.perform_async()
    Fails.set(profile="bob").perform_async()
    # One thread: a process profiles one job at a time, so two profiled jobs
    # running side by side would leave one of them unprofiled.
    run_worker(workers, redis, 2, concurrency=1)
    assert redis.zrange("profiles", 0, -1) == [f"ops-{jid}".encode()]
    assert not redis.keys("bob-*")
    [record] = list(ProfileSet())
    assert (record.token, record.jid, record.python) == ("ops", jid, True)
    assert record.stats().total_calls > 0  # type: ignore[attr-defined]


def test_a_job_without_profile_writes_no_profile_key(workers, redis):
    jids = Crunch.perform_bulk([[3], [4], [5]])
    run_worker(workers, redis, 3)
    assert redis.exists("profiles") == 0
    everything = redis.keys("*")
    assert not [key for key in everything if any(jid.encode() in key for jid in jids)]
    assert not [key for key in everything if redis.type(key) == b"hash" and redis.hexists(key, "data")]
