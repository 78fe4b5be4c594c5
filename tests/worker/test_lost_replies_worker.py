"""A real worker whose replies get lost on the way back: the scheduler's
pops, the pushes and the claims each lose their first reply, and every job
still runs exactly once."""

from __future__ import annotations

import pytest

from tests.helpers import WorkerPool, first_reply_lost, wait_for
from tests.worker.lossy_app import Ledgered

JOBS = 40


@pytest.fixture
def lossy_workers(config, redis_url, fault_proxy, tmp_path):
    pool = WorkerPool(fault_proxy.url(), tmp_path, "tests.worker.lossy_app", {"LEDGER_URL": redis_url})
    yield pool
    pool.stop_all()


def test_every_job_runs_once_when_replies_are_lost(config, redis, fault_proxy, lossy_workers):
    for n in range(JOBS):
        Ledgered.perform_async(f"now-{n}")
        Ledgered.perform_in(3600, f"later-{n}")
    redis.zadd("schedule", dict.fromkeys(redis.zrange("schedule", 0, -1), 1.0), xx=True)  # all due
    for script, times in (("core.zpopbyscore", 5), ("core.push", 5), ("core.fetch", 3)):
        fault_proxy.lose_reply(first_reply_lost(config, script), times=times)
    worker = lossy_workers.start("-c", "3")
    try:
        wait_for(lambda: redis.hlen("runs") == 2 * JOBS, timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{where_the_jobs_are(redis, fault_proxy, lossy_workers)}") from None
    assert fault_proxy.armed() == 0, "every fault was injected"
    Ledgered.perform_async("end")  # behind everything else: once it ran, a duplicate would have too
    wait_for(lambda: redis.hexists("runs", "end"), timeout=30)
    runs = {key.decode(): int(count) for key, count in redis.hgetall("runs").items()}
    assert {key: count for key, count in runs.items() if count != 1} == {}
    assert len(runs) == 2 * JOBS + 1
    worker.stop()


def where_the_jobs_are(redis, fault_proxy, workers: WorkerPool) -> str:
    """What a run that stalls leaves to read: the jobs not run, every list and
    set that can hold one, the faults still armed, and the worker's log."""
    ran = {key.decode() for key in redis.hkeys("runs")}
    missing = sorted(f"{when}-{n}" for when in ("now", "later") for n in range(JOBS) if f"{when}-{n}" not in ran)
    lines = [f"not run: {missing}", f"faults still armed: {fault_proxy.armed()}"]
    for key in sorted(redis.scan_iter("*")):
        kind = redis.type(key).decode()
        size = {"list": redis.llen, "zset": redis.zcard, "set": redis.scard}.get(kind)
        if size is not None:
            lines.append(f"{key.decode()} ({kind}): {size(key)}")
    for worker in workers.started:  # each logs to a file, read as it stands (output() would wait for the exit)
        assert worker.log is not None
        lines.append(f"-- {worker.log.name}\n" + "\n".join(worker.log.read_text(errors="replace").splitlines()[-40:]))
    return "\n".join(lines)
