"""Entries written by Ruby Sidekiq (8.1.7 and 7.3.2 captures) read, display and move."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.helpers import ROOT
from wurk.api import DeadSet, Queue, RetrySet, ScheduledSet

FIXTURES = ROOT / "tests" / "fixtures"
VERSIONS = ["sidekiq-8.1.7", "sidekiq-7.3.2"]


def fixture(version: str, name: str) -> dict:
    return json.loads((FIXTURES / version / f"{name}.json").read_text(encoding="utf-8"))


def stamp(value) -> datetime:
    """What Ruby's Time.at would make of a payload timestamp."""
    if isinstance(value, float):
        return datetime.fromtimestamp(value, UTC)
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=value)


def load_member(redis, key: str, data: dict) -> None:
    redis.zadd(key, {data["member_raw"].encode(): float(data["score_as_returned_by_redis"])})


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("key", "name"),
    [("retry", "retry-entry"), ("retry", "retry-entry-second-failure"), ("dead", "dead-entry-exhausted")],
)
def test_retry_and_dead_entries_read_as_ruby_reads_them(config, redis, version, key, name):
    data = fixture(version, name)
    load_member(redis, key, data)
    job_set = RetrySet() if key == "retry" else DeadSet()
    [entry] = list(job_set)
    parsed = data["parsed"]
    assert entry.value == data["member_raw"].encode()
    assert entry.item == parsed
    assert (entry.klass, entry.display_class, entry.args) == ("FailJob", "FailJob", ["will fail"])
    assert entry.display_args == ["will fail"]
    assert entry.jid == parsed["jid"]
    assert entry.queue == "default"
    assert entry.error() is True
    assert (entry.error_class, entry.retry_count) == ("ArgumentError", parsed["retry_count"])
    assert entry.error_message == 'boom from FailJob ["will fail"]'
    assert entry.error_backtrace == data["error_backtrace_decoding"]["decoded"]
    assert entry.created_at == stamp(parsed["created_at"])
    assert entry.enqueued_at == stamp(parsed["enqueued_at"])
    assert entry.failed_at == stamp(parsed["failed_at"])
    assert entry.retried_at == (stamp(parsed["retried_at"]) if "retried_at" in parsed else None)
    assert entry.created_at.year == 2026
    assert entry.score == float(data["score_as_returned_by_redis"])
    assert entry.id == f"{float(data['score_as_returned_by_redis'])!r}|{parsed['jid']}"
    assert job_set.find_job(parsed["jid"]).value == entry.value
    assert job_set.fetch(entry.id.split("|")[0], parsed["jid"])[0].value == entry.value


@pytest.mark.parametrize("version", VERSIONS)
def test_a_ruby_retry_is_retried_from_python(config, redis, version):
    data = fixture(version, "retry-entry-second-failure")
    load_member(redis, "retry", data)
    pushed = next(iter(RetrySet())).retry()
    assert pushed is not None
    [job] = list(Queue())
    expected = dict(data["parsed"], retry_count=0)
    expected.pop("enqueued_at")
    assert {k: v for k, v in job.item.items() if k != "enqueued_at"} == expected
    assert isinstance(job["enqueued_at"], int)
    assert RetrySet().size == 0


@pytest.mark.parametrize("version", VERSIONS)
def test_a_ruby_queued_job_lists_and_deletes(config, redis, version):
    data = fixture(version, "job-perform_async")
    redis.sadd("queues", "default")
    redis.lpush("queue:default", data["raw"].encode())
    [job] = list(Queue())
    assert job.args == [1, "two", {"three": 3, "nested": [None, True, 1.5]}, "héllo ✓ </script>"]
    assert job.display_class == "OkJob"
    assert job.enqueued_at == stamp(data["parsed"]["enqueued_at"])
    assert job.latency > 0
    assert Queue().latency > 0
    assert Queue().delete_job(data["parsed"]["jid"]) == 1


@pytest.mark.parametrize("version", VERSIONS)
def test_a_ruby_scheduled_job(config, redis, version):
    data = fixture(version, "schedule-perform_in")
    load_member(redis, "schedule", data)
    [entry] = list(ScheduledSet())
    assert entry.args == ["in one hour"]
    assert entry.error() is False
    assert entry.created_at == stamp(data["parsed"]["created_at"])
    assert entry.enqueued_at is None
    assert entry.at == datetime.fromtimestamp(float(data["score_as_returned_by_redis"]), UTC)


def test_a_ruby_dead_entry_with_retry_zero_has_no_backtrace(config, redis):
    load_member(redis, "dead", fixture("sidekiq-8.1.7", "dead-entry-retry-0"))
    [entry] = list(DeadSet())
    assert (entry.klass, entry.error_class, entry.retry_count) == ("DeadNowJob", "KeyError", 0)
    assert entry.error_backtrace is None
