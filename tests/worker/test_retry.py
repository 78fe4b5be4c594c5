"""The retry layer booking failures into a real server."""

from __future__ import annotations

import json
import time
from typing import ClassVar

import pytest

import wurk
from wurk.errors import Shutdown
from wurk.server.builtin_middleware import current_jobstr
from wurk.server.retry import Handled, JobRetry, decompress_backtrace, default_delay


class Plain(wurk.Job):
    def perform(self):
        pass


class Custom(wurk.Job, retry=5):
    answer: object = None
    exhausted_answer: object = None
    calls: ClassVar[list] = []

    @classmethod
    def retry_in(cls, count, exc, job):
        if isinstance(cls.answer, Exception):
            raise cls.answer
        return cls.answer

    @classmethod
    def retries_exhausted(cls, job, exc):
        cls.calls.append(job["jid"])
        if isinstance(cls.exhausted_answer, Exception):
            raise cls.exhausted_answer
        return cls.exhausted_answer


def fail(retrier, job_class, job, exc=None, queue="default"):
    exc = exc or RuntimeError("it broke")

    def body():
        return retrier.run_local(job_class, job, queue, lambda: (_ for _ in ()).throw(exc))

    with pytest.raises(Handled):
        retrier.run_global(job, queue, body)


def job(**fields):
    return {"retry": True, "queue": "default", "args": [], "class": "x", "jid": "a" * 24, **fields}


@pytest.fixture
def retrier(config):
    Custom.answer = Custom.exhausted_answer = None
    Custom.calls = []
    return JobRetry(config)


def only(redis, key):
    [(member, score)] = redis.zrange(key, 0, -1, withscores=True)
    return json.loads(member), score


def test_first_and_later_failures_stamp_sidekiqs_fields(retrier, redis):
    payload = job(backtrace=True)
    fail(retrier, Plain, payload, ValueError("bad value"))
    stored, score = only(redis, "retry")
    assert list(stored)[-5:] == ["error_message", "error_class", "failed_at", "retry_count", "error_backtrace"]
    assert (stored["error_class"], stored["error_message"], stored["retry_count"]) == ("ValueError", "bad value", 0)
    assert stored["failed_at"] / 1000 + 15 <= score < stored["failed_at"] / 1000 + 25
    assert "test_retry.py" in decompress_backtrace(stored["error_backtrace"])[0]  # innermost first
    redis.delete("retry")
    fail(retrier, Plain, stored, ValueError("again"))
    second, score = only(redis, "retry")
    assert list(second)[-1] == "retried_at"
    assert second["retry_count"] == 1
    assert second["failed_at"] == stored["failed_at"]
    assert second["retried_at"] / 1000 + 16 <= score < second["retried_at"] / 1000 + 36


def test_error_class_names_are_qualified_and_messages_bounded(retrier, redis):
    class Local(Exception):
        pass

    fail(retrier, Plain, job(), Local("x" * 20_000 + "\ud800"))
    stored, _ = only(redis, "retry")
    assert stored["error_class"].endswith("Local")
    assert "." in stored["error_class"]
    assert len(stored["error_message"]) == 10_000


def test_retry_queue_and_backtrace_line_limit_and_cleaner(retrier, redis, config):
    config["backtrace_cleaner"] = lambda lines: [line.upper() for line in lines]
    fail(retrier, Plain, job(retry_queue="slow", backtrace=1), queue="default")
    stored, _ = only(redis, "retry")
    assert stored["queue"] == "slow"
    lines = decompress_backtrace(stored["error_backtrace"])
    assert len(lines) == 1
    assert lines[0] == lines[0].upper()


def test_count_exhaustion_and_dead_set(retrier, redis, config):
    deaths = []
    config.death_handlers.append(lambda payload, exc: deaths.append((payload["jid"], str(exc))))
    fail(retrier, Custom, job(retry=2, retry_count=1))
    dead, score = only(redis, "dead")
    assert dead["retry_count"] == 2
    assert abs(score - time.time()) < 5
    assert redis.zcard("retry") == 0
    assert deaths == [("a" * 24, "it broke")]
    assert Custom.calls == ["a" * 24]


def test_retry_for_ignores_the_count(retrier, redis):
    long_ago = int((time.time() - 7200) * 1000)
    fail(retrier, Plain, job(retry=25, retry_for=3600, failed_at=long_ago, retry_count=0))
    assert redis.zcard("dead") == 1
    fail(retrier, Plain, job(retry=0, retry_for=3600, jid="b" * 24))  # young: keeps retrying despite retry=0
    assert redis.zcard("retry") == 1


