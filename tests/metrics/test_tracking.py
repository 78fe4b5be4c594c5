"""The execution tracker: counting in memory, and the exact flush Sidekiq 8 does."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

import wurk
from tests.command_log import Command, Recorder, captured, runs
from wurk.errors import Interrupted
from wurk.metrics import BUCKET_BOUNDS, BUCKET_LABELS, ExecutionTracker, History, Statsd, tracker_for
from wurk.metrics.tracking import bucket_index
from wurk.server.builtin_middleware import Expiry, InterruptHandler
from wurk.server.retry import Skip

AT = datetime(2026, 11, 30, 8, 5, 42, tzinfo=UTC)


def u16_buckets(redis, key: str) -> list[int]:
    fetch = [part for index in range(26) for part in ("GET", "u16", f"#{index}")]
    return redis.execute_command("BITFIELD_RO", key, *fetch)


@pytest.mark.parametrize(
    ("ms", "index"),
    [(0, 0), (19, 0), (20, 1), (280, 7), (334, 7), (335, 8), (334_999, 24), (335_000, 25), (10**9, 25)],
)
def test_a_duration_falls_in_the_first_bucket_whose_bound_exceeds_it(ms, index):
    assert bucket_index(ms) == index
    assert len(BUCKET_BOUNDS) == len(BUCKET_LABELS) == 26


def test_a_flush_writes_sidekiqs_keys_fields_and_ttls(config, redis):
    tracker = ExecutionTracker(config)
    for ms in (3, 7, 250):
        tracker.record("OkJob", ms)
    tracker.record("FailJob", 12, failed=True)
    assert tracker.flush(now=AT) > 0
    assert sorted(redis.keys("*")) == [b"h|OkJob-30-8:5", b"j|261130|8:0", b"j|261130|8:05"]
    expected = {b"OkJob|ms": b"260", b"OkJob|p": b"3", b"FailJob|f": b"1", b"FailJob|p": b"1"}
    assert redis.hgetall("j|261130|8:05") == expected
    assert redis.hgetall("j|261130|8:0") == expected
    assert redis.ttl("j|261130|8:05") == 28_800
    assert redis.ttl("j|261130|8:0") == 259_200
    assert redis.ttl("h|OkJob-30-8:5") == 28_800
    assert u16_buckets(redis, "h|OkJob-30-8:5") == [2] + [0] * 6 + [1] + [0] * 18
    assert redis.get("h|OkJob-30-8:5") == bytes.fromhex("0002" + "0000" * 6 + "0001")  # grows to bucket 7 only


def metric_flushes(commands: list[Command]) -> list[list[Command]]:
    """Each flush of execution metrics: a run of commands on ``h|`` and ``j|`` keys."""
    return runs(commands, lambda command: (command.key or "").startswith(("h|", "j|")))


def executions_of(flush: list[Command]) -> list[tuple[str, int, bool]]:
    """The executions a captured flush counted, in the order Sidekiq first
    counted each field: ``(class, ms, failed)``. Its own one-minute key's
    ``|ms`` and ``|f`` fields say it; each class ran at most once successfully
    per interval in the capture, so ``|ms`` is that one run's duration."""
    minute_key = flush[-1].key
    fields = [c.text()[2:] for c in flush if c.name == "hincrby" and c.key == minute_key]
    counts = {field: int(value) for field, value in fields}
    executions = []
    for field, value in fields:
        klass, kind = field.rsplit("|", 1)
        if kind == "ms":
            assert counts[f"{klass}|p"] - counts.get(f"{klass}|f", 0) == 1
            executions.append((klass, int(value), False))
        elif kind == "f":
            executions += [(klass, 0, True)] * int(value)
    return executions


def flush_time(flush: list[Command]) -> datetime:
    """The minute named by the flush's one-minute key, ``j|261130|8:35``."""
    stamp = flush[-1].key.split("|", 1)[1]
    return datetime.strptime(stamp, "%y%m%d|%H:%M").replace(tzinfo=UTC)


@pytest.mark.parametrize("index", range(len(metric_flushes(captured()))))
def test_the_flush_sends_the_commands_sidekiq_sent(config, server, index):
    """Each metrics flush in the Sidekiq 8.1.7 command log, replayed through
    the tracker: the same commands, keys, fields, values and TTLs, in the
    same order. One difference is deliberate: Sidekiq sends each key's
    commands as a pipeline, Wurk wraps the whole flush in one MULTI
    (docs/metrics.md: a failed flush writes nothing and keeps its counts)."""
    theirs = metric_flushes(captured())[index]
    tracker = ExecutionTracker(config)
    for klass, ms, failed in executions_of(theirs):
        tracker.record(klass, ms, failed=failed)
    recorder = Recorder(server.url)  # MONITOR, an administrator's command
    tracker.flush(now=flush_time(theirs))
    sent = recorder.stop()
    [ours] = metric_flushes(sent)  # without the new connection's handshake
    assert [command.text() for command in ours] == [command.text() for command in theirs]
    names = [command.name for command in sent]
    assert names[names.index("multi") + 1 : names.index("exec")] == [command.name for command in ours]


