"""Payloads a worker cannot run or cannot book, each found by the fuzz tests
(``tests/fuzz/``) and each once a crash or an endless loop: the payload now
goes to the dead set, the jobs around it run once, and the worker lives on."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

import pytest
import redis as redis_py

from tests.helpers import Subprocess, WorkerPool, wait_for

pytestmark = pytest.mark.timeout(90)

ECHO = "tests.fuzz.fuzz_app.Echo"
FAILS = "tests.fuzz.fuzz_app.Fails"


@pytest.fixture
def workers(config, redis_url, tmp_path) -> Iterator[WorkerPool]:
    pool = WorkerPool(redis_url, tmp_path, "tests.fuzz.fuzz_app", {})
    yield pool
    pool.stop_all()


@pytest.fixture
def worker(workers) -> Subprocess:
    return workers.start("-c", "2")


def payload(klass: str = ECHO, **fields) -> dict:
    now = int(time.time() * 1000)
    job = {"class": klass, "args": [], "queue": "default", "retry": True, "jid": os.urandom(12).hex()}
    return {**job, "created_at": now, "enqueued_at": now, **fields}


def push(redis: redis_py.Redis, *raws: bytes | str) -> None:
    redis.sadd("queues", "default")
    for raw in raws:
        redis.lpush("queue:default", raw)


def runs(redis: redis_py.Redis) -> dict[str, int]:
    return {key.decode(): int(value) for key, value in redis.hgetall("executions").items()}


def settle(redis: redis_py.Redis, worker: Subprocess, good: list[dict], dead: int) -> None:
    """Wait until the good jobs ran and ``dead`` entries are in the dead set,
    with nothing left queued or claimed; then the worker must be alive."""

    def done() -> bool:
        claimed = sum(redis.llen(key) for key in redis.scan_iter(match="queue:default|*"))
        ran = all(job["jid"] in runs(redis) for job in good)
        return ran and redis.zcard("dead") == dead and not redis.llen("queue:default") and not claimed

    wait_for(done, timeout=30)
    assert worker.proc.poll() is None
    assert runs(redis) == {job["jid"]: 1 for job in good}


def test_a_payload_nested_past_the_recursion_limit_kills_no_processor(worker, redis):
    """It raised ``RecursionError`` out of the parser, which ended the
    processor thread; the job, still claimed, came back and ended the next."""
    before, after = payload(), payload()
    deep = json.dumps(payload(args=["@"])).replace('"@"', "[" * 5000 + "]" * 5000)
    push(redis, json.dumps(before), deep, json.dumps(after))
    settle(redis, worker, [before, after], dead=1)
    assert redis.zrange("dead", 0, -1) == [deep.encode()]
    assert "context=processor" not in worker.log.read_text("utf-8", "replace")


@pytest.mark.parametrize(
    "piece", ["NaN", "-Infinity", "1e400", '"\\ud800"'], ids=["nan", "inf", "overflow", "surrogate"]
)
def test_a_failing_job_holding_what_json_cannot_write_is_dead_at_once(worker, redis, piece):
    """Python's parser took it, the job ran and failed, and writing its retry
    raised (no NaN in JSON, no lone surrogate in UTF-8): given back unbooked,
    it ran and failed again, forever. It is now refused before it runs, as
    Ruby's parser refuses it, and kept byte for byte."""
    good = payload()
    raw = json.dumps(payload(FAILS, args=["@"])).replace('"@"', piece)
    push(redis, raw, json.dumps(good))
    settle(redis, worker, [good], dead=1)
    assert redis.zrange("dead", 0, -1) == [raw.encode()]


@pytest.mark.parametrize(
    ("field", "value"),
    [("retry_count", "abc"), ("retry_count", 2**60), ("failed_at", "yesterday"), ("retry_for", []), ("jid", 7)],
)
def test_a_job_with_a_malformed_field_is_a_dead_entry_that_says_why(worker, redis, field, value):
    """A ``retry_count`` or ``failed_at`` the retry layer could not read made
    booking a failure raise, so the job ran again and again. Now the payload
    never runs: it is a Sidekiq dead entry whose error names the field."""
    good = payload()
    bad = payload(FAILS, args=["marker"], **{field: value})
    push(redis, json.dumps(bad), json.dumps(good))
    settle(redis, worker, [good], dead=1)
    [member] = redis.zrange("dead", 0, -1)
    entry = json.loads(member)
    assert entry["args"] == ["marker"]
    if field != "failed_at":  # a dead entry's failed_at is when it was found
        assert entry[field] == value
    assert entry["error_class"] == "wurk.client.fields.UnreadableJobError"
    assert f"the field {field!r}" in entry["error_message"]
    assert isinstance(entry["failed_at"], int)


def test_an_error_whose_message_cannot_be_read_is_booked(worker, redis):
    """``str()`` of the error raised inside the retry layer; it now books the
    failure with a message saying so."""
    bad = payload("tests.fuzz.fuzz_app.FailsUnprintably", retry=0)
    push(redis, json.dumps(bad))
    wait_for(lambda: redis.zcard("dead") == 1, timeout=30)
    [member] = redis.zrange("dead", 0, -1)
    entry = json.loads(member)
    assert entry["jid"] == bad["jid"]
    assert entry["error_message"] == "<the message of Unprintable could not be read: RuntimeError>"
    assert runs(redis) == {bad["jid"]: 1}


def test_a_failure_the_retry_layer_cannot_book_sends_the_job_to_the_dead_set(workers, redis):
    """Anything but Redis trouble while booking (here a backtrace cleaner
    that raises, so both retry guards fail) left the job claimed and unbooked:
    given back, it ran and failed the same way, forever. It now goes to the
    dead set as it was fetched, and the jobs after it run."""
    worker = workers.start("-c", "1", env={"TEST_BROKEN_CLEANER": "1"})
    bad, good = json.dumps(payload(FAILS, backtrace=True)), payload()
    push(redis, bad, json.dumps(good))
    settle(redis, worker, [good, json.loads(bad)], dead=1)
    assert redis.zrange("dead", 0, -1) == [bad.encode()]


def test_a_payload_of_megabytes_is_dead_byte_for_byte_and_not_copied_into_the_log(worker, redis):
    """The error handler logged the whole payload as context: a 3 MB line per bad payload."""
    huge = b'{"class":"' + b"x" * 3_000_000
    good = payload()
    push(redis, huge, json.dumps(good))
    settle(redis, worker, [good], dead=1)
    assert redis.zrange("dead", 0, -1) == [huge]
    log = worker.log.read_text("utf-8", "replace")
    assert "(3000010 characters)" in log
    assert len(log) < 100_000


def test_a_job_retried_by_hand_more_often_than_it_failed_is_booked(worker, redis):
    """A manual retry lowers ``retry_count``, as Sidekiq's does, so it can go
    below zero; the jitter of such a count was an empty random range, which
    raised while booking. It is now booked like any other failure."""
    failing = payload(FAILS, retry_count=-4)
    push(redis, json.dumps(failing))
    wait_for(lambda: redis.zcard("retry") == 1, timeout=30)
    [member] = redis.zrange("retry", 0, -1)
    assert json.loads(member)["retry_count"] == -3
    assert runs(redis) == {failing["jid"]: 1}
    assert redis.zcard("dead") == 0
