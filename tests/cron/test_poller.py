"""The poller in this process on the test server: the leader gate, due
checks and marks, no backfill, the late warning, fencing a stale leader,
``fire``/``enqueue_now``, pausing, and the task path."""

from __future__ import annotations

import json
import logging
from collections import Counter
from datetime import UTC, datetime

import pytest

import wurk
import wurk_cron
from wurk.server.leader import SERVICE, Leader
from wurk_cron import LoopSet, Manager
from wurk_cron.poller import Poller

from .conftest import Clock

#: 2025-06-01 12:02:30 UTC, half a minute past a minute boundary.
T0 = datetime(2025, 6, 1, 12, 2, 30, tzinfo=UTC).timestamp()
MINUTE = 60


def jobs(redis, queue: str = "default") -> list[dict]:
    return [json.loads(raw) for raw in reversed(redis.lrange(f"queue:{queue}", 0, -1))]


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


@pytest.fixture
def poller(config, clock) -> Poller:
    return Poller(config, clock=clock)


def test_a_follower_never_fires(config, redis, clock):
    Manager(config).register("* * * * *", "EveryMinute")
    follower = Poller(config, clock=clock)
    follower.tick()  # no Leader registered: this process never leads
    rival = Leader(config, "elsewhere:9:cccccccccccc")
    assert rival.campaign()
    mine = Leader(config, "cron-test:2:bbbbbbbbbbbb")
    config.register(SERVICE, mine)
    assert not mine.campaign()  # the rival holds the lock
    follower.tick()
    assert jobs(redis) == []
    rival.stop()


def test_a_new_loop_fires_on_the_first_tick_when_it_matched_in_the_preceding_interval(
    config, redis, leader, poller, clock
):
    loop = Manager(config).register("* * * * *", "EveryMinute", args=[1], retry=3)
    assert poller.tick_loop(loop.lid, clock.now, leader.token) is not None
    [job] = jobs(redis)
    assert {k: job[k] for k in ("class", "args", "queue", "retry")} == {
        "class": "EveryMinute",
        "args": [1],
        "queue": "default",
        "retry": 3,
    }
    minute = int(T0) // 60 * 60
    read = LoopSet(config).fetch(loop.lid)
    assert (read.last_fired_at, read.next_fire_at) == (int(T0), minute + MINUTE)
    assert read.history() == [(int(T0), job["jid"])]


