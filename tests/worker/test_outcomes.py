"""Job outcomes: every way a run ends is told once to the ``wurk_job_outcome``
plugins, from where it happens — a real worker process for what a worker
does, this process for API kills, the reaper and the Retrier."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator

import pytest

import wurk.plugins.outcomes
from tests.helpers import Subprocess, WorkerPool, wait_for
from tests.worker import outcome_app
from tests.worker.outcome_app import (
    Crashes,
    DeadNow,
    Discarded,
    Flaky,
    KillsARetry,
    Limited,
    NoRetry,
    Ok,
    Sleepy,
    StopsOnce,
)
from wurk.api import DeadSet, RetrySet
from wurk.server.identity import ProcessIdentity
from wurk.server.reaper import RECOVERY_THRESHOLD, Reaper
from wurk.server.retry import Retrier, death_reason


@pytest.fixture
def outcome_workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.worker.outcome_app", {})
    yield pool
    pool.stop_all()


@pytest.fixture
def listening(config) -> Iterator[list[BaseException]]:
    """This process's configuration with the recorder (and the broken listener)
    registered; yields what ``handle_exception`` was given."""
    reported: list[BaseException] = []
    config.error_handlers.append(lambda exc, context, *rest: reported.append(exc))
    outcome_app.listen(config)
    yield reported
    config.plugins.unregister("outcome-recorder")
    config.plugins.unregister("deaf")


def stop(worker: Subprocess) -> None:
    """The end marker for "told once": the worker stopped (TERM) and exited.
    Everything it would tell, a second and wrong telling included, it has
    told by then, however slowly it ran; a sleep would only hope so."""
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0


def outcomes(redis) -> list[list]:
    return [json.loads(entry) for entry in redis.lrange("outcomes", 0, -1)]


def told(redis, jid: str) -> list[list]:
    return [entry[:2] for entry in outcomes(redis) if entry[2] == jid]


def test_each_way_a_worker_run_ends_is_told_once(outcome_workers, redis):
    expected = {
        Ok.perform_async(): ["succeeded", None],
        Flaky.perform_async(): ["retry_scheduled", None],
        DeadNow.perform_async(): ["died", "retries_exhausted"],
        NoRetry.perform_async(): ["died", "retry_false"],
        Discarded.perform_async(): ["died", "discarded"],
        Limited.perform_async(): ["rescheduled", None],
    }
    expired = "expired0000000000000000"
    redis.lpush(
        "queue:default",
        json.dumps(
            {
                "class": f"{Ok.__module__}.Ok",
                "args": [],
                "jid": expired,
                "queue": "default",
                "retry": True,
                "created_at": time.time() - 120,
                "expiry": time.time() - 60,
            }
        ),
    )
    expected[expired] = ["died", "expired"]
    worker = outcome_workers.start("-c", "2")
    wait_for(lambda: len(outcomes(redis)) >= len(expected), timeout=30)
    stop(worker)  # the end marker: a second, wrong, telling would be in by now
    assert {jid: told(redis, jid) for jid in expected} == {jid: [kind] for jid, kind in expected.items()}
    assert len(outcomes(redis)) == len(expected)
    assert redis.zcard("retry") == 1  # the bookings themselves are unchanged
    assert [json.loads(m)["jid"] for m in redis.zrange("dead", 0, -1)] == [
        jid for jid, kind in expected.items() if kind == ["died", "retries_exhausted"]
    ]
    [(member, score)] = redis.zrange("schedule", 0, -1, withscores=True)
    assert json.loads(member)["class"].endswith(".Limited")
    assert score > time.time() + 3000
    log = worker.output()
    assert "a broken listener heard succeeded" in log  # reported, and the recorder still heard it


def test_a_retry_that_runs_out_is_told_as_exhausted(outcome_workers, redis):
    jid = Flaky.set(retry=1).perform_async()
    worker = outcome_workers.start("-c", "1")
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    [member] = redis.zrange("retry", 0, -1)
    redis.zadd("retry", {member: time.time() - 1}, xx=True)  # due now
    wait_for(lambda: len(told(redis, jid)) == 2, timeout=30)
    stop(worker)
    assert told(redis, jid) == [["retry_scheduled", None], ["died", "retries_exhausted"]]


def test_a_job_given_back_at_shutdown_is_told_interrupted(outcome_workers, redis):
    jid = Sleepy.perform_async()
    worker = outcome_workers.start("-c", "1", "-t", "1")
    wait_for(lambda: redis.llen("started") == 1, timeout=30)
    worker.signal(signal.SIGTERM)
    worker.wait(timeout=30)
    assert told(redis, jid) == [["interrupted", None]]
    assert [json.loads(job)["jid"] for job in redis.lrange("queue:default", 0, -1)] == [jid]


def test_a_job_that_stops_early_is_told_interrupted_then_its_next_run(outcome_workers, redis):
    jid = StopsOnce.perform_async()
    worker = outcome_workers.start("-c", "1")
    wait_for(lambda: len(told(redis, jid)) == 2, timeout=30)
    stop(worker)
    assert told(redis, jid) == [["interrupted", None], ["succeeded", None]]


def test_a_kill_through_the_api_in_a_worker_is_told_by_that_worker(outcome_workers, redis):
    """A real worker books a retry; a job in a real worker kills the entry
    through ``wurk.api``: that worker's plugins hear ``died``/``killed``, once."""
    flaky = Flaky.perform_async()
    worker = outcome_workers.start("-c", "1")
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    killer = KillsARetry.perform_async(flaky)
    wait_for(lambda: told(redis, killer) == [["succeeded", None]], timeout=30)
    stop(worker)
    assert told(redis, flaky) == [["retry_scheduled", None], ["died", "killed"]]
    assert redis.zcard("retry") == 0
    assert [json.loads(member)["jid"] for member in redis.zrange("dead", 0, -1)] == [flaky]