def test_nothing_is_written_for_an_interval_without_executions(config, redis):
    tracker = ExecutionTracker(config)
    assert tracker.flush(now=AT) == 0
    tracker.record("OkJob", 1)
    tracker.flush(now=AT)
    redis.flushall()
    assert tracker.flush(now=AT) == 0  # the counts went with the first flush
    assert redis.dbsize() == 0


def test_histogram_counters_saturate_instead_of_wrapping(config, redis):
    tracker = ExecutionTracker(config)
    for _ in range(70_000):
        tracker.record("Busy", 1)
    tracker.flush(now=AT)
    assert u16_buckets(redis, "h|Busy-30-8:5")[0] == 65_535
    assert redis.hget("j|261130|8:05", "Busy|p") == b"70000"


def test_track_counts_failures_and_interruptions_as_sidekiq_does(config, redis):
    tracker = ExecutionTracker(config)
    assert tracker.track("Ok", lambda: "result") == "result"
    with pytest.raises(ValueError, match="boom"):
        tracker.track("Bad", lambda: (_ for _ in ()).throw(ValueError("boom")))
    for interruption in (Skip(), Interrupted("checkpoint")):
        with pytest.raises(type(interruption)):
            tracker.track("Iter", lambda exc=interruption: (_ for _ in ()).throw(exc))
    tracker.flush(now=AT)
    fields = {k.decode(): int(v) for k, v in redis.hgetall("j|261130|8:05").items()}
    assert fields == {"Ok|ms": 0, "Ok|p": 1, "Bad|f": 1, "Bad|p": 1, "Iter|ms": 0, "Iter|p": 2}
    assert redis.exists("h|Bad-30-8:5") == 0  # failures take no part in the timings
    assert u16_buckets(redis, "h|Iter-30-8:5")[0] == 2


def test_counting_is_exact_under_many_threads(config, redis):
    tracker = ExecutionTracker(config)

    def work():
        for _ in range(5_000):
            tracker.record("Threaded", 1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    tracker.flush(now=AT)  # a flush in the middle loses nothing either
    for thread in threads:
        thread.join()
    tracker.flush(now=AT)
    assert redis.hget("j|261130|8:05", "Threaded|p") == b"40000"
    assert u16_buckets(redis, "h|Threaded-30-8:5")[0] == 40_000


def test_a_failed_flush_keeps_its_counts_for_the_next_one(config, redis, redis_url):
    tracker = ExecutionTracker(config)
    tracker.record("Kept", 5)
    unreachable = wurk.Config()
    unreachable.redis = {"url": "redis://127.0.0.1:1/0", "connect_timeout": 0.2}
    tracker.config = unreachable
    with pytest.raises(wurk.RedisConnectionError):
        tracker.flush(now=AT)
    tracker.config = config
    tracker.record("Kept", 5)
    tracker.flush(now=AT)
    assert redis.hgetall("j|261130|8:05") == {b"Kept|ms": b"10", b"Kept|p": b"2"}
    assert u16_buckets(redis, "h|Kept-30-8:5")[0] == 2


def test_flush_if_due_waits_for_the_interval(config, redis):
    config["metrics_flush_interval"] = 3600
    tracker = ExecutionTracker(config)
    tracker.record("Later", 1)
    assert tracker.flush_if_due() == 0
    assert redis.dbsize() == 0
    config["metrics_flush_interval"] = 0
    assert tracker.flush_if_due() > 0
    assert redis.dbsize() == 3


def test_the_middleware_counts_under_the_wrapped_class(config, redis):
    middleware = History()
    middleware.config = config
    job = {"class": "Sidekiq::ActiveJob::Wrapper", "wrapped": "ReportJob", "args": [], "jid": "a" * 24}
    assert middleware.call(None, job, "default", lambda: 7) == 7
    middleware.call(None, {"class": "plain.Job", "args": []}, "default", lambda: None)
    tracker_for(config).flush(now=AT)
    assert set(redis.hgetall("j|261130|8:05")) == {b"ReportJob|ms", b"ReportJob|p", b"plain.Job|ms", b"plain.Job|p"}


def test_one_tracker_per_configuration_even_when_raced(config):
    found = []
    threads = [threading.Thread(target=lambda: found.append(tracker_for(config))) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(tracker) for tracker in found}) == 1


def test_both_metrics_middlewares_are_built_in_and_innermost(config):
    chain = [entry.klass for entry in config.server_middleware]
    assert chain[0] is InterruptHandler
    assert chain.index(Expiry) < chain.index(Statsd) < chain.index(History) == len(chain) - 1
    config.server_middleware.remove(History)  # how an application opts out
    assert History not in config.server_middleware