def test_each_due_loop_fires_once_per_tick_and_the_marks_move_on(config, redis, leader, poller, clock):
    every = Manager(config).register("* * * * *", "EveryMinute")
    hourly = Manager(config).register("0 * * * *", "Hourly")
    for _ in range(3):
        poller.tick()
        poller.tick()  # a second tick in the same minute finds nothing due
        clock.advance(MINUTE)
    assert Counter(job["class"] for job in jobs(redis)) == {"EveryMinute": 3}
    assert [fired for fired, _ in LoopSet(config).fetch(every.lid).history()] == [
        int(T0) + 2 * MINUTE,
        int(T0) + MINUTE,
        int(T0),
    ]
    next_hour = (int(T0) // 3600 + 1) * 3600
    assert LoopSet(config).fetch(hourly.lid).next_fire_at == next_hour  # stored before it is due


def test_missed_ticks_are_not_backfilled_and_a_late_fire_warns(config, redis, leader, poller, clock, caplog):
    loop = Manager(config).register("*/5 * * * *", "FiveMinutes")
    poller.tick()  # stores the first nf: 12:05
    assert jobs(redis) == []
    clock.advance(3 * 3600)  # three hours without a leader
    with caplog.at_level(logging.WARNING):
        poller.tick()
    assert len(jobs(redis)) == 1  # once, not 36 times
    [warning] = [r.getMessage() for r in caplog.records if "missed tick" in r.getMessage()]
    expected = int(T0) // 300 * 300 + 300
    fired = int(clock.now)
    assert warning == (
        f"[cron] missed tick lid={loop.lid} klass=FiveMinutes expected_at={expected} "
        f"fired_at={fired} drift={fired - expected}s"
    )
    assert LoopSet(config).fetch(loop.lid).next_fire_at == (fired // 300 + 1) * 300  # computed from now


def test_a_new_loop_that_matched_just_before_its_first_tick_fires_then(config, redis, leader, poller, clock):
    Manager(config).register("2 * * * *", "AtTwoPast")  # 12:02, half a minute before T0
    Manager(config).register("1 * * * *", "AtOnePast")  # 12:01, more than one interval before
    poller.tick()
    assert [job["class"] for job in jobs(redis)] == ["AtTwoPast"]


def test_a_fire_at_most_ninety_seconds_late_does_not_warn(config, redis, leader, poller, clock, caplog):
    Manager(config).register("* * * * *", "EveryMinute")
    poller.tick()
    clock.advance(90)
    with caplog.at_level(logging.WARNING):
        poller.tick()
    assert len(jobs(redis)) == 2
    assert not [r for r in caplog.records if "missed tick" in r.getMessage()]


def test_a_schedule_that_never_matches_clears_nf_and_stays_silent(config, redis, leader, poller):
    loop = Manager(config).register("0 0 30 2 *", "Never")
    assert wurk_cron.fire(loop.lid, config=config) is not None  # by hand: no next fire to store
    assert redis.hget(f"loops:{loop.lid}", "nf") is None
    assert redis.hget(f"loops:{loop.lid}", "lf") is not None
    poller.tick()
    poller.tick()
    assert redis.hget(f"loops:{loop.lid}", "nf") is None
    assert len(jobs(redis)) == 1


def test_paused_loops_are_skipped_and_resume_from_now(config, redis, leader, poller, clock):
    loop = Manager(config).register("* * * * *", "EveryMinute", paused=True)
    poller.tick()
    clock.advance(10 * MINUTE)
    poller.tick()
    assert jobs(redis) == []
    assert wurk_cron.unpause(loop.lid, config=config, now=clock.now)
    poller.tick()  # the slots passed while paused are not fired late
    assert jobs(redis) == []
    clock.advance(MINUTE)
    poller.tick()
    assert len(jobs(redis)) == 1
    assert not wurk_cron.pause("0" * 16, config=config)


def test_a_stale_leader_cannot_fire_a_tick_its_successor_owns(config, redis, clock):
    """Two processes that both believe they lead for a moment: the first
    leader is paused past its TTL, a second is promoted, and the first
    resumes with its cached lease still valid."""
    loop = Manager(config).register("* * * * *", "EveryMinute")
    first, second = Leader(config, "host:1:aaaaaaaaaaaa"), Leader(config, "host:2:bbbbbbbbbbbb")
    assert first.campaign()
    stale_token = first.token
    redis.delete("dear-leader")  # the first's lease ran out while it was paused
    assert second.campaign()
    poller = Poller(config, clock=clock)
    assert poller.tick_loop(loop.lid, clock.now, stale_token) is None  # fenced inside Redis
    assert jobs(redis) == []
    assert poller.tick_loop(loop.lid, clock.now, second.token) is not None
    assert poller.tick_loop(loop.lid, clock.now, second.token) is None  # already fired this tick
    assert len(jobs(redis)) == 1
    first.stop()
    second.stop()


def test_two_pollers_that_read_the_same_mark_enqueue_once(config, redis, leader, clock):
    """The compare-and-set on ``nf``: the second reader finds it moved."""
    loop = Manager(config).register("* * * * *", "EveryMinute")
    one, two = Poller(config, clock=clock), Poller(config, clock=clock)
    assert one.tick_loop(loop.lid, clock.now, leader.token) is not None
    assert not wurk_cron.firing.advance(
        config, loop.lid, expected="", next_fire=0, fired_at=int(clock.now), token=leader.token, mode="tick"
    )  # what the second poller would send, having read "no nf" before the first fired
    two.tick()
    assert len(jobs(redis)) == 1


def test_fire_bypasses_leader_and_schedule_and_enqueue_now_touches_nothing(config, redis):
    loop = Manager(config).register("0 0 1 1 *", "Yearly", queue="low", args=["x"])
    jid = wurk_cron.fire(loop.lid, config=config, now=T0)
    [job] = jobs(redis, "low")
    assert job["jid"] == jid
    assert job["args"] == ["x"]
    read = LoopSet(config).fetch(loop.lid)
    assert read.last_fired_at == int(T0)
    assert read.next_fire_at == datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    assert read.history() == [(int(T0), jid)]
    marks = redis.hgetall(f"loops:{loop.lid}")
    other = wurk_cron.enqueue_now(loop.lid, config=config)
    assert other not in (None, jid)
    assert len(jobs(redis, "low")) == 2
    assert redis.hgetall(f"loops:{loop.lid}") == marks
    assert wurk_cron.history(loop.lid, config=config) == [(int(T0), jid)]
    assert wurk_cron.fire("0" * 16, config=config) is None
    assert wurk_cron.enqueue_now("0" * 16, config=config) is None


def test_history_keeps_the_newest_25_fires(config, redis):
    loop = Manager(config).register("* * * * *", "EveryMinute")
    jids = [wurk_cron.fire(loop.lid, config=config, now=T0 + i * MINUTE) for i in range(30)]
    history = wurk_cron.history(loop.lid, config=config)
    assert [jid for _, jid in history] == list(reversed(jids))[:25]


def test_the_zone_is_not_part_of_the_identity(config):
    """As in the guides' table: a zone change rewrites the same loop."""
    first = Manager(config).register("0 7 * * *", "Morning", tz="America/Chicago")
    again = Manager(config).register("0 7 * * *", "Morning", tz="Asia/Tokyo")
    assert first.lid == again.lid
    assert LoopSet(config).fetch(first.lid).tz_name == "Asia/Tokyo"


def test_loops_run_in_their_zone(config, redis, leader, clock):
    chicago = Manager(config).register("0 7 * * *", "Morning", tz="America/Chicago")
    unknown = Manager(config).register("0 7 * * *", "MorningOnMars", tz="Mars/Base")
    Poller(config, clock=clock).tick()
    assert LoopSet(config).fetch(chicago.lid).next_fire_at == datetime(2025, 6, 2, 12, tzinfo=UTC).timestamp()
    assert LoopSet(config).fetch(unknown.lid).next_fire_at == datetime(2025, 6, 2, 7, tzinfo=UTC).timestamp()


class EveryMinuteJob(wurk.Job):
    def perform(self, n):
        pass


class Task:
    """A task in the ``django.tasks`` shape (``using`` / ``enqueue``), enqueueing
    through a wurk job, so what the poller handed it can be read back."""

    def __init__(self, queue: str = "tasks") -> None:
        self.queue_name = queue

    def using(self, *, queue_name: str) -> Task:
        return Task(queue_name)

    def enqueue(self, *args):
        jid = EveryMinuteJob.set(queue=self.queue_name).perform_async(*args)
        return type("Result", (), {"id": jid})()


report_task = Task()


def test_a_task_is_enqueued_through_its_own_api(config, redis):
    config.jobs.allow("tests.cron")
    left = Manager(config).register("* * * * *", "tests.cron.test_poller.report_task", args=[7], retry=9)
    moved = Manager(config).register("* * * * *", "tests.cron.test_poller.report_task", args=[8], queue="urgent")
    first = wurk_cron.fire(left.lid, config=config)
    second = wurk_cron.fire(moved.lid, config=config)
    [job] = jobs(redis, "tasks")  # the task's own queue: the loop left it at the default
    assert (job["jid"], job["args"], job["retry"]) == (first, [7], True)  # the loop's retry is not used
    [job] = jobs(redis, "urgent")
    assert (job["jid"], job["args"]) == (second, [8])


def test_a_task_outside_the_allowed_packages_is_never_imported(config, redis):
    loop = Manager(config).register("* * * * *", "tests.cron.test_poller.report_task")
    wurk_cron.fire(loop.lid, config=config)
    [job] = jobs(redis)  # pushed as a plain payload, for whoever knows the name
    assert job["class"] == "tests.cron.test_poller.report_task"


def test_a_mark_written_as_float_seconds_is_read(config, redis, leader, poller, clock):
    """Another client may store ``nf`` as a float; the compare-and-set uses the stored text."""
    loop = Manager(config).register("* * * * *", "EveryMinute")
    redis.hset(f"loops:{loop.lid}", "nf", f"{int(T0) // 60 * 60}.0")
    assert poller.tick_loop(loop.lid, clock.now, leader.token) is not None
    assert LoopSet(config).fetch(loop.lid).next_fire_at == int(T0) // 60 * 60 + MINUTE