@pytest.mark.parametrize(
    ("answer", "where", "delay"),
    [
        (120, "retry", 120),
        (30.9, "retry", 30),
        ("kill", "dead", None),
        ("discard", None, None),
        (None, "retry", 15),
        (0, "retry", 15),
        (-3, "retry", 15),
        ("nonsense", "retry", 15),
    ],
)
def test_retry_in_contract(retrier, redis, config, answer, where, delay):
    deaths = []
    config.death_handlers.append(lambda payload, exc: deaths.append(payload))
    Custom.answer = answer
    started = time.time()
    fail(retrier, Custom, job(retry=5))
    for key in ("retry", "dead"):
        assert redis.zcard(key) == (1 if key == where else 0)
    if where == "retry":
        _, score = only(redis, "retry")
        assert started + delay <= score < time.time() + delay + 10
    if answer == "discard":
        assert "discarded_at" in deaths[0]
    if answer in ("kill", "discard"):
        assert len(deaths) == 1


def test_a_raising_retry_in_falls_back_and_is_reported(retrier, redis, config):
    reported = []
    config.error_handlers.append(lambda exc, ctx, cfg: reported.append(ctx["context"]))
    Custom.answer = ZeroDivisionError("bad hook")
    fail(retrier, Custom, job(retry=5))
    assert redis.zcard("retry") == 1
    assert "Failure scheduling retry via retry_in" in reported


def test_retries_exhausted_can_discard_and_its_errors_are_reported(retrier, redis, config):
    reported = []
    config.error_handlers.append(lambda exc, ctx, cfg: reported.append(ctx["context"]))
    Custom.exhausted_answer = "discard"
    fail(retrier, Custom, job(retry=0))
    assert redis.zcard("dead") == 0
    Custom.exhausted_answer = RuntimeError("hook broke")
    fail(retrier, Custom, job(retry=0, jid="c" * 24))
    assert redis.zcard("dead") == 1
    assert "Error calling retries_exhausted" in reported


def test_dead_false_discards_on_exhaustion(retrier, redis):
    fail(retrier, Plain, job(retry=0, dead=False))
    assert redis.zcard("dead") == 0
    assert redis.zcard("retry") == 0


def test_retry_false_runs_death_handlers_only(retrier, redis, config):
    deaths = []
    config.death_handlers.append(lambda payload, exc: deaths.append(payload))
    config.death_handlers.append(lambda payload, exc: 1 / 0)  # a broken handler does not stop the others
    config.death_handlers.append(lambda payload, exc: deaths.append("after"))
    fail(retrier, Plain, job(retry=False))
    assert redis.zcard("retry") == redis.zcard("dead") == 0
    assert deaths[0]["jid"] == "a" * 24
    assert "error_class" not in deaths[0]
    assert deaths[1] == "after"


def test_missing_retry_key_takes_the_class_option(retrier, redis):
    payload = job()
    del payload["retry"]
    fail(retrier, Custom, payload)
    assert only(redis, "retry")[0]["retry"] == 5


def test_a_shutdown_is_never_booked(retrier, redis):
    def body():
        try:
            raise Shutdown()
        except Shutdown:
            raise RuntimeError("cleanup failed during shutdown")  # noqa: B904 - the point of the test

    with pytest.raises(Shutdown):
        retrier.run_global(job(), "default", lambda: retrier.run_local(Plain, job(), "default", body))
    assert redis.zcard("retry") == redis.zcard("dead") == 0


def test_the_dead_set_is_trimmed_by_age_and_size(retrier, redis, config):
    config["dead_max_jobs"] = 3
    config["dead_timeout_in_seconds"] = 100
    redis.zadd("dead", {"ancient": time.time() - 1000, "old1": time.time() - 50, "old2": time.time() - 40})
    for index in range(3):
        retrier.kill_raw(f"raw-{index}")
    members = [m.decode() for m in redis.zrange("dead", 0, -1)]
    assert "ancient" not in members
    assert len(members) == 2  # Sidekiq's ZREMRANGEBYRANK 0 -max keeps max - 1
    assert members[-1] == "raw-2"


def test_a_failure_is_booked_from_the_fetched_payload_of_the_same_job(retrier, redis, config):
    deaths = []
    config.death_handlers.append(lambda payload, exc: deaths.append(payload))
    fetched = job(args=["ciphertext"], retry=0)
    token = current_jobstr.set(json.dumps(fetched))
    try:
        fail(retrier, Plain, {**fetched, "args": ["plaintext"], "retry": 5, "note": "middleware"})
        other = job(args=["plaintext"], jid="d" * 24)  # the variable holds another job's payload
        fail(retrier, Plain, other)
    finally:
        current_jobstr.reset(token)
    dead, _ = only(redis, "dead")
    assert (dead["args"], dead["retry"]) == (["ciphertext"], 0)
    assert "note" not in dead
    assert deaths[0] is not fetched  # a fresh parse, not the caller's dict
    retried, _ = only(redis, "retry")
    assert (retried["jid"], retried["args"]) == ("d" * 24, ["plaintext"])


def test_backoff_formula():
    assert [default_delay(count) for count in (0, 1, 2, 5, 24)] == [15, 16, 31, 640, 331_791]