def test_a_job_that_crashes_its_process_three_times_is_told_a_poison_pill(outcome_workers, redis):
    """Each run SIGKILLs the real worker running it; the worker that recovers
    it a third time sends it to the dead set and tells ``poison_pill``."""
    jid = Crashes.perform_async()
    for _round in range(RECOVERY_THRESHOLD):
        victim = outcome_workers.start("-c", "1")
        assert victim.wait(60) == -signal.SIGKILL
    assert redis.llen("crashes") == RECOVERY_THRESHOLD
    survivor = outcome_workers.start("-c", "1")
    wait_for(lambda: told(redis, jid), timeout=30)
    stop(survivor)
    assert told(redis, jid) == [["died", "poison_pill"]]
    assert [json.loads(member)["jid"] for member in redis.zrange("dead", 0, -1)] == [jid]
    assert redis.llen("crashes") == RECOVERY_THRESHOLD  # it never ran a fourth time


def test_a_kill_through_the_api_is_told_where_it_happens(config, redis, listening):
    retries = RetrySet(config=config)
    retries.schedule(time.time() + 60, {"class": "X", "args": [], "jid": "fromretry", "queue": "default"})
    assert retries.find_job("fromretry").kill() is not None
    DeadSet(config=config).kill({"class": "X", "args": [], "jid": "direct"}, notify_failure=False)
    assert told(redis, "fromretry") == [["died", "killed"]]
    assert told(redis, "direct") == [["died", "killed"]]  # death handlers spared, the outcome still told
    assert [str(exc) for exc in listening] == ["a broken listener heard died"] * 2


def test_a_poison_pill_is_told_by_the_reaper(config, redis, listening):
    deaths: list[str] = []
    config.death_handlers.append(lambda job, exc: deaths.append(job["jid"]))
    config.death_handlers.append(lambda job, exc: deaths.append(death_reason()))
    reaper = Reaper(config, ProcessIdentity.current(), ["default"])
    pill = json.dumps({"jid": "pill", "class": "X", "args": [], "queue": "default"})
    for n in range(1, RECOVERY_THRESHOLD + 1):
        redis.delete("queue:default")  # a worker took it, and died of it
        owner = f"elsewhere|{n}|aaaaaaaaaaaa"
        redis.lpush(f"queue:default|{owner}|0", pill)
        redis.sadd(f"super_fetch:running:{owner.replace('|', ':')}", "pill")
        reaper.sweep()
    assert told(redis, "pill") == [["died", "poison_pill"]]
    assert deaths == ["pill", "poison_pill"]  # the death handlers run, once, with the reason


def test_the_retrier_books_with_cores_rules(config, redis, listening):
    deaths: list[str] = []
    config.death_handlers.append(lambda job, exc: deaths.append(f"{job['jid']}: {exc}"))
    retrier = Retrier(config)
    retrier.kill({"class": "X", "args": [], "jid": "k1", "queue": "default"}, reason="retries_exhausted")
    retrier.reschedule({"class": "X", "args": [], "jid": "r1", "queue": "default", "enqueued_at": 1}, 30, "low")
    assert [json.loads(m)["jid"] for m in redis.zrange("dead", 0, -1)] == ["k1"]
    assert deaths == ["k1: Job killed: retries_exhausted"]
    [(member, score)] = redis.zrange("schedule", 0, -1, withscores=True)
    assert json.loads(member) == {"class": "X", "args": [], "jid": "r1", "queue": "low"}
    assert time.time() + 20 < score < time.time() + 40
    assert [entry[:2] for entry in outcomes(redis)] == [["died", "retries_exhausted"], ["rescheduled", None]]


def test_nobody_listening_costs_nothing_but_a_cached_flag(config):
    config = wurk.Config(disabled_plugins=["batches"])  # the one feature plugin that listens
    assert Retrier(config)._retry.listening is False
    assert wurk.plugins.outcomes.listening(config) is False
